import { QueryClient } from '@tanstack/react-query';
import { describe, expect, it } from 'vitest';
import type { Stats } from './fleet';
import { keys } from './keys';
import { applyStats } from './stream';

describe('applyStats', () => {
  const loaded = (t0: number): Stats => ({
    step: '5s',
    series: [
      { rule: 'r', kind: 'limit', points: [[t0, 1, 0, 0, 0, 0], [t0 + 5, 2, 0, 0, 0, 0]] },
      { rule: 'r', kind: 'limit', node: 'gw-1', points: [[t0 + 5, 2, 0, 0, 0, 0]] },
    ],
  });
  const tick = (t: number) => ({
    stepSeconds: 5,
    series: [
      { rule: 'r', kind: 'limit' as const, points: [[t, 9, 1, 0, 0, 0]] },
      { rule: 'r', kind: 'limit' as const, node: 'gw-1', points: [[t, 4, 1, 0, 0, 0]] },
      { rule: 'r', kind: 'limit' as const, node: 'gw-2', points: [[t, 5, 0, 0, 0, 0]] },
    ],
  });

  it.each([
    { desc: 'the fleet query takes only the fleet-wide series', range: 300, node: undefined, now: 1300, want: [['r', undefined, [1000, 1005, 1010]], ['r', 'gw-1', [1005]]] },
    { desc: 'a one-node query takes only that node’s series', range: 300, node: 'gw-1', now: 1300, want: [['r', undefined, [1000, 1005]], ['r', 'gw-1', [1005, 1010]]] },
    { desc: 'the range start trims old steps', range: 300, node: undefined, now: 1302, want: [['r', undefined, [1005, 1010]], ['r', 'gw-1', [1005]]] },
  ])('$desc', (c) => {
    const qc = new QueryClient();
    qc.setQueryData(keys.stats('shop', c.range, c.node), loaded(1000));
    qc.setQueryData(keys.stats('other', c.range, c.node), loaded(1000));
    applyStats(qc, 'shop', tick(1010), c.now);
    const got = qc.getQueryData<Stats>(keys.stats('shop', c.range, c.node))!;
    expect(got.series.map((s) => [s.rule, s.node, s.points.map((p) => p[0])])).toEqual(c.want);
    expect(qc.getQueryData<Stats>(keys.stats('other', c.range, c.node))).toEqual(loaded(1000));
  });

  it('a custom range keeps its fixed start, however late the update', () => {
    const qc = new QueryClient();
    qc.setQueryData(keys.stats('shop', 'from:1000', undefined), loaded(1000));
    applyStats(qc, 'shop', tick(1010), 5000);
    const got = qc.getQueryData<Stats>(keys.stats('shop', 'from:1000', undefined))!;
    expect(got.series[0].points.map((p) => p[0])).toEqual([1000, 1005, 1010]);
  });

  it('merges per-variant series like rule series', () => {
    const qc = new QueryClient();
    qc.setQueryData(keys.stats('shop', 300, undefined), { ...loaded(1000), variants: [{ rule: 'r', variant: 'base', points: [[1005, 3, 1, 0, 0, 0]] }] });
    applyStats(qc, 'shop', { ...tick(1010), variants: [{ rule: 'r', variant: 'base', points: [[1010, 7, 2, 0, 0, 0]] }, { rule: 'r', variant: 'strict', points: [[1010, 1, 5, 0, 0, 0]] }] }, 1300);
    const got = qc.getQueryData<Stats>(keys.stats('shop', 300, undefined))!;
    expect(got.variants!.map((s) => [s.variant, s.points.map((p) => p[0])])).toEqual([
      ['base', [1005, 1010]],
      ['strict', [1010]],
    ]);
  });

  it('leaves a stats query that has not loaded alone', () => {
    const qc = new QueryClient();
    qc.getQueryCache().build(qc, { queryKey: keys.stats('shop', 300, undefined) });
    applyStats(qc, 'shop', tick(1010), 1300);
    expect(qc.getQueryData(keys.stats('shop', 300, undefined))).toBeUndefined();
  });
});
