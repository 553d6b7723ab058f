// Drafts in progress kept in the browser (local storage), per user and
// namespace, until they are saved or discarded: an ended session, a closed
// tab or a crash loses nothing typed.
import type { RuleSet } from '../../api/client';

export type LocalDraft = { doc: RuleSet; etag: string; at: string };

/** localDraftKey is where user's edits of namespace ns are kept. */
export function localDraftKey(user: string, ns: string): string {
  return `sluice.draft.${encodeURIComponent(user)}.${encodeURIComponent(ns)}`;
}

/** readLocalDraft is the kept draft, or null when none (or it is unreadable). */
export function readLocalDraft(storage: Storage, key: string): LocalDraft | null {
  try {
    const v = JSON.parse(storage.getItem(key) ?? 'null') as LocalDraft | null;
    return v && typeof v === 'object' && v.doc && typeof v.doc === 'object' ? v : null;
  } catch {
    return null;
  }
}

/** keepLocalDraft stores doc (edited from the draft at etag); false when the browser refused (quota). */
export function keepLocalDraft(storage: Storage, key: string, doc: RuleSet, etag: string, now = new Date()): boolean {
  try {
    storage.setItem(key, JSON.stringify({ doc, etag, at: now.toISOString() } satisfies LocalDraft));
    return true;
  } catch {
    return false;
  }
}

/** dropLocalDraft forgets the kept draft (saved or discarded). */
export function dropLocalDraft(storage: Storage, key: string): void {
  try {
    storage.removeItem(key);
  } catch {
    // nothing kept, nothing to drop
  }
}
