// Data shaping for the live traffic charts: merging the stream's stats
// updates into what the stats endpoint returned, turning per-step counts
// into per-second rates on one time grid, the limit's threshold, and where
// event markers go. Pure functions; the chart and the page only draw.
import { change } from '../events/format';
import type { FleetEvent, StatPoint, Stats, StatSeries, VariantSeries } from '../../api/fleet';

const unit: Record<string, number> = { ns: 1e-9, us: 1e-6, 'µs': 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 };

/** parseDuration reads a Go duration ("5s", "1m30s", "250ms") as seconds; NaN when it is not one. */
export function parseDuration(s: string): number {
  const t = s.trim();
  if (t === '0') return 0;
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/y;
  let total = 0;
  let pos = 0;
  while (pos < t.length) {
    re.lastIndex = pos;
    const m = re.exec(t);
    if (!m) return NaN;
    total += Number(m[1]) * unit[m[2]];
    pos = re.lastIndex;
  }
  return pos === 0 ? NaN : total;
}

/** stepSeconds is a stats step (a duration string, or seconds) in seconds; 5 when it cannot be read. */
export function stepSeconds(step: string | number | undefined): number {
  const s = typeof step === 'number' ? step : step === undefined ? NaN : parseDuration(step);
  return Number.isFinite(s) && s > 0 ? s : 5;
}

/** seriesKey names a series: its rule, its variant (a variant series), and, for one node's series, the node. */
export function seriesKey(s: { rule: string; node?: string; variant?: string }): string {
  return [s.rule, s.variant ?? '', s.node ?? ''].join('\u0000');
}

/**
 * mergePoints merges two sorted point lists by time: a step in next replaces
 * the same step in prev (the control plane sends whole steps, latest wins).
 * Steps before since are dropped.
 */
export function mergePoints(prev: StatPoint[], next: StatPoint[], since: number): StatPoint[] {
  const out: StatPoint[] = [];
  let i = 0;
  let j = 0;
  while (i < prev.length && prev[i][0] < since) i++;
  while (j < next.length && next[j][0] < since) j++;
  while (i < prev.length || j < next.length) {
    const a = prev[i];
    const b = next[j];
    if (b === undefined || (a !== undefined && a[0] < b[0])) {
      out.push(a);
      i++;
    } else if (a === undefined || b[0] < a[0]) {
      out.push(b);
      j++;
    } else {
      out.push(b);
      i++;
      j++;
    }
  }
  return out;
}

/**
 * mergeStats folds a stream update into the stats a page holds: series are
 * matched by rule and node, new ones are added, and everything before since
 * (unix seconds, the start of the page's range) is dropped. A series the
 * update does not name keeps its identity, so its chart need not redraw.
 */
export function mergeStats(prev: Stats, update: { series?: StatSeries[]; variants?: VariantSeries[] }, since: number, accept: (s: { node?: string }) => boolean = () => true): Stats {
  const series = mergeSeries(prev.series, update.series ?? [], since, accept);
  if (!prev.variants && !update.variants?.length) return { ...prev, series };
  return { ...prev, series, variants: mergeSeries(prev.variants ?? [], update.variants ?? [], since, accept) };
}

function mergeSeries<T extends { rule: string; node?: string; variant?: string; points: StatPoint[] }>(prev: T[], update: T[], since: number, accept: (s: T) => boolean): T[] {
  const byKey = new Map<string, T>();
  for (const s of update) if (accept(s)) byKey.set(seriesKey(s), s);
  const out: T[] = [];
  for (const s of prev) {
    const k = seriesKey(s);
    const u = byKey.get(k);
    byKey.delete(k);
    if (u) out.push({ ...s, points: mergePoints(s.points, u.points, since) });
    else if (s.points.length > 0 && s.points[0][0] < since) out.push({ ...s, points: mergePoints(s.points, [], since) });
    else out.push(s);
  }
  for (const u of byKey.values()) out.push({ ...u, points: mergePoints([], u.points, since) });
  return out;
}

/**
 * fleetSeries is one fleet-wide series per rule: the control plane's own
 * (no node) where it sent one, else the sum of the rule's node series.
 */
export function fleetSeries(stats: Stats | undefined): StatSeries[] {
  if (!stats) return [];
  const fleet = new Map<string, StatSeries>();
  const nodes = new Map<string, StatSeries[]>();
  for (const s of stats.series) {
    if (!s.node) fleet.set(s.rule, s);
    else nodes.set(s.rule, [...(nodes.get(s.rule) ?? []), s]);
  }
  for (const [rule, list] of nodes) {
    if (fleet.has(rule)) continue;
    const sum = new Map<number, StatPoint>();
    for (const s of list)
      for (const pt of s.points) {
        const p = sum.get(pt[0]);
        if (!p) sum.set(pt[0], [...pt]);
        else for (let i = 1; i < pt.length; i++) p[i] = (p[i] ?? 0) + pt[i];
      }
    fleet.set(rule, { rule, kind: list[0].kind, points: [...sum.values()].sort((x, y) => x[0] - y[0]) });
  }
  return [...fleet.values()].sort((a, b) => a.rule.localeCompare(b.rule));
}

