import { describe, expect, it } from 'vitest';
import { fromYaml, isService, lineOfPath, MaxYamlBytes, newLimit, newRule, parsePath, ruleOfPath, sameRuleSet, setField, toYaml, toYamlGeneral, withDocKind, withLimit } from './ruleset';
import type { RuleSet } from '../../api/client';

const demo: RuleSet = {
  namespace: 'demo',
  routes: [{ id: 'orders', match: { pathPrefix: '/api/orders', methods: ['GET', 'POST'] }, upstream: { targets: [{ url: 'http://127.0.0.1:8081' }] } }],
  limits: [
    { id: 'orders-per-ip', routes: ['orders'], key: ['ip'], algorithm: 'token_bucket', rate: 5, period: '1s', burst: 10 },
    { id: 'shared', algorithm: 'sliding_window', rate: 100, period: '1s', scope: 'cluster' },
  ],
};

describe('form ↔ YAML round trip', () => {
  it('YAML of a rule set parses back to the same rule set', () => {
    const r = fromYaml(toYaml(demo));
    expect(r.ok).toBe(true);
    if (r.ok) expect(r.ruleSet).toEqual(demo);
  });

  it('a form edit shows in the YAML and survives the trip back', () => {
    const edited = withLimit(demo, 0, (l) => setField(l, 'rate', 50));
    const yaml = toYaml(edited);
    expect(yaml).toContain('rate: 50');
    const r = fromYaml(yaml);
    expect(r.ok && r.ruleSet.limits?.[0].rate).toBe(50);
    expect(demo.limits?.[0].rate).toBe(5); // the original is untouched
  });

  it('clearing a field removes it', () => {
    const l = setField(demo.limits![0], 'burst', undefined);
    expect('burst' in l).toBe(false);
  });

  it('sameRuleSet ignores key order', () => {
    expect(sameRuleSet({ a: 1, b: [{ x: 1, y: 2 }] }, { b: [{ y: 2, x: 1 }], a: 1 })).toBe(true);
    expect(sameRuleSet(demo, withLimit(demo, 0, (l) => setField(l, 'rate', 6)))).toBe(false);
  });

  it('newLimit picks an unused id and sensible defaults', () => {
    const l = newLimit(demo);
    expect(l.id).toBe('limit-3');
    expect(l).toMatchObject({ algorithm: 'token_bucket', rate: 100, period: '1s' });
  });
});

describe('YAML errors', () => {
  const cases: { desc: string; text: string; want: RegExp; line?: number }[] = [
    { desc: 'a syntax error names its line', text: 'namespace: demo\nlimits:\n  - id: x\n   rate: 1\n', want: /./, line: 4 },
    { desc: 'a duplicate key is refused', text: 'namespace: a\nnamespace: b\n', want: /unique|duplicate/i },
    { desc: 'a list is not a document', text: '- 1\n- 2\n', want: /mapping/ },
  ];
  for (const c of cases) {
    it(c.desc, () => {
      const r = fromYaml(c.text);
      expect(r.ok).toBe(false);
      if (!r.ok) {
        expect(r.message).toMatch(c.want);
        if (c.line) expect(r.line).toBe(c.line);
      }
    });
  }

  it('refuses a 10 MB paste without parsing it', () => {
    const t0 = performance.now();
    const r = fromYaml('#'.repeat(10 << 20));
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.message).toMatch(/limit is 8 MB/);
    expect(MaxYamlBytes).toBe(8 << 20);
    expect(performance.now() - t0).toBeLessThan(5000);
  });
});

