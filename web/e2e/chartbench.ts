// The live chart's re-render, measured in the browser by bench.mjs (bundled
// by Vite into one script and run in Chromium): a chart of `series` lines ×
// `points` steps (50 nodes × an hour at 5 s), then `ticks` stream updates,
// each a new step for every series. One re-render is the whole path the
// traffic page runs per update: merge the update into the stats, build the
// per-second rates on the time grid, hand them to uPlot, and its redraw.
// The peer, measured in the same run: uPlot redrawing data already shaped.
import type { Stats } from '../src/api/fleet';
import { alignedData, LiveChart, palette } from '../src/features/traffic/chart';
import { mergeStats, nodeSeries, rates, timeGrid } from '../src/features/traffic/series';

function run(series: number, points: number, ticks: number): Promise<{ create: number; renders: number[]; redrawOnly: number[] }> {
  const step = 5;
  let now = 1_800_000_000;
  let stats: Stats = {
    step: '5s',
    series: Array.from({ length: series }, (_, i) => ({
      rule: 'orders-limit',
      kind: 'limit' as const,
      node: `gw-${String(i).padStart(2, '0')}`,
      points: Array.from({ length: points }, (_, j) => [now - (points - 1 - j) * step, 500 + ((i * 7 + j * 13) % 100), (i + j) % 40, 0, 0, 0]),
    })),
  };
  const el = document.createElement('div');
  document.body.replaceChildren(el);
  const shape = () => {
    const grid = timeGrid(now - (points - 1) * step, now, step);
    const list = nodeSeries(stats, 'orders-limit');
    return alignedData(grid, list.map((s) => rates(s.points, grid, step, 'rejected')));
  };
  let drawn: () => void = () => {};
  const first = new Promise<void>((r) => (drawn = r));
  const t0 = performance.now();
  const chart = new LiveChart(
    el,
    { width: 1200, height: 400, lines: Array.from({ length: series }, (_, i) => ({ label: `gw-${i}`, color: palette[i % palette.length] })), threshold: 30, onDraw: () => drawn() },
    shape(),
  );
  const renders: number[] = [];
  return (async () => {
    await first;
    const create = performance.now() - t0;
    for (let k = 0; k < ticks; k++) {
      now += step;
      const tick = { series: stats.series.map((s, i) => ({ rule: s.rule, kind: s.kind, node: s.node, points: [[now, 500 + i, (k + i) % 40, 0, 0, 0]] })) };
      const done = new Promise<void>((r) => (drawn = r));
      const t = performance.now();
      stats = mergeStats(stats, tick, now - (points - 1) * step);
      chart.update(shape());
      await done;
      renders.push(performance.now() - t);
      await new Promise((r) => requestAnimationFrame(r));
    }
    // The peer: uPlot's own redraw of already shaped data (no merge, no rates).
    const redrawOnly: number[] = [];
    const data = shape();
    for (let k = 0; k < ticks; k++) {
      const done = new Promise<void>((r) => (drawn = r));
      const t = performance.now();
      chart.update(data);
      await done;
      redrawOnly.push(performance.now() - t);
      await new Promise((r) => requestAnimationFrame(r));
    }
    chart.destroy();
    return { create, renders, redrawOnly };
  })();
}

(globalThis as unknown as { chartBench: typeof run }).chartBench = run;
