import { describe as suite, expect, it } from 'vitest';
import { deepEqual, merge3, unresolved } from './merge3';

const limit = (id: string, rate: number, extra: Record<string, unknown> = {}) => ({ id, route: 'orders', rate, burst: 10, ...extra });
const doc = (limits: unknown[], extra: Record<string, unknown> = {}) => ({ namespace: 'shop', routes: [{ id: 'orders', path: '/orders' }], limits, ...extra });

suite('merge3', () => {
  it('combines changes to different fields of one rule', () => {
    const base = doc([limit('coupon', 5)]);
    const theirs = doc([limit('coupon', 7)]);
    const mine = doc([limit('coupon', 5, { burst: 20 })]);
    const r = merge3(base, theirs, mine);
    expect(r.conflicts).toEqual([]);
    expect(r.value).toEqual(doc([limit('coupon', 7, { burst: 20 })]));
    expect(r.theirs).toEqual(['limits[coupon].rate']);
  });

  it('asks when both changed the same field differently, and applies the choice', () => {
    const base = doc([limit('coupon', 5)]);
    const theirs = doc([limit('coupon', 7)]);
    const mine = doc([limit('coupon', 9)]);
    const r = merge3(base, theirs, mine);
    expect(r.conflicts).toEqual([{ path: 'limits[coupon].rate', base: 5, theirs: 7, mine: 9 }]);
    expect(unresolved(r, {})).toHaveLength(1);
    expect(merge3(base, theirs, mine, { 'limits[coupon].rate': 'theirs' }).value).toEqual(theirs);
    const mineWins = merge3(base, theirs, mine, { 'limits[coupon].rate': 'mine' });
    expect(mineWins.value).toEqual(mine);
    expect(unresolved(mineWins, { 'limits[coupon].rate': 'mine' })).toEqual([]);
  });

  it('takes the same change made on both sides without asking', () => {
    const base = doc([limit('coupon', 5)]);
    const both = doc([limit('coupon', 8)]);
    const r = merge3(base, both, structuredClone(both));
    expect(r).toEqual({ value: both, conflicts: [], theirs: [] });
  });

  it('keeps rules added on both sides with different ids, each after its predecessor', () => {
    const base = doc([limit('a', 1), limit('b', 2)]);
    const theirs = doc([limit('a', 1), limit('t', 3), limit('b', 2)]);
    const mine = doc([limit('a', 1), limit('b', 2), limit('m', 4)]);
    const r = merge3(base, theirs, mine);
    expect(r.conflicts).toEqual([]);
    expect((r.value.limits as { id: string }[]).map((l) => l.id)).toEqual(['a', 't', 'b', 'm']);
    expect(r.theirs).toEqual(['limits[t]']);
  });

  it('merges a rule added on both sides with the same id field by field', () => {
    const base = doc([]);
    const theirs = doc([limit('n', 3)]);
    const mine = doc([limit('n', 4)]);
    const r = merge3(base, theirs, mine);
    expect(r.conflicts.map((c) => c.path)).toEqual(['limits[n].rate']);
  });

  it('asks when they deleted a rule I edited, and the other way round', () => {
    const base = doc([limit('a', 1), limit('b', 2)]);
    const r = merge3(base, doc([limit('b', 2)]), doc([limit('a', 9), limit('b', 2)]));
    expect(r.conflicts).toEqual([{ path: 'limits[a]', base: limit('a', 1), theirs: undefined, mine: limit('a', 9) }]);
    expect(merge3(base, doc([limit('b', 2)]), doc([limit('a', 9), limit('b', 2)]), { 'limits[a]': 'theirs' }).value).toEqual(doc([limit('b', 2)]));
    const r2 = merge3(base, doc([limit('a', 9), limit('b', 2)]), doc([limit('b', 2)]));
    expect(r2.conflicts.map((c) => c.path)).toEqual(['limits[a]']);
    expect(r2.value).toEqual(doc([limit('b', 2)]));
  });

  it('takes a delete the other side did not touch', () => {
    const base = doc([limit('a', 1), limit('b', 2)]);
    const r = merge3(base, doc([limit('b', 2)]), doc([limit('a', 1), limit('b', 5)]));
    expect(r.conflicts).toEqual([]);
    expect(r.value).toEqual(doc([limit('b', 5)]));
    expect(r.theirs).toEqual(['limits[a]']);
  });

  it('treats a reorder as no edit, keeping their order when mine kept base order', () => {
    const base = doc([limit('a', 1), limit('b', 2), limit('c', 3)]);
    const theirs = doc([limit('c', 3), limit('a', 1), limit('b', 2)]);
    const mine = doc([limit('a', 1), limit('b', 7), limit('c', 3)]);
    const r = merge3(base, theirs, mine);
    expect(r.conflicts).toEqual([]);
    expect(r.value.limits).toEqual([limit('c', 3), limit('a', 1), limit('b', 7)]);
  });

  it('merges top-level fields: kind from them, namespace unchanged, a new field from me', () => {
    const base = doc([limit('a', 1)]);
    const theirs = doc([limit('a', 1)], { kind: 'service' });
    const mine = doc([limit('a', 1)], { classes: [{ id: 'gold' }] });
    const r = merge3(base, theirs, mine);
    expect(r.conflicts).toEqual([]);
    expect(r.value).toEqual(doc([limit('a', 1)], { kind: 'service', classes: [{ id: 'gold' }] }));
    expect(r.theirs).toEqual(['kind']);
    const clash = merge3(base, theirs, doc([limit('a', 1)], { kind: 'gateway' }));
    expect(clash.conflicts).toEqual([{ path: 'kind', base: undefined, theirs: 'service', mine: 'gateway' }]);
  });

  it('treats a list without ids as one value', () => {
    const base = { id: 'orders', methods: ['GET'] };
    const r = merge3(base, { id: 'orders', methods: ['GET', 'POST'] }, { id: 'orders', methods: ['PUT'] });
    expect(r.conflicts.map((c) => c.path)).toEqual(['methods']);
    const one = merge3(base, { id: 'orders', methods: ['GET', 'POST'] }, { id: 'orders', methods: ['GET'], path: '/o' });
    expect(one.value).toEqual({ id: 'orders', methods: ['GET', 'POST'], path: '/o' });
  });

  it('merges nested keyed lists (a rule field holding rules with ids)', () => {
    const base = { limits: [{ id: 'l', tiers: [{ id: 'gold', rate: 1 }, { id: 'free', rate: 2 }] }] };
    const theirs = { limits: [{ id: 'l', tiers: [{ id: 'gold', rate: 5 }, { id: 'free', rate: 2 }] }] };
    const mine = { limits: [{ id: 'l', tiers: [{ id: 'gold', rate: 1 }, { id: 'free', rate: 6 }] }] };
    const r = merge3(base, theirs, mine);
    expect(r.conflicts).toEqual([]);
    expect(r.value).toEqual({ limits: [{ id: 'l', tiers: [{ id: 'gold', rate: 5 }, { id: 'free', rate: 6 }] }] });
    expect(r.theirs).toEqual(['limits[l].tiers[gold].rate']);
  });

  it('deepEqual ignores undefined keys and compares arrays by position', () => {
    expect(deepEqual({ a: 1, b: undefined }, { a: 1 })).toBe(true);
    expect(deepEqual([1, 2], [2, 1])).toBe(false);
    expect(deepEqual({ a: [1, { b: 2 }] }, { a: [1, { b: 2 }] })).toBe(true);
    expect(deepEqual(null, {})).toBe(false);
  });
});
