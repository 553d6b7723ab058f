import { describe, expect, it } from 'vitest';
import { fieldChanges, overrideText, reasonOf, whatChanged } from './describe';

describe('fieldChanges', () => {
  it.each([
    { desc: 'a changed field', b: { rate: 100, period: '1m' }, a: { rate: 2, period: '1m' }, want: [{ path: 'rate', from: 100, to: 2 }] },
    { desc: 'nested and in arrays of equal length', b: { tiers: [{ id: 'pro', rate: 10 }] }, a: { tiers: [{ id: 'pro', rate: 20 }] }, want: [{ path: 'tiers.0.rate', from: 10, to: 20 }] },
    { desc: 'an array that grew is one change', b: { key: ['ip'] }, a: { key: ['ip', 'jwt:sub'] }, want: [{ path: 'key', from: ['ip'], to: ['ip', 'jwt:sub'] }] },
    { desc: 'an added rule lists its fields', b: undefined, a: { id: 'x', rate: 5 }, want: [{ path: 'id', from: undefined, to: 'x' }, { path: 'rate', from: undefined, to: 5 }] },
    { desc: 'a removed field', b: { rate: 5, burst: 10 }, a: { rate: 5 }, want: [{ path: 'burst', from: 10, to: undefined }] },
    { desc: 'nothing changed', b: { state: 'open' }, a: { state: 'open' }, want: [] },
  ])('$desc', (c) => expect(fieldChanges(c.b, c.a)).toEqual(c.want));
});

describe('overrideText', () => {
  it.each([
    { desc: 'a drain', action: 'node.override', after: { drain: true, reason: 'maintenance' }, want: 'drain' },
    { desc: 'a forced degrade', action: 'node.override', after: { degradeLevels: { 'shed-search': 2 } }, want: 'degrade rule shed-search to level 2' },
    { desc: 'both, with an expiry', action: 'node.override', after: { drain: true, degradeLevels: { d: 1 }, expires: '2026-12-04T18:02:00Z' }, want: 'drain, degrade rule d to level 1 until 2026-12-04 18:02 UTC' },
    { desc: 'cleared', action: 'node.override_delete', after: undefined, want: 'cleared' },
    { desc: 'not an override', action: 'change.publish', after: { version: 2 }, want: undefined },
  ])('$desc', (c) => expect(overrideText(c.action, c.after, 'UTC')).toBe(c.want));
});

describe('reasonOf', () => {
  it.each([
    { desc: "an override's reason", after: { drain: true, reason: 'maintenance' }, want: 'maintenance' },
    { desc: "a review's comment", after: { state: 'approved', comment: '50× tighter, agreed' }, want: '50× tighter, agreed' },
    { desc: 'none', after: { version: 3 }, want: '' },
    { desc: 'no document', after: null, want: '' },
  ])('$desc', (c) => expect(reasonOf(c.after)).toBe(c.want));
});

describe('whatChanged', () => {
  it('says a review as its state step, without the comment shown as the reason', () => {
    expect(whatChanged('change.approve', { state: 'open' }, { state: 'approved', comment: 'ok' })).toEqual(['state: open → approved']);
  });
  it('says a rule edit field by field', () => {
    expect(whatChanged('draft.put_rule', { id: 'l', rate: 100 }, { id: 'l', rate: 2 })).toEqual(['rate: 100 → 2']);
  });
  it('marks added and removed fields, and cuts a checksum', () => {
    expect(whatChanged('draft.update', { checksum: 'sha256:16138f88a283c79bfdd4b783e311717c', burst: 5 }, { checksum: 'sha256:5a1b828009c4ce5d45abed23f839690c', rules: 4 })).toEqual([
      'checksum: sha256:16138f88a283c79bf… → sha256:5a1b828009c4ce5d4…',
      '− burst: 5',
      '+ rules: 4',
    ]);
  });
  it('says an override in words', () => {
    expect(whatChanged('node.override', null, { drain: true, reason: 'r', by: 'approver' }, 'UTC')).toEqual(['drain']);
  });
});

describe('the action filter', () => {
  it("offers api/openapi.yaml's actions, node.override among them", () => {
    expect(__AUDIT_ACTIONS__.length).toBeGreaterThan(20);
    expect(__AUDIT_ACTIONS__).toContain('node.override');
    expect(__AUDIT_ACTIONS__).toContain('change.approve');
  });
});
