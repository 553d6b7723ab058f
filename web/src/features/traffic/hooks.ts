import { useQueries, useQuery } from '@tanstack/react-query';
import type { Stats } from '../../api/fleet';
import { client, unwrap } from '../../api/client';
import { keys } from '../../api/keys';
import { foldTicks, tickMark } from '../../api/stream';

/** ranges are the windows the traffic page offers, in seconds (5 minutes to the hour the control plane keeps); a custom range picks its own start and end within that hour. */
export const ranges = [
  { value: 300, label: '5 min' },
  { value: 900, label: '15 min' },
  { value: 1800, label: '30 min' },
  { value: 3600, label: '1 hour' },
];

/** retainedSeconds is how far back the control plane keeps stats. */
export const retainedSeconds = 3600;

/** StatsWindow is what a stats query loads: the last range seconds, or everything from a custom range's start (unix seconds). */
export type StatsWindow = number | `from:${number}`;

/**
 * useStats loads the last range seconds (or a custom range's start onward) of stats at 5 s steps, fleet-wide
 * and per node (only one node's with node); the namespace's stream
 * (useStream) keeps it current, so it is refetched only when the stream
 * had to be reopened.
 */
export const statsQuery = (ns: string, range: StatsWindow, node?: string, get: () => Promise<Stats> = () => getStats(ns, range, node)) => ({
  queryKey: keys.stats(ns, range, node),
  staleTime: Infinity,
  // The stream's updates that come while the GET is in flight are folded into its answer (see applyStats).
  queryFn: async () => {
    const mark = tickMark();
    return foldTicks(await get(), ns, range, node, mark);
  },
});

/** getStats is GET …/stats of the window at 5 s steps (one node's series with node). */
function getStats(ns: string, range: StatsWindow, node?: string): Promise<Stats> {
  return unwrap(
    client.GET('/api/v1/namespaces/{ns}/stats', {
      params: { path: { ns }, query: { since: new Date(typeof range === 'number' ? Date.now() - range * 1000 : Number(range.slice('from:'.length)) * 1000).toISOString(), step: '5s', ...(node ? { node } : {}) } },
    }),
  );
}

export function useStats(ns: string, range: StatsWindow, node?: string, enabled = true) {
  return useQuery({ ...statsQuery(ns, range, node), enabled });
}

/** maxNodeCharts is how many nodes the per-node view loads (one stats query each). */
export const maxNodeCharts = 50;

/**
 * useNodesStats is the per-node series of the first maxNodeCharts nodes, one
 * query per node (without node the stats endpoint returns only the fleet's
 * series), combined into one Stats; the stream keeps each current.
 */
export function useNodesStats(ns: string, range: StatsWindow, nodes: string[], enabled: boolean) {
  return useQueries({
    queries: (enabled ? nodes.slice(0, maxNodeCharts) : []).map((n) => statsQuery(ns, range, n)),
    combine: (rs) => ({
      isPending: rs.some((r) => r.isPending),
      error: rs.find((r) => r.error)?.error ?? null,
      data: rs.length && rs.every((r) => r.data) ? ({ step: rs[0].data!.step, series: rs.flatMap((r) => r.data!.series), variants: rs.flatMap((r) => r.data!.variants ?? []) } as Stats) : undefined,
    }),
  });
}
