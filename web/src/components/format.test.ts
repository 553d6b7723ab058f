import { describe, expect, it } from 'vitest';
import { absolute, axisTimes, plural, relative } from './format';

describe('plural', () => {
  it.each([
    { n: 0, want: '0 namespaces' },
    { n: 1, want: '1 namespace' },
    { n: 2, want: '2 namespaces' },
  ])('$n', (c) => expect(plural(c.n, 'namespace')).toBe(c.want));
});

describe('absolute', () => {
  it.each([
    { desc: 'UTC, 24-hour, year first', t: '2026-12-04T18:02:30Z', tz: 'UTC', want: '2026-12-04 18:02 UTC' },
    { desc: 'another zone says its name', t: '2026-12-04T18:02:30Z', tz: 'America/New_York', want: '2026-12-04 13:02 EST' },
    { desc: 'just after midnight is 00, not 24', t: '2026-01-02T00:05:00Z', tz: 'UTC', want: '2026-01-02 00:05 UTC' },
    { desc: 'nothing', t: undefined, tz: 'UTC', want: '' },
    { desc: 'not a time', t: 'soon', tz: 'UTC', want: 'soon' },
  ])('$desc', (c) => expect(absolute(c.t, c.tz)).toBe(c.want));

  it('with seconds, for a chart step', () => {
    expect(absolute('2026-12-04T18:02:05Z', 'UTC', true)).toBe('2026-12-04 18:02:05 UTC');
    expect(absolute('2026-01-02T00:00:00Z', 'UTC', true)).toBe('2026-01-02 00:00:00 UTC');
  });
});

describe('axisTimes', () => {
  it('24-hour ticks, the day and zone under the first and on a new day', () => {
    const t0 = Date.parse('2026-12-04T23:58:00Z') / 1000;
    expect(axisTimes([t0, t0 + 60, t0 + 120, t0 + 180], 'UTC')).toEqual(['23:58\n2026-12-04 UTC', '23:59', '00:00\n2026-12-05 UTC', '00:01']);
  });
});

describe('relative', () => {
  const now = Date.parse('2026-12-04T18:00:00Z');
  it.each([
    { t: '2026-12-04T17:59:50Z', want: 'just now' },
    { t: '2026-12-04T17:55:00Z', want: '5 min ago' },
    { t: '2026-12-04T16:00:00Z', want: '2 h ago' },
    { t: '2026-12-01T18:00:00Z', want: '3 d ago' },
    { t: '2026-12-04T19:00:00Z', want: 'in 1 h' },
  ])('$t', (c) => expect(relative(c.t, now)).toBe(c.want));
});
