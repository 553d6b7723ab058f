// How the events timeline writes an event's cells.
import type { FleetEvent } from '../../api/fleet';

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

/** change is what an event changed, for the table: a level or state step, or a version. */
export function change(e: FleetEvent): string {
  if (e.from !== undefined || e.to !== undefined) return `${show(e.from) || '?'} → ${show(e.to) || '?'}`;
  if (e.version !== undefined) return `v${e.version}`;
  return '';
}
