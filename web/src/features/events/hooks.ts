import { useInfiniteQuery, useQuery } from '@tanstack/react-query';
import { getJSON, type EventPage } from '../../api/fleet';
import { keys } from '../../api/keys';

export type EventFilter = { kind?: string; node?: string; rule?: string; since: string };

const path = (ns: string) => `/api/v1/namespaces/${encodeURIComponent(ns)}/events`;

/** useEvents pages through a namespace's events, newest first, from since. */
export function useEvents(ns: string, f: EventFilter) {
  const filter: Record<string, string> = { since: f.since, kind: f.kind ?? '', node: f.node ?? '', rule: f.rule ?? '' };
  return useInfiniteQuery({
    queryKey: keys.events(ns, filter),
    initialPageParam: '',
    queryFn: ({ pageParam }) => getJSON<EventPage>(path(ns), { since: f.since, kind: f.kind, node: f.node, rule: f.rule, before: pageParam === '' ? undefined : pageParam }),
    getNextPageParam: (p) => (p.next === undefined || p.next === null || p.next === '' ? undefined : String(p.next)),
  });
}

/** useRecentEvents is the first page of events since sinceSeconds (unix): the markers of the traffic charts. */
export function useRecentEvents(ns: string, sinceSeconds: number) {
  // The key holds the range start rounded to a minute, so it does not change every render.
  const since = new Date(Math.floor(sinceSeconds / 60) * 60 * 1000).toISOString();
  return useQuery({
    queryKey: keys.events(ns, { since, markers: '1' }),
    queryFn: () => getJSON<EventPage>(path(ns), { since }),
  });
}
