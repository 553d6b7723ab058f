import { describe, expect, it } from 'vitest';
import type { FleetEvent, StatPoint, Stats } from '../../api/fleet';
import { eventLabel, fleetSeries, latest, markerEvents, mergePoints, mergeStats, parseDuration, placeMarkers, rates, stepSeconds, threshold, timeGrid, legendStats, isolated, variantSeries, variantTotals, variantShares, stepAt } from './series';

describe('parseDuration', () => {
  it.each([
    { desc: 'seconds', in: '5s', want: 5 },
    { desc: 'minutes', in: '1m', want: 60 },
    { desc: 'compound', in: '1h30m', want: 5400 },
    { desc: 'milliseconds', in: '250ms', want: 0.25 },
    { desc: 'fraction', in: '1.5s', want: 1.5 },
    { desc: 'zero', in: '0', want: 0 },
    { desc: 'no unit', in: '5', want: NaN },
    { desc: 'empty', in: '', want: NaN },
    { desc: 'trailing junk', in: '5sx', want: NaN },
  ])('$desc: $in', (c) => expect(parseDuration(c.in)).toBe(c.want));

  it('stepSeconds falls back to 5 for what it cannot read', () => {
    expect(stepSeconds('10s')).toBe(10);
    expect(stepSeconds(15)).toBe(15);
    expect(stepSeconds('bad')).toBe(5);
    expect(stepSeconds(undefined)).toBe(5);
    expect(stepSeconds(0)).toBe(5);
  });
});

describe('mergePoints', () => {
  const p = (t: number, a = 1): StatPoint => [t, a, 0, 0];
  it.each([
    { desc: 'appends newer steps', prev: [p(10), p(15)], next: [p(20)], since: 0, want: [10, 15, 20] },
    { desc: 'a step sent again replaces the old one', prev: [p(10), p(15, 1)], next: [p(15, 9)], since: 0, want: [10, 15], at15: 9 },
    { desc: 'interleaves', prev: [p(10), p(20)], next: [p(15), p(25)], since: 0, want: [10, 15, 20, 25] },
    { desc: 'drops steps before since', prev: [p(5), p(10)], next: [p(1), p(15)], since: 10, want: [10, 15] },
    { desc: 'empty both', prev: [], next: [], since: 0, want: [] },
  ])('$desc', (c) => {
    const got = mergePoints(c.prev, c.next, c.since);
    expect(got.map((x) => x[0])).toEqual(c.want);
    if (c.at15 !== undefined) expect(got.find((x) => x[0] === 15)![1]).toBe(c.at15);
  });
});

describe('mergeStats', () => {
  const base: Stats = {
    step: '5s',
    series: [
      { rule: 'a', kind: 'limit', points: [[100, 1, 0, 0], [105, 2, 0, 0]] },
      { rule: 'b', kind: 'limit', points: [[105, 5, 5, 0]] },
    ],
  };
  it('merges a stream update by rule and node, adds new series and keeps untouched ones', () => {
    const got = mergeStats(base, { series: [{ rule: 'a', kind: 'limit', points: [[110, 3, 1, 0]] }, { rule: 'a', kind: 'limit', node: 'gw-1', points: [[110, 3, 1, 0]] }] }, 0);
    expect(got.series.map((s) => [s.rule, s.node, s.points.map((p) => p[0])])).toEqual([
      ['a', undefined, [100, 105, 110]],
      ['b', undefined, [105]],
      ['a', 'gw-1', [110]],
    ]);
    expect(got.series[1]).toBe(base.series[1]);
    expect(base.series[0].points).toHaveLength(2);
  });
  it('drops what fell out of the range', () => {
    const got = mergeStats(base, { series: [] }, 105);
    expect(got.series[0].points.map((p) => p[0])).toEqual([105]);
    expect(got.series[1]).toBe(base.series[1]);
  });
  it('honours accept (a one-node query takes only that node’s series)', () => {
    const got = mergeStats({ step: '5s', series: [] }, { series: [{ rule: 'a', kind: 'limit', points: [[1, 1, 1, 1]] }, { rule: 'a', kind: 'limit', node: 'n', points: [[1, 1, 1, 1]] }] }, 0, (s) => s.node === 'n');
    expect(got.series.map((s) => s.node)).toEqual(['n']);
  });
});

