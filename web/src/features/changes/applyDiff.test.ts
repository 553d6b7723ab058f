import { describe, expect, it } from 'vitest';
import { applyDiff } from './applyDiff';

describe('applyDiff', () => {
  const base = {
    namespace: 'demo',
    routes: [{ id: 'a', match: { pathPrefix: '/a' }, upstream: { targets: [{ url: 'http://x', weight: 1 }] } }],
    limits: [
      { id: 'l1', algorithm: 'token_bucket', rate: 5, period: '1s', burst: 10 },
      { id: 'l2', algorithm: 'concurrency', rate: 50 },
    ],
  };
  const cases: { desc: string; diff: Parameters<typeof applyDiff>[1]; check: (r: Record<string, unknown>) => void }[] = [
    {
      desc: 'a changed field is set',
      diff: { rules: [{ kind: 'limits', id: 'l1', op: 'changed', fields: [{ path: 'rate', old: 5, new: 50 }] }] },
      check: (r) => expect((r.limits as { rate: number }[])[0].rate).toBe(50),
    },
    {
      desc: 'a nested field is set and a removed one deleted',
      diff: { rules: [{ kind: 'routes', id: 'a', op: 'changed', fields: [{ path: 'upstream.targets[0].weight', old: 1, new: 3 }, { path: 'match.pathPrefix', old: '/a' }] }] },
      check: (r) => expect((r.routes as unknown[])[0]).toEqual({ id: 'a', match: {}, upstream: { targets: [{ url: 'http://x', weight: 3 }] } }),
    },
    {
      desc: 'added and removed rules',
      diff: {
        rules: [
          { kind: 'limits', id: 'l2', op: 'removed', old: {} },
          { kind: 'breakers', id: 'b', op: 'added', new: { id: 'b', window: '10s', openFor: '5s' } },
        ],
      },
      check: (r) => {
        expect((r.limits as { id: string }[]).map((l) => l.id)).toEqual(['l1']);
        expect(r.breakers).toEqual([{ id: 'b', window: '10s', openFor: '5s' }]);
      },
    },
    {
      desc: 'removing the last rule of a kind drops the kind',
      diff: { rules: [{ kind: 'routes', id: 'a', op: 'removed' }] },
      check: (r) => expect('routes' in r).toBe(false),
    },
  ];
  for (const c of cases) {
    it(c.desc, () => {
      c.check(applyDiff(base, c.diff));
      expect(base.limits[0].rate).toBe(5);
    });
  }
});
