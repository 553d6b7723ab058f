// How the events timeline writes an event's cells.
import type { FleetEvent } from '../../api/fleet';
import { overrideText, reasonOf } from '../audit/describe';

/** show is a value as text: objects as JSON, nothing as ''. */
export function show(v: unknown): string {
  if (v === undefined || v === null || v === '') return '';
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}

/**
 * detailText is an event's detail in one line: its plain facts as k=v, a
 * nested value as {…}; the whole document is the cell's title.
 */
export function detailText(detail: unknown): string {
  if (detail === undefined || detail === null) return '';
  if (typeof detail !== 'object' || Array.isArray(detail)) return show(detail);
  return Object.entries(detail as Record<string, unknown>)
    .filter(([, v]) => v !== null && v !== undefined && v !== '')
    .map(([k, v]) => `${k}=${typeof v === 'object' ? '{…}' : String(v)}`)
    .join(' ');
}

/**
 * step is an event's step in words: "0 → 1" for a level or state change,
 * just the new state when there was none before (a canary's "start",
 * "promote" or "abort"), "was X" when only the old state is known.
 */
export function step(e: FleetEvent): string {
  const from = show(e.from).replaceAll('_', ' ');
  const to = show(e.to).replaceAll('_', ' ');
  if (from && to) return `${from} → ${to}`;
  if (to) return to;
  if (from) return `was ${from}`;
  return '';
}

/** audited is an audit-derived event's action and after document (its detail), when it has them. */
function audited(e: FleetEvent): { action?: string; after?: unknown } {
  const d = e.detail;
  if (typeof d !== 'object' || d === null || Array.isArray(d)) return {};
  const r = d as Record<string, unknown>;
  return { action: typeof r.action === 'string' ? r.action : undefined, after: r.after };
}

/** reason is the reason an audited event records (an override's, a rollback's), or ''. */
export function reason(e: FleetEvent): string {
  return reasonOf(audited(e).after);
}

/**
 * change is what an event changed, for the table: an override in words
 * ("drain", "degrade rule X to level N", "cleared"), a level or state step,
 * a version, or both ("start v7").
 */
export function change(e: FleetEvent): string {
  if (e.kind === 'override') {
    const a = audited(e);
    const o = overrideText(a.action, a.after);
    if (o !== undefined) return o;
  }
  return [step(e), e.version !== undefined ? `v${e.version}` : ''].filter(Boolean).join(' ');
}
