// One way to write times: every page goes through format.ts (absolute,
// relative, or the When component), never the browser locale's order.
import { describe, expect, it } from 'vitest';

const sources = import.meta.glob(['../**/*.{ts,tsx}', '!../**/*.test.{ts,tsx}'], { query: '?raw', import: 'default', eager: true }) as Record<string, string>;

describe('dates', () => {
  it('no page formats a time with the browser locale', () => {
    expect(Object.keys(sources).length).toBeGreaterThan(50);
    const offenders = Object.entries(sources)
      .filter(([, text]) => /\.toLocale(String|DateString|TimeString)\(/.test(text))
      .map(([path]) => path);
    expect(offenders).toEqual([]);
  });
});
