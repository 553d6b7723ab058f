// Live collaboration on a draft: the namespace's stream announces every
// save (a `draft` event with the actor and the new ETag); a save that
// finds the draft changed (412) is merged three ways with the server's
// draft (merge3, base = the document at this tab's ETag), saved at once
// when no field conflicts, or handed to the conflict dialog, which asks
// only about the paths both sides changed.
import { useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import type { RuleSet } from '../../api/client';
import type { FleetEvent } from '../../api/fleet';
import { onStreamEvent, useStream } from '../../api/stream';
import { fetchDraft, type LoadedDraft } from './hooks';
import { merge3, type MergeResult, type Side } from './merge3';

/** DraftSave is a save of the draft announced by the stream. */
export type DraftSave = { actor: string; etag: string; revision: number; at: string };

/** revisionOf reads a draft ETag ("12", quoted) as its revision; -1 when it is not one. */
export function revisionOf(etag: string): number {
  const m = /^(?:W\/)?"?(\d+)"?$/.exec(etag.trim());
  return m ? Number(m[1]) : -1;
}

/** draftSaveOf is the save a stream event announces, or null for any other event. */
export function draftSaveOf(e: FleetEvent): DraftSave | null {
  if (e.kind !== 'draft') return null;
  const d = (e.detail ?? {}) as { etag?: unknown; revision?: unknown };
  const revision = typeof d.revision === 'number' ? d.revision : typeof d.etag === 'string' ? revisionOf(d.etag) : -1;
  if (revision < 0) return null;
  return { actor: e.actor || 'someone', etag: typeof d.etag === 'string' ? d.etag : `"${revision}"`, revision, at: e.at };
}

/**
 * newerSave is the announced save this tab has not seen: one past the
 * revision the tab holds. This tab's own save is not one once it has its
 * ETag; while a save is in flight nothing is, since its answer may be
 * the very save announced.
 */
export function newerSave(latest: DraftSave | null, etag: string, saving: boolean): DraftSave | null {
  if (!latest || saving) return null;
  const mine = revisionOf(etag);
  return mine >= 0 && latest.revision > mine ? latest : null;
}

/** useDraftSaves follows ns's stream and is the newest save of its draft announced since mount. */
export function useDraftSaves(ns: string): DraftSave | null {
  const qc = useQueryClient();
  useStream(qc, ns);
  const [latest, setLatest] = useState<DraftSave | null>(null);
  useEffect(
    () =>
      onStreamEvent(ns, (e) => {
        const s = draftSaveOf(e);
        if (s) setLatest((prev) => (prev && prev.revision >= s.revision ? prev : s));
      }),
    [ns],
  );
  return latest;
}

/** ago says how long ago an ISO time was, for the notice ("10 s ago", "3 min ago"). */
export function ago(at: string, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - Date.parse(at)) / 1000));
  if (!Number.isFinite(s)) return 'just now';
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  return `${Math.floor(s / 3600)} h ago`;
}

/** whoSaved names the author of theirs from the announced save with its ETag, if the stream said. */
export function whoSaved(theirs: LoadedDraft, latest: DraftSave | null): string {
  return latest && revisionOf(latest.etag) === revisionOf(theirs.etag) ? latest.actor : 'another editor';
}

/** mergedNote tells the user what an automatic merge kept of the other save. */
export function mergedNote(who: string, theirPaths: string[]): string {
  if (theirPaths.length === 0) return `Merged with ${who}'s save (it changed nothing you had not).`;
  const shown = theirPaths.slice(0, 3).join(', ');
  const more = theirPaths.length > 3 ? ` and ${theirPaths.length - 3} more` : '';
  return `Merged with ${who}'s save (their change${theirPaths.length > 1 ? 's' : ''} to ${shown}${more} kept).`;
}

/** Reconciled is the server's draft and mine merged with it from base. */
export type Reconciled = { theirs: LoadedDraft; merge: MergeResult<RuleSet>; base: RuleSet; mine: RuleSet };

/** reconcile reads the server's draft and merges mine into it from base (the document at this tab's ETag). */
export async function reconcile(ns: string, base: RuleSet, mine: RuleSet): Promise<Reconciled> {
  const theirs = await fetchDraft(ns);
  return { theirs, merge: merge3(base, theirs.doc, mine), base, mine };
}

/** resolve is the merged document with the user's choice at each conflicting path. */
export function resolve(r: Reconciled, choices: Record<string, Side>): RuleSet {
  return merge3(r.base, r.theirs.doc, r.mine, choices).value;
}
