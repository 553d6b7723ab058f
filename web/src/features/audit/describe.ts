// What an audit event did, in words: the reason given, the fields that went
// from one value to another (a structured diff of the before and after
// documents), and an override said as what it does ("drain", "degrade rule X
// to level N", "cleared") rather than "node.override". The events timeline
// says override events the same way (../events/format.ts).
import { absolute } from '../../components/format';
import { show } from '../changes/summary';

type Rec = Record<string, unknown>;

function isRec(v: unknown): v is Rec {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** FieldChange is one leaf that differs: its dotted path ("tiers.0.rate"), and its values (undefined: absent). */
export type FieldChange = { path: string; from?: unknown; to?: unknown };

/**
 * fieldChanges lists the leaves that differ between before and after, in
 * document order, objects and equal-length arrays compared element by
 * element; anything else that differs is one change at its path.
 */
export function fieldChanges(before: unknown, after: unknown, path = ''): FieldChange[] {
  if (isRec(before) && isRec(after)) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])];
    return keys.flatMap((k) => fieldChanges(before[k], after[k], path ? `${path}.${k}` : k));
  }
  if (Array.isArray(before) && Array.isArray(after) && before.length === after.length) {
    return before.flatMap((b, i) => fieldChanges(b, after[i], `${path}.${i}`));
  }
  if (isRec(before) && after === undefined) return fieldChanges(before, {}, path);
  if (before === undefined && isRec(after)) return fieldChanges({}, after, path);
  if (JSON.stringify(before) === JSON.stringify(after)) return [];
  return [{ path, from: before, to: after }];
}

// A long value (a checksum) is cut to its start; the cell's title has it whole.
const longest = 24;

function brief(v: unknown): string {
  const t = show(v);
  return t.length > longest ? `${t.slice(0, longest)}…` : t;
}

/** changeText is one change as "rate: 100 → 2", "+ burst: 10" when added, "− burst: 10" when removed. */
export function changeText(c: FieldChange): string {
  const at = c.path ? `${c.path}: ` : '';
  if (c.from === undefined) return `+ ${at}${brief(c.to)}`;
  if (c.to === undefined) return `− ${at}${brief(c.from)}`;
  return `${at}${brief(c.from)} → ${brief(c.to)}`;
}

/**
 * overrideText says what an override event did: "cleared" for
 * node.override_delete; for node.override, "drain" and "degrade rule X to
 * level N" for each forced level, and until when. Undefined for any other
 * action.
 */
export function overrideText(action: string | undefined, after: unknown, timeZone?: string): string | undefined {
  if (action === 'node.override_delete') return 'cleared';
  if (action !== 'node.override') return undefined;
  const o = isRec(after) ? after : {};
  const parts: string[] = [];
  if (o.drain === true) parts.push('drain');
  if (isRec(o.degradeLevels)) {
    for (const [rule, level] of Object.entries(o.degradeLevels)) parts.push(`degrade rule ${rule} to level ${show(level)}`);
  }
  const what = parts.length > 0 ? parts.join(', ') : 'override';
  return typeof o.expires === 'string' ? `${what} until ${absolute(o.expires, timeZone)}` : what;
}

/** reasonOf is the reason an event records: the override's or rollback's reason, or a review's comment. */
export function reasonOf(after: unknown): string {
  if (!isRec(after)) return '';
  const r = after.reason ?? after.comment;
  return typeof r === 'string' ? r : '';
}

// Fields shown elsewhere (the reason column) or that only restate the
// override's bookkeeping are left out of the diff.
const notChanges = new Set(['reason', 'comment', 'by', 'revision']);

/**
 * whatChanged is an audit event's effect as lines: an override in words,
 * otherwise each field that went from one value to another.
 */
export function whatChanged(action: string | undefined, before: unknown, after: unknown, timeZone?: string): string[] {
  const o = overrideText(action, after, timeZone);
  if (o !== undefined) return [o];
  return fieldChanges(before, after)
    .filter((c) => !notChanges.has(c.path))
    .map(changeText);
}
