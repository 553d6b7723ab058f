// The canvas chart behind every live traffic chart: uPlot with a time axis,
// one line per series, the limit's threshold drawn as a dashed line, a
// hook that reports where event markers go, and one that reports the step
// under the pointer (the page draws the hover tooltip), placed again after
// every draw so that it stays under a still pointer as live data scrolls by. No React here, so the
// browser benchmark (web/e2e/bench.mjs) measures exactly what the page runs.
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { isolated, stepAt } from './series';
import { axisTimes } from '../../components/format';

export type Line = { label: string; color: string; values: (number | null)[] };

/** Hover is the step under the pointer: its time (unix seconds), and where the pointer is in CSS pixels of the plot area. */
export type Hover = { t: number; left: number; top: number };

export type ChartSpec = {
  width: number;
  height: number;
  /** Series labels and colours; their order is the order of ChartData's value lists. */
  lines: { label: string; color: string }[];
  /** Per second; drawn dashed across the chart and kept in the y range. */
  threshold?: number;
  /** Called after every draw, with the chart, to place markers (x of a time: u.valToPos(t, 'x')). */
  onDraw?: (u: uPlot) => void;
  /** Called after every draw and pointer move (see pointer): the step under the pointer, or null when the pointer is off the plot or past the data. */
  onHover?: (u: uPlot, h: Hover | null) => void;
};

/** palette colours per-node lines; allowed/rejected/shed have their own colours. */
export const palette = ['#1c7ed6', '#e8590c', '#2f9e44', '#ae3ec9', '#f08c00', '#0c8599', '#c2255c', '#5c940d', '#6741d9', '#495057'];
export const measureColor = { allowed: '#2f9e44', rejected: '#e03131', shed: '#f08c00' } as const;

/** alignedData is uPlot's column form: the time grid, then each line's values. */
export function alignedData(grid: number[], lines: (number | null)[][]): uPlot.AlignedData {
  return [grid, ...lines] as uPlot.AlignedData;
}

function thresholdPlugin(get: () => number | undefined): uPlot.Plugin {
  return {
    hooks: {
      draw: (u) => {
        const th = get();
        if (th === undefined) return;
        const y = Math.round(u.valToPos(th, 'y', true));
        const { ctx, bbox } = u;
        ctx.save();
        ctx.strokeStyle = '#c92a2a';
        ctx.lineWidth = Math.max(1, devicePixelRatio);
        ctx.setLineDash([6 * devicePixelRatio, 4 * devicePixelRatio]);
        ctx.beginPath();
        ctx.moveTo(bbox.left, y);
        ctx.lineTo(bbox.left + bbox.width, y);
        ctx.stroke();
        ctx.restore();
      },
    },
  };
}

/**
 * LiveChart owns one uPlot instance. update replaces the data (a redraw of
 * the new points); setThreshold and resize change the rest. Not safe to use
 * after destroy.
 */
export class LiveChart {
  readonly u: uPlot;
  private threshold: number | undefined;
  private onHover: ChartSpec['onHover'];
  /** Where the pointer is (client coordinates) while it is over the chart, markers included; null when it is not. */
  private at: { x: number; y: number } | null = null;
  /** Whether onHover was last told of a step (so that a draw without a pointer does not call it again). */
  private hovering = false;

  constructor(el: HTMLElement, spec: ChartSpec, data: uPlot.AlignedData) {
    this.threshold = spec.threshold;
    this.onHover = spec.onHover;
    const opts: uPlot.Options = {
      width: spec.width,
      height: spec.height,
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      scales: {
        x: { time: true },
        y: {
          range: (_u, _min, max) => {
            // Headroom above the highest line and the threshold, so neither runs along the top edge.
            const top = Math.max((max ?? 0) * 1.1, (this.threshold ?? 0) * 1.15, 1);
            return [0, top];
          },
        },
      },
      axes: [{ size: 50, values: (_u, ticks) => axisTimes(ticks) }, { size: 56, values: (_u, vals) => vals.map((v) => (v >= 1000 ? `${(v / 1000).toFixed(1)}k` : String(+v.toFixed(2)))) }],
      // A value between two gaps (a step reported alone) is a dot: a line needs two.
      series: [{}, ...spec.lines.map((l) => ({ label: l.label, stroke: l.color, width: 1.5, spanGaps: false, points: { show: true, size: 5, fill: l.color, filter: (u: uPlot, si: number) => isolated(u.data[si] as (number | null)[]) } }))],
      plugins: [thresholdPlugin(() => this.threshold)],
      hooks: {
        // The hover is placed again after each draw (new data, a resize): the pointer has not moved, what is under it has.
        draw: [...(spec.onDraw ? [spec.onDraw] : []), (u: uPlot) => this.placeHover(u)],
      },
    };
    this.u = new uPlot(opts, data, el);
  }

  /**
   * pointer tells the chart where the pointer is (client coordinates) while
   * it is over the chart, event markers included, or null when it left. The
   * chart keeps it, rather than relying on uPlot's cursor, which a rebuilt
   * chart starts without and which a marker passing under a still pointer
   * takes away (uPlot's plot area gets a mouseleave): the hover then stays
   * until the pointer really leaves.
   */
  pointer(p: { x: number; y: number } | null) {
    this.at = p;
    this.placeHover(this.u, true);
  }

  /** placeHover tells onHover the step under the pointer; that there is none only when it had told of one, or when told to (a pointer call). */
  private placeHover(u: uPlot, tell = false) {
    if (!this.onHover) return;
    const p = this.at;
    const r = p ? u.over.getBoundingClientRect() : undefined;
    const left = p && r ? p.x - r.left : -1;
    const top = p && r ? p.y - r.top : -1;
    const idx = r && left >= 0 && top >= 0 && left <= r.width && top <= r.height ? stepAt(u.data[0] as number[], u.posToVal(left, 'x')) : null;
    if (idx === null) {
      if (this.hovering || tell) this.onHover(u, null);
      this.hovering = false;
      return;
    }
    this.hovering = true;
    // uPlot's crosshair follows when it lost the pointer (a rebuilt chart, or a marker that passed under it).
    if ((u.cursor.left ?? -1) < 0) u.setCursor({ left, top }, false);
    this.onHover(u, { t: u.data[0][idx], left, top });
  }

  update(data: uPlot.AlignedData) {
    this.u.setData(data);
  }

  setThreshold(th: number | undefined) {
    if (th === this.threshold) return;
    this.threshold = th;
    this.u.redraw(false, true);
  }

  resize(width: number, height: number) {
    if (width !== this.u.width || height !== this.u.height) this.u.setSize({ width, height });
  }

  destroy() {
    this.u.destroy();
  }
}