/** nodeSeries are a rule's per-node series, by node id. */
export function nodeSeries(stats: Stats | undefined, rule: string): StatSeries[] {
  return (stats?.series ?? []).filter((s) => s.rule === rule && s.node).sort((a, b) => a.node!.localeCompare(b.node!));
}

/** timeGrid is every step from since to until (unix seconds), aligned to the step. */
export function timeGrid(since: number, until: number, step: number): number[] {
  const out: number[] = [];
  for (let t = Math.ceil(since / step) * step; t <= until; t += step) out.push(t);
  return out;
}

/**
 * stepAt is the index of grid's step nearest t (unix seconds): the step a
 * pointer at time t hovers. null when grid is empty or t lies more than half
 * a step beyond its first or last step (the pointer is past the data).
 */
export function stepAt(grid: number[], t: number): number | null {
  const n = grid.length;
  if (n === 0 || !Number.isFinite(t)) return null;
  const half = n > 1 ? (grid[n - 1] - grid[0]) / (n - 1) / 2 : Infinity;
  if (t < grid[0] - half || t > grid[n - 1] + half) return null;
  let lo = 0;
  let hi = n - 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (grid[mid] <= t) lo = mid;
    else hi = mid;
  }
  return t - grid[lo] <= grid[hi] - t ? lo : hi;
}

export type Measure = 'allowed' | 'rejected' | 'shed';
const column: Record<Measure, 1 | 2 | 3> = { allowed: 1, rejected: 2, shed: 3 };

/**
 * rates is one measure of a series as per-second rates on grid (counts over
 * a step divided by the step); a step the series has no point for is null,
 * drawn as a gap, not as zero traffic.
 */
export function rates(points: StatPoint[], grid: number[], step: number, measure: Measure): (number | null)[] {
  const c = column[measure];
  const out: (number | null)[] = new Array(grid.length).fill(null);
  let j = 0;
  for (const p of points) {
    // A point is placed at its step on the grid (points between grid steps round down).
    const t = Math.floor(p[0] / step) * step;
    while (j < grid.length && grid[j] < t) j++;
    if (j >= grid.length) break;
    if (grid[j] === t) out[j] = Math.max(0, p[c]) / step;
  }
  return out;
}

/**
 * isolated are the indices of the values a line cannot draw: those with no
 * value on either side (a gap or the edge), which the chart draws as dots.
 */
export function isolated(xs: (number | null | undefined)[]): number[] {
  const out: number[] = [];
  const has = (i: number) => i >= 0 && i < xs.length && xs[i] !== null && xs[i] !== undefined;
  for (let i = 0; i < xs.length; i++) if (has(i) && !has(i - 1) && !has(i + 1)) out.push(i);
  return out;
}

/** latest is the newest non-null value of a rate list, or undefined. */
export function latest(xs: (number | null)[]): number | undefined {
  for (let i = xs.length - 1; i >= 0; i--) if (xs[i] !== null) return xs[i]!;
  return undefined;
}

/** LegendStats are a line's figures over the range: steps without data are left out. */
export type LegendStats = { min: number; avg: number; max: number; last: number };

/** legendStats is the min, mean, max and newest value of a line, ignoring gaps; undefined when it has no value. */
export function legendStats(xs: (number | null)[]): LegendStats | undefined {
  let n = 0;
  let sum = 0;
  let min = Infinity;
  let max = -Infinity;
  let last: number | undefined;
  for (const x of xs) {
    if (x === null || !Number.isFinite(x)) continue;
    n++;
    sum += x;
    min = Math.min(min, x);
    max = Math.max(max, x);
    last = x;
  }
  return n === 0 ? undefined : { min, avg: sum / n, max, last: last! };
}

/** ThresholdLimit is what threshold reads of a limit (a Limit of the API). */
export type ThresholdLimit = {
  algorithm: string;
  rate?: number;
  period?: string;
  scope?: string;
  key?: string[];
  routes?: string[];
  cost?: object;
  tiers?: unknown[];
  variants?: unknown[];
};

/** Threshold is a chart's threshold line (per second) or, when the limit has no single one for the chart, why not. */
export type Threshold = { value: number; note?: undefined } | { value?: undefined; note: string };

