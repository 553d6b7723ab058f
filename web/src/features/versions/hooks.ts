import { queryOptions, useMutation, useQuery, useQueryClient, type QueryClient } from '@tanstack/react-query';
import { client, unwrap, type RuleSet } from '../../api/client';
import { keys } from '../../api/keys';
import { toYaml } from '../draft/toYaml';
import { fetchVersionYaml } from './versionYaml';

export function useVersions(ns: string, limit?: number) {
  return useQuery({
    queryKey: [...keys.versions(ns), limit ?? 0],
    queryFn: () => unwrap(client.GET('/api/v1/namespaces/{ns}/versions', { params: { path: { ns }, query: limit ? { limit } : {} } })),
  });
}

const empty = (ns: string): RuleSet => ({ namespace: ns });

/** versionDocQuery is a version's rule-set document; version 0 is the empty rule set. */
export const versionDocQuery = (ns: string, n: number | undefined) =>
  queryOptions({
    queryKey: keys.version(ns, n ?? -1),
    enabled: n !== undefined,
    staleTime: Infinity,
    queryFn: async (): Promise<RuleSet> =>
      n === 0 ? empty(ns) : unwrap(client.GET('/api/v1/namespaces/{ns}/versions/{n}', { params: { path: { ns, n: n! } } })),
  });

/** versionDiffQuery is the server's rule diff from version a to version b. */
export const versionDiffQuery = (ns: string, a: number | undefined, b: number | undefined) =>
  queryOptions({
    queryKey: keys.versionDiff(ns, a ?? -1, b ?? -1),
    enabled: a !== undefined && b !== undefined,
    staleTime: Infinity,
    queryFn: () => unwrap(client.GET('/api/v1/namespaces/{ns}/versions/{n}/diff/{m}', { params: { path: { ns, n: a!, m: b! } } })),
  });

/**
 * versionYamlQuery is a version's rule set as YAML (version 0: the empty
 * rule set), fetched and written by a web worker: what the version page
 * shows, so it never parses 10,000 rules on its main thread.
 */
export const versionYamlQuery = (ns: string, n: number | undefined) =>
  queryOptions({
    queryKey: [...keys.version(ns, n ?? -1), 'yaml'],
    enabled: n !== undefined,
    staleTime: Infinity,
    queryFn: async (): Promise<string> => (n === 0 ? toYaml(empty(ns)) : fetchVersionYaml(ns, n!)),
  });

export function useVersionYaml(ns: string, n: number | undefined) {
  return useQuery(versionYamlQuery(ns, n));
}

/** useVersionDoc is a version's rule-set document; version 0 is the empty rule set. */
export function useVersionDoc(ns: string, n: number | undefined) {
  return useQuery(versionDocQuery(ns, n));
}

export function useVersionDiff(ns: string, a: number | undefined, b: number | undefined) {
  return useQuery(versionDiffQuery(ns, a, b));
}

/**
 * prefetchVersionPage starts the version page's big fetches (the version's
 * YAML, and with ?diff= the other version's and the server's diff) from the route's
 * loader, so they run alongside the session check (/me) instead of after it.
 * Nothing waits for them: the page reads them from the cache.
 */
export function prefetchVersionPage(qc: QueryClient, ns: string, n: number, diff: string | null) {
  if (!Number.isInteger(n)) return;
  void qc.prefetchQuery(versionYamlQuery(ns, n));
  const other = diff === null || diff === '' ? NaN : Number(diff);
  if (!Number.isInteger(other)) return;
  void qc.prefetchQuery(versionYamlQuery(ns, other));
  void qc.prefetchQuery(versionDiffQuery(ns, other, n));
}

/** useRollout follows a version's publication until every live node runs it (follow), or at least until it is written to etcd. */
export function useRollout(ns: string, n: number | undefined, follow = true) {
  return useQuery({
    queryKey: keys.rollout(ns, n ?? -1),
    enabled: n !== undefined,
    queryFn: () => unwrap(client.GET('/api/v1/namespaces/{ns}/versions/{n}/rollout', { params: { path: { ns, n: n! } } })),
    refetchInterval: (q) => {
      const r = q.state.data;
      // Until the publisher writes it to etcd (the ruleset or the canary key), whether followed or not.
      if (r && !r.rulesetAt && !r.canaryAt && !q.state.error) return 1000;
      if (!follow) return false;
      // A canary is written once; promoting it is followed on the canary page.
      if (r && !r.rulesetAt && r.canaryAt) return false;
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