describe('fleetSeries', () => {
  it('sums the nodes of a rule the control plane sent no fleet series for', () => {
    const got = fleetSeries({
      step: '5s',
      series: [
        { rule: 'r', kind: 'limit', node: 'a', points: [[10, 1, 2, 3, 1, 0], [15, 1, 0, 0, 0, 0]] },
        { rule: 'r', kind: 'limit', node: 'b', points: [[10, 10, 20, 30, 4, 0]] },
        { rule: 'q', kind: 'limit', points: [[10, 7, 0, 0]] },
        { rule: 'q', kind: 'limit', node: 'a', points: [[10, 99, 0, 0]] },
      ],
    });
    expect(got).toEqual([
      { rule: 'q', kind: 'limit', points: [[10, 7, 0, 0]] },
      { rule: 'r', kind: 'limit', points: [[10, 11, 22, 33, 5, 0], [15, 1, 0, 0, 0, 0]] },
    ]);
  });
});

describe('rates', () => {
  const grid = timeGrid(100, 120, 5);
  it('builds an aligned grid', () => expect(grid).toEqual([100, 105, 110, 115, 120]));
  it.each([
    { desc: 'counts per step become per second', points: [[100, 50, 10, 5], [110, 25, 0, 0]] as StatPoint[], m: 'allowed' as const, want: [10, null, 5, null, null] },
    { desc: 'rejected column', points: [[105, 50, 10, 5]] as StatPoint[], m: 'rejected' as const, want: [null, 2, null, null, null] },
    { desc: 'shed column, off-grid time rounds down to its step', points: [[117, 0, 0, 15]] as StatPoint[], m: 'shed' as const, want: [null, null, null, 3, null] },
    { desc: 'points outside the grid are ignored', points: [[50, 5, 5, 5], [200, 5, 5, 5]] as StatPoint[], m: 'allowed' as const, want: [null, null, null, null, null] },
    { desc: 'a negative count (a node restart) is never a negative rate', points: [[100, -20, 0, 0]] as StatPoint[], m: 'allowed' as const, want: [0, null, null, null, null] },
  ])('$desc', (c) => expect(rates(c.points, grid, 5, c.m)).toEqual(c.want));
  it('latest is the newest known rate', () => {
    expect(latest([1, 2, null])).toBe(2);
    expect(latest([null, null])).toBeUndefined();
  });
});

