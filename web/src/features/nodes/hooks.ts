import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { ApiError, asProblem, client, unwrap } from '../../api/client';
import { keys } from '../../api/keys';

export type OverrideInput = { drain?: boolean; degradeLevels?: Record<string, number>; ttl?: string; reason?: string };

/** useCanary is the namespace's active canary (with its running comparison), or null when none is (the API's 204); refetched every interval ms. */
export function useCanary(ns: string, interval = 10_000) {
  return useQuery({
    queryKey: keys.canary(ns),
    queryFn: async () => {
      const { data, error, response } = await client.GET('/api/v1/namespaces/{ns}/canary', { params: { path: { ns } } });
      if (!response.ok) throw new ApiError(response.status, asProblem(response.status, error));
      return response.status === 204 || !data ? null : data;
    },
    refetchInterval: interval,
  });
}

/** useSetOverride writes a node's override (drain, forced degrade levels) with a TTL and a reason. */
export function useSetOverride(ns: string, id: string) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: OverrideInput) => unwrap(client.PUT('/api/v1/namespaces/{ns}/nodes/{id}/override', { params: { path: { ns, id } }, body })),
    onSuccess: () => qc.invalidateQueries({ queryKey: keys.nodes(ns) }),
  });
}

/** useClearOverride deletes a node's override. */
export function useClearOverride(ns: string, id: string) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: () => unwrap(client.DELETE('/api/v1/namespaces/{ns}/nodes/{id}/override', { params: { path: { ns, id } } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: keys.nodes(ns) }),
  });
}
