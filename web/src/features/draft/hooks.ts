import { useQuery } from '@tanstack/react-query';
import { ApiError, client, type RuleSet } from '../../api/client';
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