describe('threshold', () => {
  it.each([
    { desc: 'node scope, one node', l: { algorithm: 'fixed_window', rate: 120, period: '1m' }, chart: 'node' as const, want: 2 },
    { desc: 'node scope, a fleet of three', l: { algorithm: 'token_bucket', rate: 10, period: '1s', scope: 'node' }, chart: { nodes: 3 }, want: 30 },
    { desc: 'node scope, a fleet with no live node counts one', l: { algorithm: 'token_bucket', rate: 10 }, chart: { nodes: 0 }, want: 10 },
    { desc: 'cluster scope is the fleet’s, not times the nodes', l: { algorithm: 'sliding_window', rate: 100, period: '10s', scope: 'cluster' }, chart: { nodes: 3 }, want: 10 },
    { desc: 'explicit global key', l: { algorithm: 'fixed_window', rate: 60, period: '1m', key: ['global'] }, chart: 'node' as const, want: 1 },
    { desc: 'route key: one budget per route named', l: { algorithm: 'fixed_window', rate: 60, period: '1m', key: ['route'], routes: ['a', 'b'] }, chart: { nodes: 2 }, want: 4 },
    { desc: 'no period means per second', l: { algorithm: 'token_bucket', rate: 7 }, chart: 'node' as const, want: 7 },
  ])('line: $desc', (c) => expect(threshold(c.l, c.chart)).toEqual({ value: c.want }));

  it.each([
    { desc: 'per-IP limit: no fleet line', l: { algorithm: 'token_bucket', rate: 10, key: ['ip'] }, chart: { nodes: 3 }, note: /^per-ip limit: the rate applies to each client IP on its own/ },
    { desc: 'per-IP limit: no node line either', l: { algorithm: 'token_bucket', rate: 10, key: ['ip'] }, chart: 'node' as const, note: /^per-ip limit/ },
    { desc: 'route and header: per header value', l: { algorithm: 'token_bucket', rate: 10, key: ['route', 'header:X-User'] }, chart: { nodes: 1 }, note: /each X-User header value/ },
    { desc: 'route key on every route', l: { algorithm: 'token_bucket', rate: 10, key: ['route'] }, chart: { nodes: 1 }, note: /one budget per route/ },
    { desc: 'cluster scope on one node', l: { algorithm: 'token_bucket', rate: 10, scope: 'cluster' }, chart: 'node' as const, note: /shared by the fleet: no per-node threshold/ },
    { desc: 'concurrency', l: { algorithm: 'concurrency', rate: 7 }, chart: 'node' as const, note: /in flight/ },
    { desc: 'adaptive', l: { algorithm: 'adaptive' }, chart: { nodes: 2 }, note: /in flight/ },
    { desc: 'quota', l: { algorithm: 'quota', rate: 1000 }, chart: { nodes: 2 }, note: /budget per period/ },
    { desc: 'cost units', l: { algorithm: 'token_bucket', rate: 1000, cost: { bodyBytesPerUnit: 1024 } }, chart: { nodes: 2 }, note: /cost units/ },
    { desc: 'tiers', l: { algorithm: 'token_bucket', rate: 10, tiers: [{ id: 'gold' }] }, chart: { nodes: 2 }, note: /tiers/ },
    { desc: 'variants', l: { algorithm: 'token_bucket', rate: 10, variants: [{ id: 'v', weight: 10 }] }, chart: { nodes: 2 }, note: /variants/ },
  ])('no line: $desc', (c) => {
    const th = threshold(c.l, c.chart);
    expect(th?.value).toBeUndefined();
    expect(th?.note).toMatch(c.note);
  });

  it('has neither without a rate or with a bad period', () => {
    expect(threshold({ algorithm: 'token_bucket' }, 'node')).toBeUndefined();
    expect(threshold({ algorithm: 'token_bucket', rate: 7, period: 'x' }, 'node')).toBeUndefined();
  });
});

describe('isolated', () => {
  it.each([
    { desc: 'a lone value between gaps', in: [null, 3, null], want: [1] },
    { desc: 'lone values at the edges', in: [2, null, null, 0], want: [0, 3] },
    { desc: 'a line of two is drawn, not dotted', in: [null, 1, 2, null], want: [] },
    { desc: 'one value alone', in: [5], want: [0] },
    { desc: 'nothing', in: [null, null], want: [] },
  ])('$desc', (c) => expect(isolated(c.in)).toEqual(c.want));
});

describe('legendStats', () => {
  it.each([
    { desc: 'min, mean, max and the newest value', in: [2, 4, 9, 1], want: { min: 1, avg: 4, max: 9, last: 1 } },
    { desc: 'gaps are left out, not zeros', in: [null, 3, null, 5, null], want: { min: 3, avg: 4, max: 5, last: 5 } },
    { desc: 'zero traffic is a value', in: [0, 0, 6], want: { min: 0, avg: 2, max: 6, last: 6 } },
    { desc: 'one value', in: [7], want: { min: 7, avg: 7, max: 7, last: 7 } },
  ])('$desc', (c) => expect(legendStats(c.in)).toEqual(c.want));

  it('is undefined without any value', () => {
    expect(legendStats([])).toBeUndefined();
    expect(legendStats([null, null])).toBeUndefined();
  });

  it('agrees with the rates the chart draws', () => {
    const grid = timeGrid(1000, 1020, 5);
    const values = rates([[1000, 10, 0, 0], [1010, 30, 5, 0], [1015, 20, 0, 0]], grid, 5, 'allowed');
    expect(values).toEqual([2, null, 6, 4, null]);
    expect(legendStats(values)).toEqual({ min: 2, avg: 4, max: 6, last: 4 });
  });
});