describe('field paths', () => {
  it('parses index and id paths', () => {
    expect(parsePath('limits[2].rate')).toEqual(['limits', 2, 'rate']);
    expect(parsePath('limits[orders-per-ip].rate')).toEqual(['limits', 'orders-per-ip', 'rate']);
    expect(parsePath('routes[0].upstream.targets[1].url')).toEqual(['routes', 0, 'upstream', 'targets', 1, 'url']);
  });

  it('finds the YAML line of a server error path', () => {
    const yaml = toYaml(demo);
    const line = lineOfPath(yaml, 'limits[1].rate');
    expect(yaml.split('\n')[line - 1]).toMatch(/rate: 100/);
    expect(lineOfPath(yaml, 'limits[shared].scope')).toBe(yaml.split('\n').findIndex((l) => l.includes('scope: cluster')) + 1);
    expect(lineOfPath(yaml, 'nothing')).toBe(0);
  });

  it('maps a path to its rule', () => {
    expect(ruleOfPath(demo, 'limits[1].rate')).toEqual({ kind: 'limits', index: 1, id: 'shared', field: 'rate' });
    expect(ruleOfPath(demo, 'namespace')).toBeUndefined();
  });
});

describe('toYaml', () => {
  const tricky: unknown = {
    namespace: 'demo',
    routes: [
      {
        id: 'r',
        match: { pathPrefix: '/api/x', methods: ['GET'], headers: { 'X-Env': 'yes', 'x:y': '' } },
        upstream: { targets: [{ url: 'http://127.0.0.1:8081', weight: 2 }], timeout: '1s', stripPrefix: true },
      },
    ],
    limits: [{ id: 'l', algorithm: 'token_bucket', rate: 5, period: '1m0s', key: [], exempt: ['10.0.0.0/8', '::1'], shadow: false }],
    degrades: [
      {
        id: 'd',
        mode: 'auto',
        triggers: { level1: { qpsAbove: 1.5 } },
        fallback: { html: '<p>busy</p>\n  "quoted" # not a comment', json: { a: [1, { b: null }], n: '1', t: 'true', e: '', s: ' lead' } },
      },
    ],
    weird: ['-', '-1', '.5', '1e3', 'null', '~', 'on', 'NaN', 'Infinity', '#x', 'a: b', 'ünïcode', [], {}, [['nested']]],
  };
  it('reads back to the same value, including strings YAML would mistake', () => {
    const y = toYaml(tricky as RuleSet);
    const r = fromYaml(y);
    expect(r.ok).toBe(true);
    if (r.ok) expect(r.ruleSet).toEqual(tricky);
  });
  it('agrees with the yaml library on the value of the demo rules', () => {
    expect(fromYaml(toYaml(demo))).toEqual(fromYaml(toYamlGeneral(demo)));
  });
  it('writes plain scalars where it can', () => {
    expect(toYaml(demo)).toContain('  - id: orders-per-ip\n    routes:\n      - orders\n');
    expect(toYaml(demo)).toContain('period: 1s');
    expect(toYaml(demo)).toContain('url: "http://127.0.0.1:8081"');
  });
});

describe('the document kind', () => {
  it('service is written; gateway, the default, is written absent', () => {
    const svc = withDocKind(demo, 'service');
    expect(svc.kind).toBe('service');
    expect(isService(svc)).toBe(true);
    expect(toYaml(svc)).toMatch(/^kind: service$/m);
    const gw = withDocKind({ ...demo, kind: 'service' }, 'gateway');
    expect('kind' in gw).toBe(false);
    expect(isService(gw)).toBe(false);
    expect(withDocKind(demo, 'service').routes).toBe(demo.routes);
  });
  it('a new route of a service document has no upstream; a new limit keys on global', () => {
    const svc = withDocKind(demo, 'service');
    expect(newRule(svc, 'routes')).toEqual({ id: 'route-2', match: { pathPrefix: '/' } });
    expect(newRule(demo, 'routes')).toHaveProperty('upstream.targets');
    expect(newRule(svc, 'limits')).toMatchObject({ key: ['global'] });
    expect(newRule(demo, 'limits')).toMatchObject({ key: ['ip'] });
  });
  it('resources, bucket and kind survive the YAML round trip', () => {
    const rs = { ...withDocKind(demo, 'service'), limits: [{ id: 'l', resources: ['orders.Create', '/shop.Orders/Create'], key: ['sdk:user'], algorithm: 'token_bucket', rate: 5, scope: 'cluster', bucket: 'shared-orders' }] } as RuleSet;
    const r = fromYaml(toYaml(rs));
    expect(r.ok && r.ruleSet).toEqual(rs);
  });
});
