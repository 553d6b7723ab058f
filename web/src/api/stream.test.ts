import { QueryClient } from '@tanstack/react-query';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Stats } from './fleet';
import { keys } from './keys';
import { applyStats, follow } from './stream';
import { statsQuery } from '../features/traffic/hooks';

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

  // The race behind the console e2e's variants step that now and then never showed a burst: a step's
  // tick that comes while the stats query's GET is in flight was dropped (no data yet) or merged into
  // data the GET's answer then replaced, and that answer was computed before the step was whole. The
  // stream sends each step once, so the view never showed it while GET …/stats had it.
  describe('a tick that comes while the GET is in flight', () => {
    const variantTick = (t: number) => ({ ...tick(t), variants: [{ rule: 'r', variant: 'loose', points: [[t, 45, 0, 0, 0, 0, 0.004]] }] });
    // The clock at 1300 s, as the updates below are applied.
    beforeEach(() => {
      vi.useFakeTimers({ toFake: ['Date'] });
      vi.setSystemTime(1300_000);
    });
    afterEach(() => {
      vi.useRealTimers();
    });
    const fetching = (qc: QueryClient) => {
      let answer!: (s: Stats) => void;
      // staleTime 0: fetch even over loaded data, as a refetch does.
      const done = qc.fetchQuery({ ...statsQuery('shop', 300, undefined, () => new Promise<Stats>((r) => (answer = r))), staleTime: 0 });
      return { answer: (s: Stats) => answer(s), done };
    };
    it('is kept for the first answer', async () => {
      const qc = new QueryClient();
      const f = fetching(qc);
      applyStats(qc, 'shop', variantTick(1010), 1300);
      f.answer({ ...loaded(1000), variants: [] }); // computed before step 1010 was whole
      await f.done;
      const got = qc.getQueryData<Stats>(keys.stats('shop', 300, undefined))!;
      expect(got.variants!.map((s) => [s.variant, s.points])).toEqual([['loose', [[1010, 45, 0, 0, 0, 0, 0.004]]]]);
      expect(got.series.find((s) => !s.node)!.points.map((p) => p[0])).toEqual([1000, 1005, 1010]);
    });
    it('survives a refetch’s answer', async () => {
      const qc = new QueryClient();
      qc.setQueryData(keys.stats('shop', 300, undefined), { ...loaded(1000), variants: [] });
      const f = fetching(qc); // a refetch (the stream was reopened)
      applyStats(qc, 'shop', variantTick(1010), 1300);
      f.answer({ ...loaded(1000), variants: [] });
      await f.done;
      const got = qc.getQueryData<Stats>(keys.stats('shop', 300, undefined))!;
      expect(got.variants!.map((s) => [s.variant, s.points.map((p) => p[0])])).toEqual([['loose', [1010]]]);
    });
    it('of another namespace, or before the GET started, is not folded in', async () => {
      const qc = new QueryClient();
      applyStats(qc, 'shop', variantTick(1005), 1300);
      const f = fetching(qc);
      applyStats(qc, 'other', variantTick(1010), 1300);
      f.answer({ ...loaded(1000), variants: [] });
      await f.done;
      expect(qc.getQueryData<Stats>(keys.stats('shop', 300, undefined))!.variants).toEqual([]);
    });
  });
});

describe('follow', () => {
  // A stand-in for the browser's EventSource (node has none): the test plays the browser's part.
  class BrowserEventSource {
    static CLOSED = 2;
    static last: BrowserEventSource;
    readyState = 0;
    onopen: (() => void) | null = null;
    onerror: (() => void) | null = null;
    constructor(readonly url: string) {
      BrowserEventSource.last = this;
    }
    addEventListener() {}
    close() {
      this.readyState = BrowserEventSource.CLOSED;
    }
  }
  beforeEach(() => {
    vi.stubGlobal('EventSource', BrowserEventSource);
  });
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  it('refetches the stats once the browser has reconnected a stream that ended (the steps pushed meanwhile are not replayed)', () => {
    const qc = new QueryClient();
    const key = keys.stats('shop', 300, undefined);
    qc.setQueryData(key, { step: '5s', series: [] });
    const stop = follow(qc, 'shop');
    const es = BrowserEventSource.last;
    es.readyState = 1;
    es.onopen!();
    expect(qc.getQueryState(key)!.isInvalidated).toBe(false);
    // The server ended the stream (its lifetime, a slow reader): the browser reconnects by itself.
    es.readyState = 0;
    es.onerror!();
    es.readyState = 1;
    es.onopen!();
    expect(qc.getQueryState(key)!.isInvalidated).toBe(true);
    stop();
  });
});
