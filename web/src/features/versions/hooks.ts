import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { client, unwrap, type RuleSet } from '../../api/client';
import { keys } from '../../api/keys';

export function useVersions(ns: string, limit?: number) {
  return useQuery({
    queryKey: [...keys.versions(ns), limit ?? 0],
    queryFn: () => unwrap(client.GET('/api/v1/namespaces/{ns}/versions', { params: { path: { ns }, query: limit ? { limit } : {} } })),
  });
}

const empty = (ns: string): RuleSet => ({ namespace: ns });

/** useVersionDoc is a version's rule-set document; version 0 is the empty rule set. */
export function useVersionDoc(ns: string, n: number | undefined) {
  return useQuery({
    queryKey: keys.version(ns, n ?? -1),
    enabled: n !== undefined,
    staleTime: Infinity,
    queryFn: async (): Promise<RuleSet> =>
      n === 0 ? empty(ns) : unwrap(client.GET('/api/v1/namespaces/{ns}/versions/{n}', { params: { path: { ns, n: n! } } })),
  });
}

export function useVersionDiff(ns: string, a: number | undefined, b: number | undefined) {
  return useQuery({
    queryKey: keys.versionDiff(ns, a ?? -1, b ?? -1),
    enabled: a !== undefined && b !== undefined,
    staleTime: Infinity,
    queryFn: () => unwrap(client.GET('/api/v1/namespaces/{ns}/versions/{n}/diff/{m}', { params: { path: { ns, n: a!, m: b! } } })),
  });
}

/** useRollout follows a version's publication until every live node runs it. */
export function useRollout(ns: string, n: number | undefined, follow = true) {
  return useQuery({
    queryKey: keys.rollout(ns, n ?? -1),
    enabled: n !== undefined,
    queryFn: () => unwrap(client.GET('/api/v1/namespaces/{ns}/versions/{n}/rollout', { params: { path: { ns, n: n! } } })),
    refetchInterval: (q) => {
      if (!follow) return false;
      const r = q.state.data;
      return r && r.rulesetAt && (r.waiting ?? []).length === 0 ? false : 1000;
    },
  });
}

export function useRollback(ns: string, n: number) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: { reason: string; emergency: boolean }) =>
      unwrap(client.POST('/api/v1/namespaces/{ns}/versions/{n}/rollback', { params: { path: { ns, n } }, body })),
    onSuccess: () => qc.invalidateQueries({ queryKey: keys.namespace(ns) }),
  });
}
