import { keepPreviousData, useInfiniteQuery, useQuery } from '@tanstack/react-query';
import { client, unwrap } from '../../api/client';
import { keys } from '../../api/keys';

export type EventFilter = { kind?: string; node?: string; rule?: string; since: string };

/** useEvents pages through a namespace's events, newest first, from since, filtered by the server. */
export function useEvents(ns: string, f: EventFilter) {
  const filter: Record<string, string> = { since: f.since, kind: f.kind ?? '', node: f.node ?? '', rule: f.rule ?? '' };
  return useInfiniteQuery({
    queryKey: keys.events(ns, filter),
    initialPageParam: 0,
    queryFn: ({ pageParam }) =>
      unwrap(
        client.GET('/api/v1/namespaces/{ns}/events', {
          params: {
            path: { ns },
            query: { since: f.since, ...(f.kind ? { kind: f.kind } : {}), ...(f.node ? { node: f.node } : {}), ...(f.rule ? { rule: f.rule } : {}), ...(pageParam ? { before: pageParam } : {}) },
          },
        }),
      ),
    getNextPageParam: (p) => (p.next ? p.next : undefined),
  });
}

/** useRecentEvents is the newest page of events since sinceSeconds (unix): the markers of the traffic charts. */
export function useRecentEvents(ns: string, sinceSeconds: number) {
  // The key holds the range start rounded to a minute, so it does not change every tick.
  const since = new Date(Math.floor(sinceSeconds / 60) * 60 * 1000).toISOString();
  return useQuery({
    queryKey: keys.events(ns, { since, markers: '1' }),
    placeholderData: keepPreviousData,
    queryFn: () => unwrap(client.GET('/api/v1/namespaces/{ns}/events', { params: { path: { ns }, query: { since, limit: 500 } } })),
  });
}
