import { describe, expect, it } from 'vitest';
import { analysisFrom, comparisonRows, defaultAnalysis } from './analysis';

describe('analysisFrom', () => {
  it.each([
    { desc: 'the defaults', f: defaultAnalysis, want: { window: '60s', maxRejectRateIncrease: 0.05, max5xxRateIncrease: 0.02, maxP99Ratio: 1.5, minRequests: 200, onPass: 'hold' } },
    { desc: 'empty maximums are left out', f: { ...defaultAnalysis, maxP99Ratio: '', max5xxRateIncrease: ' ', onPass: 'promote' as const }, want: { window: '60s', maxRejectRateIncrease: 0.05, minRequests: 200, onPass: 'promote' } },
  ])('$desc', (c) => expect(analysisFrom(c.f)).toEqual({ analysis: c.want }));
  it.each([
    { desc: 'not a number', f: { ...defaultAnalysis, maxP99Ratio: 'x' }, err: 'Max p99 ratio must be a number of 0 or more, not "x"' },
    { desc: 'negative', f: { ...defaultAnalysis, maxRejectRateIncrease: '-1' }, err: 'Max reject rate increase must be a number' },
    { desc: 'fractional count', f: { ...defaultAnalysis, minRequests: '1.5' }, err: 'Min requests must be a whole number' },
  ])('refuses $desc', (c) => expect(analysisFrom(c.f).error).toContain(c.err));
});

describe('comparisonRows', () => {
  const canary = { requests: 400, rejectRate: 0.5, errorRate5xx: 0.01, p99Seconds: 0.02 };
  const baseline = { requests: 800, rejectRate: 0.1, errorRate5xx: 0.01, p99Seconds: 0.01 };
  const a = { maxRejectRateIncrease: 0.05, maxP99Ratio: 1.5, minRequests: 200 };
  it('shows the figures, the change, the limit and the server’s breaches of a judged window', () => {
    const rows = comparisonRows(canary, baseline, { breaches: [{ metric: 'rejectRateIncrease', value: 0.4, limit: 0.05 }], rejectRateIncrease: 0.4, p99Ratio: 2 }, a, true);
    expect(rows.map((r) => [r.label, r.canary, r.baseline, r.change, r.limit, r.breached])).toEqual([
      ['Requests', '400', '800', '', 'at least 200 each', false],
      ['Reject rate', '50.00%', '10.00%', '+40.00 pts', '≤ +5.00 pts', true],
      ['5xx rate', '1.00%', '1.00%', '+0.00 pts', 'not checked', false],
      ['p99', '20.0 ms', '10.0 ms', '×2.00', '≤ ×1.5', false],
    ]);
  });
  it('the window in progress is never marked breached, and its change is computed from its figures', () => {
    const rows = comparisonRows(canary, baseline, { breaches: [{ metric: 'p99Ratio' }] }, a, false);
    expect(rows.every((r) => !r.breached)).toBe(true);
    expect(rows[3].change).toBe('×2.00');
  });
  it('no figures yet', () => {
    const rows = comparisonRows(undefined, undefined, undefined, undefined, true);
    expect(rows[1]).toMatchObject({ canary: '–', baseline: '–', change: '–', limit: 'not checked' });
  });
});
