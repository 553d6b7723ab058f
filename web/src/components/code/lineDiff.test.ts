import { presentableDiff, type Change } from '@codemirror/merge';
import { describe, expect, it } from 'vitest';
import { toYaml } from '../../features/draft/ruleset';
import { lineDiff, MaxLineEdits } from './lineDiff';

/** apply rebuilds b from a and the changes. */
function apply(a: string, b: string, cs: readonly Change[]): string {
  let out = '';
  let pos = 0;
  for (const c of cs) {
    expect(c.fromA).toBeGreaterThanOrEqual(pos);
    out += a.slice(pos, c.fromA) + b.slice(c.fromB, c.toB);
    pos = c.toA;
  }
  return out + a.slice(pos);
}

function ruleSet(n: number, rate: (i: number) => number) {
  return {
    namespace: 'big',
    limits: Array.from({ length: n }, (_, i) => ({ id: `l-${i}`, routes: [`r-${i % 7}`], key: ['ip'], algorithm: 'token_bucket' as const, rate: rate(i), period: '1s' })),
  };
}

describe('lineDiff', () => {
  const cases: { desc: string; a: string; b: string }[] = [
    { desc: 'equal', a: 'x\ny\n', b: 'x\ny\n' },
    { desc: 'both empty', a: '', b: '' },
    { desc: 'from empty', a: '', b: 'x\ny\n' },
    { desc: 'to empty', a: 'x\ny\n', b: '' },
    { desc: 'one line changed', a: 'a\nb\nc\n', b: 'a\nB\nc\n' },
    { desc: 'line inserted', a: 'a\nc\n', b: 'a\nb\nc\n' },
    { desc: 'line deleted', a: 'a\nb\nc\n', b: 'a\nc\n' },
    { desc: 'last line without newline deleted', a: 'x\ny', b: 'x' },
    { desc: 'newline added at the end', a: 'x\ny', b: 'x\ny\n' },
    { desc: 'insert at the start', a: 'b\nc\n', b: 'a\nb\nc\n' },
    { desc: 'several blocks', a: 'a\nb\nc\nd\ne\nf\n', b: 'a\nB\nc\nd\nE\nF\ng\n' },
    { desc: 'rule sets, 100 rates halved', a: toYaml(ruleSet(500, () => 100)), b: toYaml(ruleSet(500, (i) => (i < 100 ? 50 : 100))) },
    { desc: 'rule sets, rules removed and added', a: toYaml(ruleSet(50, () => 100)), b: toYaml({ ...ruleSet(60, () => 100), limits: ruleSet(60, () => 100).limits.filter((_, i) => i % 9 !== 3) }) },
  ];
  for (const c of cases) {
    it(c.desc, () => {
      const cs = lineDiff(c.a, c.b);
      expect(apply(c.a, c.b, cs)).toBe(c.b);
      if (c.a === c.b) expect(cs).toEqual([]);
    });
  }

  it('marks the same characters as the merge package on a rule set', () => {
    const a = toYaml(ruleSet(300, () => 100));
    const b = toYaml(ruleSet(300, (i) => (i % 3 === 0 ? 50 : 100)));
    const mine = presentableDiff(a, b, { override: lineDiff });
    const theirs = presentableDiff(a, b);
    expect(mine.map((c) => [c.fromA, c.toA, c.fromB, c.toB])).toEqual(theirs.map((c) => [c.fromA, c.toA, c.fromB, c.toB]));
  });

  it('falls back to the character diff past MaxLineEdits', () => {
    const a = Array.from({ length: MaxLineEdits + 10 }, (_, i) => `a${i}\n`).join('');
    const b = Array.from({ length: MaxLineEdits + 10 }, (_, i) => `b${i}\n`).join('');
    const cs = lineDiff(a, b);
    expect(apply(a, b, cs)).toBe(b);
  });
});
