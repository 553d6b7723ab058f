import { describe, expect, it } from 'vitest';
import type { FleetEvent, StatPoint, Stats } from '../../api/fleet';
import { eventLabel, fleetSeries, latest, markerEvents, mergePoints, mergeStats, parseDuration, placeMarkers, rates, stepSeconds, thresholdPerSecond, timeGrid } from './series';

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

describe('thresholdPerSecond', () => {
  it.each([
    { desc: 'node scope on one node', l: { algorithm: 'fixed_window', rate: 120, period: '1m' }, nodes: 1, want: 2 },
    { desc: 'node scope across three nodes', l: { algorithm: 'token_bucket', rate: 10, period: '1s', scope: 'node' }, nodes: 3, want: 30 },
    { desc: 'cluster scope is fleet-wide', l: { algorithm: 'sliding_window', rate: 100, period: '10s', scope: 'cluster' }, nodes: 3, want: 10 },
    { desc: 'no period means per second', l: { algorithm: 'token_bucket', rate: 7 }, nodes: 1, want: 7 },
    { desc: 'concurrency has no rate threshold', l: { algorithm: 'concurrency', rate: 7 }, nodes: 1, want: undefined },
    { desc: 'adaptive has no rate threshold', l: { algorithm: 'adaptive' }, nodes: 1, want: undefined },
    { desc: 'bad period', l: { algorithm: 'token_bucket', rate: 7, period: 'x' }, nodes: 1, want: undefined },
  ])('$desc', (c) => expect(thresholdPerSecond(c.l, c.nodes)).toBe(c.want));
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