/** keyPartLabel names what a key dimension keys on, for people. */
function keyPartLabel(part: string): string {
  if (part === 'ip') return 'client IP';
  const [kind, name] = [part.slice(0, part.indexOf(':')), part.slice(part.indexOf(':') + 1)];
  switch (kind) {
    case 'header':
      return `${name} header value`;
    case 'query':
      return `${name} query value`;
    case 'cookie':
      return `${name} cookie value`;
    case 'jwt':
      return `${name} claim value`;
    case 'sdk':
      return `${name} value`;
  }
  return part;
}

/**
 * threshold is the rate above which a limit rejects, per second, on a chart
 * of the whole fleet (nodes live nodes) or of one node (chart 'node'), by
 * the limit's semantics:
 *
 *  - a rate is per key: only a limit whose key is global (one budget) or
 *    route (one budget per route it names) has a ceiling on the sum a
 *    chart draws; a per-IP (or per-header, ...) limit has none, however
 *    many keys there are;
 *  - a node-scoped limit allows its rate on every node (the fleet's line is
 *    rate × nodes); a cluster one across the fleet (no line on one node's
 *    chart: a node's share is not fixed);
 *  - concurrency and adaptive limits cap requests in flight, quotas a budget
 *    per calendar period or long window, costs count units: none is a
 *    request rate; tiers and variants give some callers other settings.
 *
 * A limit without a rate, or a period that cannot be read, has neither
 * value nor note.
 */
export function threshold(limit: ThresholdLimit, chart: { nodes: number } | 'node'): Threshold | undefined {
  if (limit.algorithm === 'concurrency' || limit.algorithm === 'adaptive') return { note: 'caps requests in flight, not a rate: no threshold line' };
  if (limit.algorithm === 'quota') return { note: 'a quota is a budget per period, not a rate: no threshold line' };
  if (limit.cost) return { note: 'counts cost units, not requests: no threshold line' };
  if (limit.tiers?.length) return { note: 'tiers give callers other rates: no single threshold line' };
  if (limit.variants?.length) return { note: 'variants give some clients other settings: no single threshold line (see Variants)' };
  if (limit.rate === undefined) return undefined;
  const period = parseDuration(limit.period ?? '1s');
  if (!Number.isFinite(period) || period <= 0) return undefined;
  const parts = limit.key?.length ? limit.key : ['global'];
  const perKey = parts.find((p) => p !== 'global' && p !== 'route');
  if (perKey) return { note: `per-${perKey} limit: the rate applies to each ${keyPartLabel(perKey)} on its own, so the traffic drawn has no threshold line` };
  let budgets = 1;
  if (parts.includes('route')) {
    if (!limit.routes?.length) return { note: 'one budget per route, on every route: no single threshold line' };
    budgets = limit.routes.length;
  }
  const rate = (limit.rate / period) * budgets;
  if (limit.scope === 'cluster') return chart === 'node' ? { note: "a cluster limit's rate is shared by the fleet: no per-node threshold line" } : { value: rate };
  return { value: chart === 'node' ? rate : rate * Math.max(1, chart.nodes) };
}

const markerKinds = new Set(['publish', 'rollback', 'canary', 'degrade', 'breaker', 'override', 'apply_error']);

/**
 * markerEvents are the events to mark on a rule's chart of [since, until]
 * (unix seconds): what changed the namespace (publish, rollback, canary),
 * and the rule's own degrade steps, breaker transitions, overrides and
 * apply errors; on one node's chart, only that node's. Oldest first.
 */
export function markerEvents(events: FleetEvent[], rule: string, since: number, until: number, node?: string): FleetEvent[] {
  return events
    .filter((e) => markerKinds.has(e.kind))
    .filter((e) => !e.rule || e.rule === rule)
    .filter((e) => !node || !e.node || e.node === node)
    .filter((e) => {
      const t = Date.parse(e.at) / 1000;
      return t >= since && t <= until;
    })
    .sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
}

export type Marker = { x: number; at: number; events: FleetEvent[] };

/**
 * placeMarkers puts events on a chart: x is where xOf (unix seconds → CSS
 * pixels) puts each; events closer than minGap pixels to the previous marker
 * join it, so a burst of degrade steps is one marker, not a smear. Markers
 * outside [0, width] are dropped.
 */
export function placeMarkers(events: FleetEvent[], xOf: (t: number) => number, width: number, minGap = 6): Marker[] {
  const out: Marker[] = [];
  for (const e of events) {
    const at = Date.parse(e.at) / 1000;
    const x = xOf(at);
    if (!Number.isFinite(x) || x < 0 || x > width) continue;
    const last = out[out.length - 1];
    if (last && x - last.x < minGap) last.events.push(e);
    else out.push({ x, at, events: [e] });
  }
  return out;
}

