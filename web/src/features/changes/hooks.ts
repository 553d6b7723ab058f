import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { client, unwrap } from '../../api/client';
import { keys } from '../../api/keys';

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
      return qc.invalidateQueries({ queryKey: keys.namespace(ns) });
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