describe('variants', () => {
  const stats: Stats = {
    step: '5s',
    series: [],
    variants: [
      { rule: 'l', variant: 'strict', node: 'gw-1', points: [[1000, 1, 4, 0], [1005, 2, 2, 0]] },
      { rule: 'l', variant: 'strict', node: 'gw-2', points: [[1005, 3, 1, 0]] },
      { rule: 'l', variant: 'base', node: 'gw-1', points: [[1000, 9, 0, 0]] },
      { rule: 'other', variant: 'base', node: 'gw-1', points: [[1000, 100, 0, 0]] },
    ],
  };

  it('sums the nodes’ series per variant, base first', () => {
    expect(variantSeries(stats, 'l')).toEqual([
      { variant: 'base', points: [[1000, 9, 0, 0]] },
      { variant: 'strict', points: [[1000, 1, 4, 0], [1005, 5, 3, 0]] },
    ]);
  });

  it('takes the fleet-wide series where there is one', () => {
    const fleet: Stats = { step: '5s', series: [], variants: [...stats.variants!, { rule: 'l', variant: 'strict', points: [[1005, 99, 0, 0]] }] };
    expect(variantSeries(fleet, 'l').find((v) => v.variant === 'strict')!.points).toEqual([[1005, 99, 0, 0]]);
  });

  it('totals a range: per-second means over its span and the share rejected', () => {
    expect(variantTotals([[995, 50, 50, 0], [1000, 1, 4, 0], [1005, 5, 3, 0]], 1000, 1010)).toEqual({ allowed: 6, rejected: 7, allowedPerSecond: 0.6, rejectedPerSecond: 0.7, rejectedShare: 7 / 13 });
    expect(variantTotals([], 1000, 1010).rejectedShare).toBeUndefined();
  });

  it('takes the highest node’s p99 for a step of summed nodes, not the sum', () => {
    const withP99: Stats = {
      step: '5s',
      series: [],
      variants: [
        { rule: 'l', variant: 'strict', node: 'gw-1', points: [[1000, 1, 4, 0, 0, 0, 0.012], [1005, 2, 2, 0, 0, 0, 0]] },
        { rule: 'l', variant: 'strict', node: 'gw-2', points: [[1000, 3, 1, 0, 0, 0, 0.3], [1005, 3, 1, 0, 0, 0, 0.004]] },
      ],
    };
    expect(variantSeries(withP99, 'l')).toEqual([{ variant: 'strict', points: [[1000, 4, 5, 0, 0, 0, 0.3], [1005, 5, 3, 0, 0, 0, 0.004]] }]);
  });

  it('gives the newest and the worst step’s p99 over a range, none without requests let through', () => {
    const pts = [
      [995, 50, 50, 0, 0, 0, 9],
      [1000, 1, 4, 0, 0, 0, 0.25],
      [1005, 5, 3, 0, 0, 0, 0.012],
      [1010, 0, 7, 0, 0, 0, 0],
    ];
    expect(variantTotals(pts, 1000, 1010)).toMatchObject({ allowed: 6, rejected: 14, p99Last: 0.012, p99Max: 0.25 });
    const none = variantTotals([[1010, 0, 7, 0, 0, 0, 0]], 1000, 1010);
    expect([none.p99Last, none.p99Max]).toEqual([undefined, undefined]);
    // An older control plane's points have no p99.
    expect(variantTotals([[1000, 1, 4, 0]], 1000, 1010).p99Last).toBeUndefined();
  });

  it('lists the shares clients get: base takes what the variants leave, a variant inherits what it does not set', () => {
    expect(variantShares({ algorithm: 'token_bucket', rate: 10, period: '1s', variants: [{ id: 'a', weight: 10, rate: 100 }, { id: 'b', weight: 25, period: '1m' }] })).toEqual([
      { id: 'base', weight: 65, rate: 10, period: '1s', algorithm: 'token_bucket' },
      { id: 'a', weight: 10, rate: 100, period: '1s', algorithm: 'token_bucket' },
      { id: 'b', weight: 25, rate: 10, period: '1m', algorithm: 'token_bucket' },
    ]);
    expect(variantShares({ algorithm: 'token_bucket', rate: 10 })).toEqual([]);
  });
});

