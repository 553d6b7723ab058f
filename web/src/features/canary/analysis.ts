// The canary page's shaping: the analysis form into the API's
// CanaryAnalysis, and the running comparison into table rows. The judging
// itself is the control plane's (the breaches come from it); nothing here
// decides whether a canary passes.
import type { CanaryAnalysis, CanaryComparison, CohortFigures } from '../../api/fleet';

export type AnalysisForm = {
  window: string;
  maxRejectRateIncrease: string;
  max5xxRateIncrease: string;
  maxP99Ratio: string;
  minRequests: string;
  onPass: 'promote' | 'hold';
};

export const defaultAnalysis: AnalysisForm = { window: '60s', maxRejectRateIncrease: '0.05', max5xxRateIncrease: '0.02', maxP99Ratio: '1.5', minRequests: '200', onPass: 'hold' };

/** analysisFrom reads the form; an empty maximum is left out (not checked). The error names the field. */
export function analysisFrom(f: AnalysisForm): { analysis: CanaryAnalysis; error?: undefined } | { analysis?: undefined; error: string } {
  const a: CanaryAnalysis = { onPass: f.onPass };
  if (f.window.trim()) a.window = f.window.trim();
  const num = (label: string, v: string, int = false): number | undefined | string => {
    if (v.trim() === '') return undefined;
    const n = Number(v);
    if (!Number.isFinite(n) || n < 0) return `${label} must be a number of 0 or more, not "${v}"`;
    if (int && !Number.isInteger(n)) return `${label} must be a whole number, not "${v}"`;
    return n;
  };
  const fields: [keyof CanaryAnalysis, string, string, boolean][] = [
    ['maxRejectRateIncrease', 'Max reject rate increase', f.maxRejectRateIncrease, false],
    ['max5xxRateIncrease', 'Max 5xx rate increase', f.max5xxRateIncrease, false],
    ['maxP99Ratio', 'Max p99 ratio', f.maxP99Ratio, false],
    ['minRequests', 'Min requests', f.minRequests, true],
  ];
  for (const [k, label, v, int] of fields) {
    const n = num(label, v, int);
    if (typeof n === 'string') return { error: n };
    if (n !== undefined) (a as Record<string, unknown>)[k] = n;
  }
  return { analysis: a };
}

export type ComparisonRow = { metric: string; label: string; canary: string; baseline: string; change: string; limit: string; breached: boolean };

const pct = (x: number | undefined) => (x === undefined ? '–' : `${(x * 100).toFixed(2)}%`);
const msec = (x: number | undefined) => (x === undefined ? '–' : `${(x * 1000).toFixed(1)} ms`);
const pts = (x: number | undefined) => (x === undefined ? '–' : `${x >= 0 ? '+' : ''}${(x * 100).toFixed(2)} pts`);
const ratio = (x: number | undefined) => (x === undefined ? '–' : `×${x.toFixed(2)}`);

/**
 * comparisonRows are the canary-vs-baseline rows of one window: requests,
 * reject rate, 5xx rate and p99, with the change, the analysis' limit and
 * whether the control plane found it breached.
 */
export function comparisonRows(canary: CohortFigures | undefined, baseline: CohortFigures | undefined, c: CanaryComparison | undefined, a: CanaryAnalysis | undefined, judged: boolean): ComparisonRow[] {
  const breached = new Set(judged ? (c?.breaches ?? []).map((b) => b.metric) : []);
  const inc = (x?: number, y?: number) => (x === undefined || y === undefined ? undefined : x - y);
  const rat = (x?: number, y?: number) => (x === undefined || y === undefined || y === 0 ? undefined : x / y);
  return [
    { metric: 'requests', label: 'Requests', canary: String(canary?.requests ?? '–'), baseline: String(baseline?.requests ?? '–'), change: '', limit: a?.minRequests ? `at least ${a.minRequests} each` : '', breached: false },
    {
      metric: 'rejectRateIncrease',
      label: 'Reject rate',
      canary: pct(canary?.rejectRate),
      baseline: pct(baseline?.rejectRate),
      change: pts(judged ? (c?.rejectRateIncrease ?? inc(canary?.rejectRate, baseline?.rejectRate)) : inc(canary?.rejectRate, baseline?.rejectRate)),
      limit: a?.maxRejectRateIncrease ? `≤ +${(a.maxRejectRateIncrease * 100).toFixed(2)} pts` : 'not checked',
      breached: breached.has('rejectRateIncrease'),
    },
    {
      metric: 'errorRate5xxIncrease',
      label: '5xx rate',
      canary: pct(canary?.errorRate5xx),
      baseline: pct(baseline?.errorRate5xx),
      change: pts(judged ? (c?.errorRate5xxIncrease ?? inc(canary?.errorRate5xx, baseline?.errorRate5xx)) : inc(canary?.errorRate5xx, baseline?.errorRate5xx)),
      limit: a?.max5xxRateIncrease ? `≤ +${(a.max5xxRateIncrease * 100).toFixed(2)} pts` : 'not checked',
      breached: breached.has('errorRate5xxIncrease'),
    },
    {
      metric: 'p99Ratio',
      label: 'p99',
      canary: msec(canary?.p99Seconds),
      baseline: msec(baseline?.p99Seconds),
      change: ratio(judged ? (c?.p99Ratio ?? rat(canary?.p99Seconds, baseline?.p99Seconds)) : rat(canary?.p99Seconds, baseline?.p99Seconds)),
      limit: a?.maxP99Ratio ? `≤ ×${a.maxP99Ratio}` : 'not checked',
      breached: breached.has('p99Ratio'),
    },
  ];
}
