import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { ApiError, client, unwrap, type RuleSet, type Schemas } from '../../api/client';
import { keys } from '../../api/keys';

export type LoadedDraft = { doc: RuleSet; etag: string };

/** fetchDraft reads the draft document and its ETag (the revision that If-Match must name). */
export async function fetchDraft(ns: string): Promise<LoadedDraft> {
  const { data, error, response } = await client.GET('/api/v1/namespaces/{ns}/draft', { params: { path: { ns } }, cache: 'no-store' });
  if (!response.ok || !data) throw new ApiError(response.status, error as never);
  return { doc: data, etag: response.headers.get('ETag') ?? '*' };
}

export function useDraft(ns: string) {
  return useQuery({ queryKey: keys.draft(ns), queryFn: () => fetchDraft(ns), staleTime: Infinity });
}

/** saveDraft replaces the draft if it is still at etag; it returns the new ETag. */
export async function saveDraft(ns: string, etag: string, doc: RuleSet): Promise<string> {
  const { data, error, response } = await client.PUT('/api/v1/namespaces/{ns}/draft', {
    params: { path: { ns }, header: { 'If-Match': etag } },
    body: doc,
  });
  if (!response.ok || !data) throw new ApiError(response.status, error as never);
  return data.etag ?? response.headers.get('ETag') ?? '*';
}

export type DraftCheck = Schemas['DraftCheck'];

/** checkDraft asks the server what it thinks of doc (errors, warnings, diff from the newest version), saving nothing. */
export function checkDraft(ns: string, doc: RuleSet): Promise<DraftCheck> {
  return unwrap(client.POST('/api/v1/namespaces/{ns}/draft/check', { params: { path: { ns } }, body: doc as Record<string, unknown> }));
}

const ids = new WeakMap<object, number>();
let nextId = 0;
/** docId names a document object: every edit makes a new one. */
function docId(doc: object): number {
  let id = ids.get(doc);
  if (id === undefined) {
    id = ++nextId;
    ids.set(doc, id);
  }
  return id;
}

/** useDebounced is value once it has not changed for ms. */
export function useDebounced<T>(value: T, ms: number): T {
  const [v, setV] = useState(value);
  useEffect(() => {
    const t = setTimeout(() => setV(value), ms);
    return () => clearTimeout(t);
  }, [value, ms]);
  return v;
}

/**
 * useDraftCheck is the server's check of doc, asked ms after the last edit
 * (the server's api.Warnings and validation: one implementation); the
 * previous answer stays shown while the next is asked.
 */
export function useDraftCheck(ns: string, doc: RuleSet | null, ms = 300) {
  const d = useDebounced(doc, ms);
  const q = useQuery({
    queryKey: keys.draftCheck(ns, d ? docId(d) : 0),
    queryFn: () => checkDraft(ns, d!),
    enabled: d !== null,
    staleTime: Infinity,
    gcTime: 30_000,
    placeholderData: keepPreviousData,
  });
  // fresh: the answer is about doc itself, not an earlier edit.
  return { ...q, fresh: q.data !== undefined && !q.isPlaceholderData && d === doc };
}

/** useResetDraft puts the newest version's rules back in the draft (audited). */
export function useResetDraft(ns: string) {
  const qc = useQueryClient();
  return useMutation({
    // Without etag, the draft as it is now (read first: If-Match is always sent).
    mutationFn: async (etag?: string) => {
      const tag = etag ?? (await fetchDraft(ns)).etag;
      return unwrap(client.POST('/api/v1/namespaces/{ns}/draft/reset', { params: { path: { ns }, header: { 'If-Match': tag } } }));
    },
    // The editor starts from the cached draft: put the reset one there before the caller's callbacks run.
    onSuccess: async () => {
      qc.setQueryData(keys.draft(ns), await fetchDraft(ns));
      await qc.invalidateQueries({ queryKey: keys.namespace(ns), predicate: (q) => q.queryKey[2] !== 'draft' });
    },
  });
}
