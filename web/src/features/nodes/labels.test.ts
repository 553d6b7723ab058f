import { describe, expect, it } from 'vitest';
import { formatLabels, matches, parseSelector } from './labels';

describe('parseSelector', () => {
  it.each([
    { desc: 'empty', in: '', want: {} },
    { desc: 'one', in: 'zone=a', want: { zone: 'a' } },
    { desc: 'several with spaces', in: ' zone = a , tier=edge ', want: { zone: 'a', tier: 'edge' } },
    { desc: 'slashes and dots', in: 'sluice.dev/pool=canary-1', want: { 'sluice.dev/pool': 'canary-1' } },
  ])('$desc', (c) => expect(parseSelector(c.in)).toEqual({ selector: c.want }));

  it.each([
    { desc: 'no equals', in: 'zone', err: '"zone" is not key=value' },
    { desc: 'bad key', in: '-x=1', err: 'label key "-x"' },
    { desc: 'empty value', in: 'zone=', err: 'label value "" of zone' },
    { desc: 'colon in value', in: 'zone=a:b', err: 'label value "a:b"' },
    { desc: 'same key twice', in: 'zone=a,zone=b', err: 'label zone is given twice' },
    { desc: 'too many', in: Array.from({ length: 17 }, (_, i) => `k${i}=v`).join(','), err: 'at most 16 labels' },
  ])('refuses $desc', (c) => expect(parseSelector(c.in).error).toContain(c.err));
});

describe('matches', () => {
  it.each<{ desc: string; labels: Record<string, string> | undefined; sel: Record<string, string>; want: boolean }>([
    { desc: 'empty selector matches all', labels: { a: '1' }, sel: {}, want: true },
    { desc: 'subset', labels: { a: '1', b: '2' }, sel: { a: '1' }, want: true },
    { desc: 'other value', labels: { a: '1' }, sel: { a: '2' }, want: false },
    { desc: 'missing key', labels: undefined, sel: { a: '1' }, want: false },
  ])('$desc', (c) => expect(matches(c.labels, c.sel)).toBe(c.want));
  it('formats labels sorted', () => expect(formatLabels({ z: '1', a: '2' })).toBe('a=2, z=1'));
});
