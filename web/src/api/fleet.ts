// The fleet's live-traffic shapes (stats, events, the stream), as DESIGN.md
// "Live traffic and events" writes them. Until api/openapi.yaml describes
// these endpoints they are declared here, in this one file; once the
// schema has them, these names become aliases of the generated types.
import { ApiError, asProblem, unauthorized } from './client';

export type EventKind = 'degrade' | 'breaker' | 'publish' | 'rollback' | 'canary' | 'override' | 'node_joined' | 'node_left' | 'apply_error';

export const eventKinds: EventKind[] = ['degrade', 'breaker', 'publish', 'rollback', 'canary', 'override', 'node_joined', 'node_left', 'apply_error'];

/** StatPoint is one step of one series: [unixSeconds, allowed, rejected, shed], counts over the step. */
export type StatPoint = [number, number, number, number];

/** StatSeries is one rule's counts, fleet-wide (no node) or of one node. */
export type StatSeries = { rule: string; kind: string; node?: string; points: StatPoint[] };

/** Stats is GET .../stats and the payload of the stream's `stats` updates. */
export type Stats = { step: string | number; series: StatSeries[] };

/** FleetEvent is one item of GET .../events and the payload of the stream's `event` updates. */
export type FleetEvent = {
  id: string | number;
  at: string;
  kind: EventKind | string;
  node?: string;
  rule?: string;
  from?: unknown;
  to?: unknown;
  version?: number;
  actor?: string;
  detail?: unknown;
};

export type EventPage = { items: FleetEvent[]; next?: string | number | null };

/**
 * getJSON GETs one of the fleet endpoints the generated client does not
 * know yet, with the session cookie; a refusal throws ApiError as the
 * generated client's unwrap does.
 */
export async function getJSON<T>(path: string, query: Record<string, string | undefined> = {}): Promise<T> {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') q.set(k, v);
  const qs = q.toString();
  const r = await fetch(qs ? `${path}?${qs}` : path, { credentials: 'same-origin', headers: { Accept: 'application/json' } });
  const text = await r.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON: keep the text for the error
  }
  if (r.status === 401) unauthorized();
  if (!r.ok) throw new ApiError(r.status, asProblem(r.status, body));
  return body as T;
}