/** eventLabel is one line for people: what happened, to which rule, on which node, by whom. */
export function eventLabel(e: FleetEvent): string {
  const parts: string[] = [e.kind.replace('_', ' ')];
  if (e.rule) parts.push(e.rule);
  const what = change(e);
  if (what) parts.push(what);
  if (e.node) parts.push(`on ${e.node}`);
  if (e.actor) parts.push(`by ${e.actor}`);
  return parts.join(' ');
}

/** variantP99Column is where a variant point holds the p99 (seconds) of the requests the variant let through in its step (the API's variantColumns). */
export const variantP99Column = 6;

/**
 * variantSeries are a limit's per-variant series, one per variant id
 * (sorted, base first): the control plane's fleet-wide ones where it sent
 * them, else the sum of the nodes' (the each-node view loads those). The
 * nodes' p99s do not add up: a step's is the highest node's, a bound on
 * the fleet's (no more than 1% of any node's requests took longer).
 */
export function variantSeries(stats: Stats | undefined, rule: string): { variant: string; points: StatPoint[] }[] {
  const fleet = new Map<string, StatPoint[]>();
  const nodes = new Map<string, Map<number, StatPoint>>();
  for (const s of stats?.variants ?? []) {
    if (s.rule !== rule) continue;
    if (!s.node) {
      fleet.set(s.variant, s.points);
      continue;
    }
    const sum = nodes.get(s.variant) ?? new Map<number, StatPoint>();
    nodes.set(s.variant, sum);
    for (const pt of s.points) {
      const p = sum.get(pt[0]);
      if (!p) sum.set(pt[0], [...pt]);
      else for (let i = 1; i < pt.length; i++) p[i] = i === variantP99Column ? Math.max(p[i] ?? 0, pt[i]) : (p[i] ?? 0) + pt[i];
    }
  }
  for (const [v, sum] of nodes) if (!fleet.has(v)) fleet.set(v, [...sum.values()].sort((x, y) => x[0] - y[0]));
  return [...fleet]
    .map(([variant, points]) => ({ variant, points }))
    .sort((a, b) => (a.variant === 'base' ? -1 : b.variant === 'base' ? 1 : a.variant.localeCompare(b.variant)));
}

/**
 * VariantTotals are a variant's decisions over a range: totals, per-second
 * means, and the share rejected; and the p99 (seconds) of the requests it
 * let through: the newest step's and the range's worst step's (a p99 over
 * the range cannot be had from the steps' p99s), undefined without any.
 */
export type VariantTotals = { allowed: number; rejected: number; allowedPerSecond: number; rejectedPerSecond: number; rejectedShare?: number; p99Last?: number; p99Max?: number };

/** variantTotals sums a variant's points in [since, until] (unix seconds); the means are over that span, the share undefined without decisions. */
export function variantTotals(points: StatPoint[], since: number, until: number): VariantTotals {
  let allowed = 0;
  let rejected = 0;
  let p99Last: number | undefined;
  let p99Max: number | undefined;
  for (const p of points) {
    if (p[0] < since - 1e-9 || p[0] > until) continue;
    allowed += Math.max(0, p[1]);
    rejected += Math.max(0, p[2]);
    // A step without requests let through has p99 0 (none is an older control plane's point).
    const q = p[variantP99Column];
    if (q !== undefined && Number.isFinite(q) && q > 0) {
      p99Last = q;
      p99Max = Math.max(p99Max ?? 0, q);
    }
  }
  const span = Math.max(1, until - since);
  return {
    allowed,
    rejected,
    allowedPerSecond: allowed / span,
    rejectedPerSecond: rejected / span,
    rejectedShare: allowed + rejected > 0 ? rejected / (allowed + rejected) : undefined,
    p99Last,
    p99Max,
  };
}

/** VariantShare is one variant of a limit as its clients get it: its share of clients and its rate. */
export type VariantShare = { id: string; weight: number; rate?: number; period?: string; algorithm: string };

/**
 * variantShares lists a limit's variants as their clients get them, the
 * base one (the clients no variant takes: 100 minus the weights) first; a
 * variant's unset rate and period are the limit's own.
 */
export function variantShares(limit: { algorithm: string; rate?: number; period?: string; variants?: { id: string; weight: number; rate?: number; period?: string }[] }): VariantShare[] {
  const vs = limit.variants ?? [];
  if (vs.length === 0) return [];
  const taken = vs.reduce((n, v) => n + v.weight, 0);
  return [
    { id: 'base', weight: Math.max(0, 100 - taken), rate: limit.rate, period: limit.period, algorithm: limit.algorithm },
    ...vs.map((v) => ({ id: v.id, weight: v.weight, rate: v.rate || limit.rate, period: v.period || limit.period, algorithm: limit.algorithm })),
  ];
}
