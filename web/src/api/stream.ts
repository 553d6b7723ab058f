// The namespace's live stream (GET /api/v1/namespaces/{ns}/stream, server-
// sent events `node`, `stats`, `event`, `publication`, `reload`), feeding the one
// query cache (and onStreamEvent's listeners, with each event): stats updates are merged into every stats query of the
// namespace, the others invalidate the queries they make stale. One
// EventSource per namespace however many components follow it; the
// browser reconnects it with Last-Event-ID, and when it gives up the
// stream is reopened with a backoff and the stats refetched.
import type { QueryClient } from '@tanstack/react-query';
import { useEffect, useSyncExternalStore } from 'react';
import type { FleetEvent, Stats, StatsTick } from './fleet';
import { keys } from './keys';
import { mergeStats } from '../features/traffic/series';

export type StreamState = 'connecting' | 'live' | 'reconnecting';

type Entry = {
  users: number;
  es: EventSource | null;
  state: StreamState;
  listeners: Set<() => void>;
  retry?: ReturnType<typeof setTimeout>;
  backoff: number;
  // gap: the browser is reconnecting a stream that ended; the stats steps pushed meanwhile are lost.
  gap?: boolean;
};

const streams = new Map<string, Entry>();
const eventListeners = new Map<string, Set<(e: FleetEvent) => void>>();

/** onStreamEvent calls l with each event of ns's stream (while someone follows it, see useStream); it returns the unsubscribe. */
export function onStreamEvent(ns: string, l: (e: FleetEvent) => void): () => void {
  let set = eventListeners.get(ns);
  if (!set) eventListeners.set(ns, (set = new Set()));
  set.add(l);
  return () => {
    set.delete(l);
    if (set.size === 0) eventListeners.delete(ns);
  };
}

function setState(e: Entry, s: StreamState) {
  if (e.state === s) return;
  e.state = s;
  for (const l of e.listeners) l();
}

/**
 * applyStats merges a stream stats update into every stats query of ns
 * (query key: ns, range seconds or a custom range's fixed start, node): a
 * fleet query takes the fleet-wide series (and per-variant series), a
 * node's query that node's. A query whose GET is in flight folds the update
 * into the GET's answer once it comes (foldTicks): the stream sends each
 * step once, and the answer may have been computed before the step was
 * whole (or before the step's data came at all).
 */
export function applyStats(qc: QueryClient, ns: string, update: StatsTick, nowSeconds = Date.now() / 1000) {
  ticks.push({ seq: tickSeq++, ns, update });
  if (ticks.length > maxTicks) ticks.splice(0, ticks.length - maxTicks);
  for (const q of qc.getQueryCache().findAll({ queryKey: keys.stats(ns) })) {
    const [, , , range, node] = q.queryKey as [string, string, string, number | `from:${number}`, string];
    qc.setQueryData<Stats>(q.queryKey, (prev) => (prev ? mergeTick(prev, update, range, node, nowSeconds) : prev));
  }
}

/** mergeTick merges update into the stats of a query of range (seconds back from now, or a custom range's fixed start) and node ('' for the fleet). */
function mergeTick(prev: Stats, update: StatsTick, range: number | `from:${number}`, node: string | undefined, nowSeconds: number): Stats {
  // A custom range keeps everything from its fixed start.
  const since = typeof range === 'string' ? Number(range.slice('from:'.length)) : nowSeconds - range;
  return mergeStats(prev, update, since, (s) => (node ? s.node === node : !s.node));
}

// The stats updates of the last maxTicks steps (every namespace's), numbered, for the stats queries whose GET was in flight
// when they came (tickMark, foldTicks).
const maxTicks = 120;
const ticks: { seq: number; ns: string; update: StatsTick }[] = [];
let tickSeq = 0;

/** tickMark is where the stats updates stand: a stats query takes it before its GET, and folds what came since into the answer (foldTicks). */
export function tickMark(): number {
  return tickSeq;
}

/** foldTicks merges into a stats query's GET answer (ns, range, node: its key's) the updates of ns that came since mark, in order. */
export function foldTicks(data: Stats, ns: string, range: number | `from:${number}`, node: string | undefined, mark: number, nowSeconds = Date.now() / 1000): Stats {
  for (const t of ticks) if (t.seq >= mark && t.ns === ns) data = mergeTick(data, t.update, range, node, nowSeconds);
  return data;
}

