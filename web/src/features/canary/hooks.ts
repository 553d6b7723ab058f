import { useMutation, useQueryClient } from '@tanstack/react-query';
import { client, unwrap } from '../../api/client';
import type { CanaryAnalysis } from '../../api/fleet';
import { keys } from '../../api/keys';
import type { Selector } from '../nodes/labels';

/** usePublishCanary publishes an approved change as a canary on the nodes the selector matches, judged by analysis when given. */
export function usePublishCanary(ns: string) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: ({ id, selector, analysis }: { id: number; selector: Selector; analysis?: CanaryAnalysis }) =>
      unwrap(client.POST('/api/v1/namespaces/{ns}/changes/{id}/publish', { params: { path: { ns, id } }, body: { canary: { selector, ...(analysis ? { analysis } : {}) } } })),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: keys.canary(ns) });
      return qc.invalidateQueries({ queryKey: keys.namespace(ns) });
    },
  });
}

/** useEndCanary promotes the canary to every node or aborts it, with a reason. */
export function useEndCanary(ns: string) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: ({ action, reason }: { action: 'promote' | 'abort'; reason: string }) => {
      const opts = { params: { path: { ns } }, body: reason ? { reason } : {} };
      return action === 'promote' ? unwrap(client.POST('/api/v1/namespaces/{ns}/canary/promote', opts)) : unwrap(client.POST('/api/v1/namespaces/{ns}/canary/abort', opts));
    },
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: keys.canary(ns) });
      return qc.invalidateQueries({ queryKey: keys.namespace(ns) });
    },
  });
}
