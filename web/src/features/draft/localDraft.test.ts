import { describe, expect, it } from 'vitest';
import { dropLocalDraft, keepLocalDraft, localDraftKey, readLocalDraft } from './localDraft';

/** memory is a Storage in memory; full refuses every write, as a browser over its quota does. */
function memory(full = false): Storage {
  const m = new Map<string, string>();
  return {
    get length() {
      return m.size;
    },
    clear: () => m.clear(),
    getItem: (k) => m.get(k) ?? null,
    key: (i) => [...m.keys()][i] ?? null,
    removeItem: (k) => void m.delete(k),
    setItem: (k, v) => {
      if (full) throw new DOMException('quota', 'QuotaExceededError');
      m.set(k, v);
    },
  };
}

describe('local drafts', () => {
  it('are kept per user and namespace until dropped', () => {
    const s = memory();
    const a = localDraftKey('alice', 'shop');
    const b = localDraftKey('bob', 'shop');
    expect(a).not.toBe(b);
    expect(localDraftKey('alice', 'team-b')).not.toBe(a);
    const doc = { namespace: 'shop', limits: [{ id: 'l', algorithm: 'fixed_window' as const, rate: 11, period: '1m' }] };
    expect(keepLocalDraft(s, a, doc, '"7"', new Date('2026-12-04T18:02:00Z'))).toBe(true);
    expect(readLocalDraft(s, a)).toEqual({ doc, etag: '"7"', at: '2026-12-04T18:02:00.000Z' });
    expect(readLocalDraft(s, b)).toBeNull();
    dropLocalDraft(s, a);
    expect(readLocalDraft(s, a)).toBeNull();
  });
  it('survive a full or corrupt storage without throwing', () => {
    const full = memory(true);
    expect(keepLocalDraft(full, 'k', { namespace: 'shop' }, '*')).toBe(false);
    const s = memory();
    s.setItem('k', '{not json');
    expect(readLocalDraft(s, 'k')).toBeNull();
    s.setItem('k', '42');
    expect(readLocalDraft(s, 'k')).toBeNull();
  });
});
