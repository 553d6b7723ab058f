import { useQuery } from '@tanstack/react-query';
import { client, unwrap } from '../../api/client';
import { keys } from '../../api/keys';

/** ranges are the windows the traffic page offers, in seconds (5 minutes to the hour the control plane keeps). */
export const ranges = [
  { value: 300, label: '5 min' },
  { value: 900, label: '15 min' },
  { value: 3600, label: '1 hour' },
];

/**
 * useStats loads the last range seconds of stats at 5 s steps, fleet-wide
 * and per node (only one node's with node); the namespace's stream
 * (useStream) keeps it current, so it is refetched only when the stream
 * had to be reopened.
 */
export function useStats(ns: string, range: number, node?: string) {
  return useQuery({
    queryKey: keys.stats(ns, range, node),
    staleTime: Infinity,
    queryFn: () =>
      unwrap(
        client.GET('/api/v1/namespaces/{ns}/stats', {
          params: { path: { ns }, query: { since: new Date(Date.now() - range * 1000).toISOString(), step: '5s', ...(node ? { node } : {}) } },
        }),
      ),
  });
}
