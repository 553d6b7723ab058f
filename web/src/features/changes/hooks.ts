import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { ApiError, asProblem, client, unwrap } from '../../api/client';
import { keys } from '../../api/keys';
import type { Selector } from '../nodes/labels';
import { keepLast, previewRefreshMs, type PreviewView } from './preview';

type State = 'open' | 'approved' | 'rejected' | 'published';

export function useChanges(ns: string, state?: State) {
  return useQuery({
    queryKey: keys.changes(ns, state),
    queryFn: () => unwrap(client.GET('/api/v1/namespaces/{ns}/changes', { params: { path: { ns }, query: state ? { state } : {} } })),
  });
}

export function useChange(ns: string, id: number) {
  return useQuery({
    queryKey: keys.change(ns, id),
    queryFn: () => unwrap(client.GET('/api/v1/namespaces/{ns}/changes/{id}', { params: { path: { ns, id } } })),
  });
}

export function useCreateChange(ns: string) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: { title: string; description: string }) => unwrap(client.POST('/api/v1/namespaces/{ns}/changes', { params: { path: { ns } }, body })),
    onSuccess: () => qc.invalidateQueries({ queryKey: keys.namespace(ns) }),
  });
}

/** useChangeAction posts approve, reject or reopen with a comment. */
export function useChangeAction(ns: string, id: number) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: ({ action, comment }: { action: 'approve' | 'reject' | 'reopen'; comment: string }) => {
      const opts = { params: { path: { ns, id } }, body: { comment } };
      switch (action) {
        case 'approve':
          return unwrap(client.POST('/api/v1/namespaces/{ns}/changes/{id}/approve', opts));
        case 'reject':
          return unwrap(client.POST('/api/v1/namespaces/{ns}/changes/{id}/reject', opts));
        default:
          return unwrap(client.POST('/api/v1/namespaces/{ns}/changes/{id}/reopen', opts));
      }
    },
    onSuccess: (c) => {
      qc.setQueryData(keys.change(ns, id), c);
      // Not awaited: the page shows the answer (and clears the sent
      // comment) at once, not after every view of the namespace (the
      // preview among them) has been fetched again.
      void qc.invalidateQueries({ queryKey: keys.namespace(ns) });
    },
  });
}

/**
 * usePublish publishes an approved change now, or with at (an RFC 3339 time)
 * schedules it: the answer is then the scheduled change, not a version.
 */
export function usePublish(ns: string, id: number) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (at?: string) => unwrap(client.POST('/api/v1/namespaces/{ns}/changes/{id}/publish', { params: { path: { ns, id } }, body: at ? { at } : {} })),
    onSuccess: () => qc.invalidateQueries({ queryKey: keys.namespace(ns) }),
  });
}

/** useUnschedule cancels a change's scheduled publication. */
export function useUnschedule(ns: string, id: number) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: () => unwrap(client.POST('/api/v1/namespaces/{ns}/changes/{id}/unschedule', { params: { path: { ns, id } } })),
    onSuccess: (c) => {
      qc.setQueryData(keys.change(ns, id), c);
      return qc.invalidateQueries({ queryKey: keys.namespace(ns) });
    },
  });
}

/**
 * usePreview is the change's preview on live traffic with the nodes'
 * figures, or null when it has none (the API's 404); fetched again every
 * few seconds while it runs. The last figures seen are kept once the nodes
 * stop reporting it (keepLast).
 */
export function usePreview(ns: string, id: number) {
  const qc = useQueryClient();
  const key = keys.preview(ns, id);
  return useQuery({
    queryKey: key,
    queryFn: async (): Promise<PreviewView | null> => {
      const { data, error, response } = await client.GET('/api/v1/namespaces/{ns}/changes/{id}/preview', { params: { path: { ns, id } } });
      if (!response.ok && response.status !== 404) throw new ApiError(response.status, asProblem(response.status, error));
      return keepLast(qc.getQueryData<PreviewView | null>(key), response.status === 404 ? null : (data ?? null), new Date().toISOString());
    },
    refetchInterval: (q) => (q.state.data?.state === 'running' ? previewRefreshMs : false),
  });
}

/** useStartPreview starts (or, for the same change, restarts) the change's preview for duration on the nodes selector matches (empty: every node). */
export function useStartPreview(ns: string, id: number) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: ({ duration, selector }: { duration: string; selector: Selector }) =>
      unwrap(client.POST('/api/v1/namespaces/{ns}/changes/{id}/preview', { params: { path: { ns, id } }, body: { duration, ...(Object.keys(selector).length > 0 ? { selector } : {}) } })),
    onSuccess: (p) => qc.setQueryData<PreviewView | null>(keys.preview(ns, id), p),
  });
}

/** useStopPreview stops the change's preview; the figures last seen stay on the page. */
export function useStopPreview(ns: string, id: number) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: () => unwrap(client.DELETE('/api/v1/namespaces/{ns}/changes/{id}/preview', { params: { path: { ns, id } } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: keys.preview(ns, id) }),
  });
}