describe('markers', () => {
  const ev = (id: number, at: number, kind: FleetEvent['kind'], rule?: string, node?: string): FleetEvent => ({ id, at: new Date(at * 1000).toISOString(), kind, rule, node });
  const events = [
    ev(1, 1000, 'publish'),
    ev(2, 1010, 'degrade', 'r', 'a'),
    ev(3, 1011, 'degrade', 'other', 'a'),
    ev(4, 1020, 'node_joined', undefined, 'b'),
    ev(5, 900, 'publish'),
    ev(6, 1030, 'breaker', 'r', 'b'),
  ];
  it.each([
    { desc: 'namespace-wide changes and the rule’s own steps, in range, oldest first', node: undefined, want: [1, 2, 6] },
    { desc: 'one node’s chart leaves out other nodes’ steps', node: 'a', want: [1, 2] },
  ])('$desc', (c) => expect(markerEvents(events, 'r', 950, 1100, c.node).map((e) => e.id)).toEqual(c.want));

  it('places markers by time and joins the ones closer than the gap', () => {
    const xOf = (t: number) => (t - 1000) * 2; // 2 px per second
    const got = placeMarkers([ev(1, 1000, 'publish'), ev(2, 1002, 'degrade'), ev(3, 1010, 'degrade'), ev(4, 2000, 'publish')], xOf, 100, 6);
    expect(got.map((m) => [m.x, m.events.map((e) => e.id)])).toEqual([
      [0, [1, 2]],
      [20, [3]],
    ]);
  });

  it('labels an event for people', () => {
    expect(eventLabel({ id: 1, at: '', kind: 'degrade', rule: 'r', from: '0', to: '1', node: 'gw-1' })).toBe('degrade r 0 → 1 on gw-1');
    expect(eventLabel({ id: 1, at: '', kind: 'publish', version: 4, actor: 'approver' })).toBe('publish v4 by approver');
    expect(eventLabel({ id: 1, at: '', kind: 'node_joined', node: 'gw-2' })).toBe('node joined on gw-2');
    // A canary event has no state before it: no "?" (B2).
    expect(eventLabel({ id: 1, at: '', kind: 'canary', to: 'abort', version: 7, actor: 'sluice' })).toBe('canary abort v7 by sluice');
  });
});

describe('stepAt (the hovered step, placed again after every redraw)', () => {
  const grid = timeGrid(1000, 1300, 5); // 1000, 1005, ..., 1300
  it.each([
    { desc: 'on a step', t: 1150, want: 30 },
    { desc: 'nearer the earlier step', t: 1152.4, want: 30 },
    { desc: 'nearer the later step', t: 1152.6, want: 31 },
    { desc: 'half a step before the first', t: 997.5, want: 0 },
    { desc: 'half a step after the last', t: 1302.5, want: 60 },
    { desc: 'before the data', t: 997.4, want: null },
    { desc: 'past the data', t: 1302.6, want: null },
    { desc: 'not a time', t: NaN, want: null },
  ])('$desc: $t', (c) => expect(stepAt(grid, c.t)).toBe(c.want));

  it('has no step on an empty grid, and the one step of a grid of one', () => {
    expect(stepAt([], 1000)).toBeNull();
    expect(stepAt([1000], 5000)).toBe(0);
  });

  it('under a still pointer, a stream update shows the values now under it; a range that no longer reaches it hides it', () => {
    // The pointer stays at 3/4 of the plot's width while the 5 minutes shown move on by one step.
    const at = (g: number[]) => stepAt(g, g[0] + 0.75 * (g[g.length - 1] - g[0]))!;
    const before = timeGrid(1000, 1300, 5);
    const after = timeGrid(1005, 1305, 5);
    expect(before[at(before)]).toBe(1225);
    expect(after[at(after)]).toBe(1230);
    // The step hovered before is one the new grid still has (the tooltip keeps it until the chart redraws) ...
    expect(after.indexOf(before[at(before)])).toBe(at(before) - 1);
    // ... and a step that scrolled out of the range is not found: the tooltip hides.
    expect(after.indexOf(before[0])).toBe(-1);
  });
});
