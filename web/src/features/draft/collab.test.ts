import { describe, expect, it } from 'vitest';
import { ago, draftSaveOf, mergedNote, newerSave, resolve, revisionOf, whoSaved, type Reconciled } from './collab';
import { merge3 } from './merge3';
import type { RuleSet } from '../../api/client';

describe('collab', () => {
  it('reads draft ETags as revisions', () => {
    expect(revisionOf('"12"')).toBe(12);
    expect(revisionOf('W/"3"')).toBe(3);
    expect(revisionOf('*')).toBe(-1);
    expect(revisionOf('"abc"')).toBe(-1);
  });

  it('reads a draft event as a save, and no other kind', () => {
    const at = '2026-01-01T00:00:00Z';
    expect(draftSaveOf({ id: 1, at, kind: 'draft', actor: 'admin', detail: { etag: '"7"', revision: 7 } })).toEqual({ actor: 'admin', etag: '"7"', revision: 7, at });
    expect(draftSaveOf({ id: 2, at, kind: 'publish', actor: 'admin', detail: { etag: '"7"', revision: 7 } })).toBeNull();
    expect(draftSaveOf({ id: 3, at, kind: 'draft', detail: {} })).toBeNull();
  });

  it('announces only a save past the revision this tab holds, and none while it saves', () => {
    const s = { actor: 'admin', etag: '"8"', revision: 8, at: '' };
    expect(newerSave(s, '"7"', false)).toBe(s);
    expect(newerSave(s, '"8"', false)).toBeNull(); // this tab's own save
    expect(newerSave(s, '"9"', false)).toBeNull();
    expect(newerSave(s, '"7"', true)).toBeNull();
    expect(newerSave(null, '"7"', false)).toBeNull();
  });

  it('says how long ago', () => {
    const now = Date.parse('2026-01-01T00:10:00Z');
    expect(ago('2026-01-01T00:09:50Z', now)).toBe('10 s ago');
    expect(ago('2026-01-01T00:07:00Z', now)).toBe('3 min ago');
    expect(ago('2025-12-31T22:00:00Z', now)).toBe('2 h ago');
  });

  it('names the author only when the announced save is the one merged', () => {
    const theirs = { doc: {} as RuleSet, etag: '"8"' };
    expect(whoSaved(theirs, { actor: 'admin', etag: '"8"', revision: 8, at: '' })).toBe('admin');
    expect(whoSaved(theirs, { actor: 'admin', etag: '"7"', revision: 7, at: '' })).toBe('another editor');
    expect(whoSaved(theirs, null)).toBe('another editor');
  });

  it('tells what a merge kept of theirs', () => {
    expect(mergedNote('admin', ['limits[x].rate'])).toBe("Merged with admin's save (their change to limits[x].rate kept).");
    expect(mergedNote('admin', ['a', 'b', 'c', 'd'])).toBe("Merged with admin's save (their changes to a, b, c and 1 more kept).");
    expect(mergedNote('admin', [])).toBe("Merged with admin's save (it changed nothing you had not).");
  });

  it('resolves a reconciled merge with the choices', () => {
    const base = { namespace: 'shop', limits: [{ id: 'x', rate: 1, burst: 1 }] } as unknown as RuleSet;
    const theirs = { namespace: 'shop', limits: [{ id: 'x', rate: 2, burst: 5 }] } as unknown as RuleSet;
    const mine = { namespace: 'shop', limits: [{ id: 'x', rate: 3, burst: 1 }] } as unknown as RuleSet;
    const r: Reconciled = { theirs: { doc: theirs, etag: '"2"' }, merge: merge3(base, theirs, mine), base, mine };
    expect(r.merge.conflicts.map((c) => c.path)).toEqual(['limits[x].rate']);
    expect(resolve(r, { 'limits[x].rate': 'mine' })).toEqual({ namespace: 'shop', limits: [{ id: 'x', rate: 3, burst: 5 }] });
  });
});
