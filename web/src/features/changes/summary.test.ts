import { describe, expect, it } from 'vitest';
import { summarize, warningsOf } from './summary';
import type { Change, Diff } from '../../api/client';

describe('summarize', () => {
  const cases: { desc: string; diff: Diff; next?: unknown; want: string[] }[] = [
    {
      desc: 'a changed rate reads old → new with the period',
      diff: { rules: [{ kind: 'limits', id: 'orders-per-ip', op: 'changed', fields: [{ path: 'rate', old: 5, new: 50 }] }], added: 0, removed: 0, changed: 1 },
      next: { namespace: 'demo', limits: [{ id: 'orders-per-ip', algorithm: 'token_bucket', rate: 50, period: '1s' }] },
      want: ['limit orders-per-ip: rate 5 → 50 per 1s'],
    },
    {
      desc: 'an added limit is described',
      diff: { rules: [{ kind: 'limits', id: 'new', op: 'added', new: { algorithm: 'fixed_window', rate: 10, period: '1m', key: ['ip'], scope: 'cluster' } }] },
      want: ['limit new added: fixed_window 10 per 1m, key [ip], cluster-wide'],
    },
    {
      desc: 'a removed route and a reorder',
      diff: { rules: [{ kind: 'routes', id: 'old', op: 'removed', old: {} }], reordered: ['routes'] },
      want: ['route old removed', 'routes reordered (for routes, the first match wins)'],
    },
    {
      desc: 'several fields of a manual degrade',
      diff: { rules: [{ kind: 'degrades', id: 'd', op: 'changed', fields: [{ path: 'mode', old: 'auto', new: 'manual' }, { path: 'level', new: 2 }] }] },
      want: ['degrade d: mode auto → manual; level (none) → 2'],
    },
    {
      desc: 'kind: service rules name their resources, sdk: key parts and bucket',
      diff: {
        kind: { path: 'kind', old: 'gateway', new: 'service' },
        rules: [
          { kind: 'limits', id: 'per-user', op: 'added', new: { resources: ['orders.Create'], key: ['sdk:user'], algorithm: 'token_bucket', rate: 300, period: '1s', scope: 'cluster', bucket: 'orders-per-user' } },
          { kind: 'breakers', id: 'db', op: 'added', new: { resources: ['db.InsertOrder'], window: '10s', openFor: '5s' } },
          { kind: 'degrades', id: 'queue', op: 'added', new: { resources: ['queue.PublishOrder', 'queue.Ack'], mode: 'manual' } },
        ],
      },
      want: [
        'kind gateway → service',
        'limit per-user added: token_bucket 300 per 1s, key [sdk:user], cluster-wide in bucket orders-per-user, on resources [orders.Create]',
        'breaker db added: window 10s, open for 5s, on resources [db.InsertOrder]',
        'degrade queue added: manual mode, level 0, on resources [queue.PublishOrder, queue.Ack]',
      ],
    },
    { desc: 'no diff', diff: { rules: [] }, want: [] },
  ];
  for (const c of cases) {
    it(c.desc, () => {
      expect(summarize(c.diff, [], c.next).lines.map((l) => l.text)).toEqual(c.want);
    });
  }

  it('attaches warnings to their rule and keeps the rest general', () => {
    const diff: Diff = { rules: [{ kind: 'limits', id: 'a', op: 'changed', fields: [{ path: 'rate', old: 5, new: 500 }] }] };
    const { lines, general } = summarize(diff, [
      { code: 'limit-loosened-10x', path: 'limits[a].rate', message: 'rate raised 100×' },
      { code: 'cluster-without-redis', message: 'no live node has Redis' },
    ]);
    expect(lines[0].warnings.map((w) => w.code)).toEqual(['limit-loosened-10x']);
    expect(general.map((w) => w.code)).toEqual(['cluster-without-redis']);
  });

  it('reads warnings from a change, and none from an older server', () => {
    expect(warningsOf({ id: 1, warnings: [{ code: 'x', message: 'y' }] } as unknown as Change)).toHaveLength(1);
    expect(warningsOf({ id: 1 } as Change)).toEqual([]);
  });
});