function parse(ev: MessageEvent): unknown {
  try {
    return JSON.parse(ev.data as string);
  } catch {
    return undefined;
  }
}

function open(qc: QueryClient, ns: string, e: Entry) {
  e.retry = undefined;
  const es = new EventSource(`/api/v1/namespaces/${encodeURIComponent(ns)}/stream`, { withCredentials: true });
  e.es = es;
  es.onopen = () => {
    e.backoff = 1000;
    if (e.gap) {
      // The browser reconnected with Last-Event-ID: the server replays the events missed, never the stats
      // steps (each is pushed once), so the stats are refetched (and the steps pushed meanwhile folded in).
      e.gap = false;
      void qc.invalidateQueries({ queryKey: keys.stats(ns) });
    }
    setState(e, 'live');
  };
  es.onerror = () => {
    if (es.readyState === EventSource.CLOSED) {
      // The browser gave up (a refused request): reopen later, and refetch what was missed.
      setState(e, 'reconnecting');
      es.close();
      e.es = null;
      e.retry = setTimeout(() => {
        if (e.users === 0) return;
        void qc.invalidateQueries({ queryKey: keys.stats(ns) });
        open(qc, ns, e);
      }, e.backoff);
      e.backoff = Math.min(e.backoff * 2, 30_000);
    } else {
      e.gap = true;
      setState(e, 'reconnecting');
    }
  };
  es.addEventListener('stats', (ev) => {
    const u = parse(ev as MessageEvent) as StatsTick | undefined;
    if (u && Array.isArray(u.series)) applyStats(qc, ns, u);
  });
  es.addEventListener('reload', () => {
    // The server replays at most --stream-replay-max missed events: past
    // that it says reload. Refetch the namespace's views and reopen the
    // stream without Last-Event-ID (a new EventSource sends none).
    es.close();
    e.es = null;
    void qc.invalidateQueries({ queryKey: keys.namespace(ns) });
    if (e.users > 0) open(qc, ns, e);
  });
  es.addEventListener('event', (ev) => {
    void qc.invalidateQueries({ queryKey: keys.events(ns) });
    const fe = parse(ev as MessageEvent) as FleetEvent | undefined;
    if (fe && typeof fe.kind === 'string') for (const l of eventListeners.get(ns) ?? []) l(fe);
  });
  es.addEventListener('node', () => {
    void qc.invalidateQueries({ queryKey: keys.nodes(ns) });
  });
  es.addEventListener('publication', () => {
    void qc.invalidateQueries({ queryKey: keys.versions(ns) });
    void qc.invalidateQueries({ queryKey: keys.canary(ns) });
    void qc.invalidateQueries({ queryKey: keys.nodes(ns) });
    void qc.invalidateQueries({ queryKey: ['namespaces', ns, 'versions'] });
  });
}

function entry(ns: string): Entry {
  let e = streams.get(ns);
  if (!e) {
    e = { users: 0, es: null, state: 'connecting', listeners: new Set(), backoff: 1000 };
    streams.set(ns, e);
  }
  return e;
}

/** follow opens ns's live stream, or joins it if open, until the returned function is called (useStream's effect). */
export function follow(qc: QueryClient, ns: string): () => void {
  const e = entry(ns);
  e.users++;
  if (!e.es && !e.retry) open(qc, ns, e);
  return () => {
    e.users--;
    if (e.users > 0) return;
    e.es?.close();
    e.es = null;
    if (e.retry) clearTimeout(e.retry);
    e.retry = undefined;
    streams.delete(ns);
  };
}

/** useStream follows ns's live stream while the calling component is mounted, and says whether it is connected. */
export function useStream(qc: QueryClient, ns: string): StreamState {
  useEffect(() => follow(qc, ns), [qc, ns]);
  return useSyncExternalStore(
    (l) => {
      const e = entry(ns);
      e.listeners.add(l);
      return () => e.listeners.delete(l);
    },
    () => streams.get(ns)?.state ?? 'connecting',
  );
}
