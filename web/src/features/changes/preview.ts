// A change's preview on live traffic (POST/GET/DELETE …/changes/{id}/preview,
// docs/preview.md), as the change page shows it: the start form's checks,
// each previewed rule's reject rates today and if approved, the keys it
// would reject, and the review box's sentences. Pure functions; the panel
// only draws them.
import { ApiError, type Limit, type Preview } from '../../api/client';
import { plural } from '../../components/format';
import { parseSelector, type Selector } from '../nodes/labels';
import { parseDuration } from '../traffic/series';

/** The longest preview the control plane runs (api.MaxPreviewDuration). */
export const maxPreviewSeconds = 30 * 60;
export const defaultPreviewDuration = '10m';
/** How often a running preview is fetched again (node reports come every few seconds). */
export const previewRefreshMs = 3_000;

/**
 * PreviewView is a preview as the page holds it. A control plane that keeps
 * a stopped preview's figures answers it with state "finished", endedAt and
 * reason. Between the preview's end and the control plane's sweep (seconds),
 * or from one that keeps none (GET answers zeros, then 404), kept is set
 * when the figures shown are the last ones this page saw, and state is then
 * "done" or "stopped".
 */
export type PreviewView = Preview & { kept?: string };

/** durationError says what is wrong with the duration text, or undefined when it is fine. */
export function durationError(text: string): string | undefined {
  if (text.trim() === '') return 'Enter how long to run it, such as 10m (at most 30m).';
  const s = parseDuration(text);
  if (Number.isNaN(s)) return 'Write a number and a unit, such as 10m, 90s or 1m30s (at most 30m).';
  if (s <= 0) return 'Must be more than 0.';
  if (s > maxPreviewSeconds) return `At most 30m (${text.trim()} is longer).`;
  return undefined;
}

/** previewSelector reads the node selector text: empty is every node; error names what is wrong. */
export function previewSelector(text: string): { selector: Selector; error?: undefined } | { selector?: undefined; error: string } {
  const s = parseSelector(text);
  if (s.error) return { error: `${s.error.charAt(0).toUpperCase()}${s.error.slice(1)}; write labels as key=value, comma separated.` };
  return s;
}

/** fieldErrors are the server's refusals of the form's fields (a 400's field paths), by field. */
export function fieldErrors(e: unknown): { duration?: string; selector?: string } {
  if (!(e instanceof ApiError)) return {};
  const out: { duration?: string; selector?: string } = {};
  for (const f of e.fields) {
    if (f.path === 'duration') out.duration ??= `The server refused it: ${f.message}.`;
    else if (f.path?.startsWith('selector')) out.selector ??= `The server refused ${f.path}: ${f.message}.`;
  }
  return out;
}

/** startErrorTitle heads the alert of a refused start: what kind of refusal it is. */
export function startErrorTitle(e: unknown): string {
  if (!(e instanceof ApiError)) return 'The preview did not start';
  switch (e.status) {
    case 409:
      return 'The preview did not start: conflict';
    case 403:
      return 'The preview did not start: not allowed';
    case 400:
      return 'The preview did not start: invalid input';
    default:
      return 'The preview did not start';
  }
}

/** conflictChange is the change whose preview blocks a start (a 409 names it), or undefined. */
export function conflictChange(e: unknown): number | undefined {
  if (!(e instanceof ApiError) || e.status !== 409) return undefined;
  const m = /^change (\d+) of namespace .* is being previewed/.exec(e.message);
  return m ? Number(m[1]) : undefined;
}

type Counts = { allowed?: number; rejected?: number; shadowRejected?: number };

/** Rate is a side's decisions: requests, rejections, shadow rejections and the reject share (null without requests). */
export type Rate = { requests: number; rejected: number; shadow: number; rate: number | null };

export function rateOf(c: Counts | undefined): Rate {
  const allowed = c?.allowed ?? 0;
  const rejected = c?.rejected ?? 0;
  const shadow = c?.shadowRejected ?? 0;
  const requests = allowed + rejected + shadow;
  return { requests, rejected, shadow, rate: requests > 0 ? rejected / requests : null };
}

/** pct is a share as "31.2 %" (no-break space); null is "—", a share below 0.1 % but above 0 is "<0.1 %". */
export function pct(r: number | null): string {
  if (r === null) return '—';
  if (r > 0 && r < 0.001) return '<0.1\u00a0%';
  return `${(r * 100).toFixed(1)}\u00a0%`;
}

const thousands = new Intl.NumberFormat('en-US');

/** count is an integer with thousands separators, one way everywhere. */
export function count(n: number): string {
  return thousands.format(n);
}

/**
 * KeyInfo says how a reported key's text was made: the gateway writes
 * `spec=value` parts joined by "|", with header, query, cookie and claim
 * values as "#" and 24 hex digits of their SHA-256, and cuts a key longer
 * than 64 bytes to its start, "…#" and a hash of the whole.
 */
export type KeyInfo = { hashed: boolean; truncated: boolean };

const hashedPart = /=#[0-9a-f]{24}$/;
const cut = /…#[0-9a-f]{8}$/;

export function keyInfo(key: string): KeyInfo {
  const truncated = cut.test(key);
  const parts = (truncated ? key.replace(cut, '') : key).split('|');
  return { truncated, hashed: parts.some((p) => hashedPart.test(p)) || (truncated && /=#[0-9a-f]*$/.test(parts[parts.length - 1])) };
}

export type Noun = 'client' | 'key' | undefined;

/** nounOf is what one key of the limit is for people: a client when it keys on addresses alone, no noun for a global limit. */
export function nounOf(limit: Limit | undefined): Noun {
  const key = limit?.key ?? [];
  if (key.length === 0 || key.every((k) => k === 'global')) return limit ? undefined : 'key';
  return key.every((k) => k === 'ip' || k.startsWith('ip/')) ? 'client' : 'key';
}

export type PreviewRow = {
  rule: string;
  kind: string;
  live: Rate;
  preview: Rate;
  /** Distinct keys among the reported top keys: a lower bound of the keys the preview rejected. */
  keys: number;
  /** The distinct keys the preview rejected, as the nodes counted them (clientsAffected; absent from an older control plane or node). */
  clients?: { count: number; approximate: boolean };
  noun: Noun;
  topKeys: { key: string; rejected: number; info: KeyInfo }[];
  /** A cluster-scope limit: each node evaluated it alone (rate divided by the live nodes). */
  approximate: boolean;
  /** The preview would reject a larger share than the live rule does today. */
  worse: boolean;
  /** Fields of the rule this console does not know, as "name: value" (a newer control plane's). */
  extras: string[];
};

const known = new Set(['rule', 'kind', 'live', 'preview', 'topKeys', 'clientsAffected']);

function extrasOf(r: Record<string, unknown>): string[] {
  const out: string[] = [];
  for (const [k, v] of Object.entries(r)) {
    if (known.has(k) || v === null || v === undefined) continue;
    if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') out.push(`${k}: ${String(v)}`);
    else if (Array.isArray(v)) out.push(`${k}: ${plural(v.length, 'entry', 'entries')}`);
    else if (typeof v === 'object') {
      const scalars = Object.entries(v as Record<string, unknown>).filter(([, x]) => typeof x === 'number' || typeof x === 'string' || typeof x === 'boolean');
      out.push(`${k}: ${scalars.length > 0 ? scalars.map(([a, x]) => `${a} ${String(x)}`).join(', ') : '…'}`);
    }
  }
  return out;
}

/** previewRows are the preview's rules for the table; limits are the change's (for scope and key). */
export function previewRows(p: Preview, limits: Limit[] | undefined): PreviewRow[] {
  const byId = new Map((limits ?? []).map((l) => [l.id, l]));
  return (p.rules ?? []).map((raw) => {
    const r = raw as Partial<Preview['rules'][number]> & Record<string, unknown>;
    const kind = typeof r.kind === 'string' ? r.kind : 'limit';
    const limit = kind === 'limit' ? byId.get(String(r.rule)) : undefined;
    const live = rateOf(r.live);
    const preview = rateOf(r.preview);
    const topKeys = (Array.isArray(r.topKeys) ? r.topKeys : []).map((k) => ({ key: String(k.key), rejected: Number(k.rejected) || 0, info: keyInfo(String(k.key)) }));
    const worse = preview.rate !== null && preview.rejected > 0 && (live.rate === null || preview.rate > live.rate);
    const ca = r.clientsAffected;
    const clients = ca && typeof ca.count === 'number' ? { count: ca.count, approximate: !!ca.approximate } : undefined;
    return {
      rule: String(r.rule ?? '?'),
      kind,
      live,
      preview,
      keys: new Set(topKeys.map((k) => k.key)).size,
      ...(clients ? { clients } : {}),
      noun: kind === 'limit' ? nounOf(limit) : 'key',
      topKeys,
      approximate: p.approximate && limit?.scope === 'cluster',
      worse,
      extras: extrasOf(r),
    };
  });
}

/** summaryLine is the review box's sentence for a rule that would reject more than today. */
export function summaryLine(r: PreviewRow): string {
  const from = !r.noun
    ? ''
    : r.clients
      ? r.clients.count > 0
        ? ` from ${r.clients.approximate ? 'about ' : ''}${plural(r.clients.count, r.noun)}`
        : ''
      : r.keys > 0
        ? ` from at least ${plural(r.keys, r.noun)}`
        : '';
  const today = r.live.rate === null ? 'today no live requests reached a rule of that id' : `today ${pct(r.live.rate)}`;
  const approx = r.approximate ? ' (approximate: a cluster limit, each node judged alone)' : '';
  return `If approved: ${r.kind} ${r.rule} would reject ${pct(r.preview.rate)} of requests${from}; ${today}.${approx}`;
}

const reasons: Record<string, string> = {
  stopped: 'was stopped',
  expired: 'ran its full duration',
  published: 'ended when the change was published',
  rejected: 'ended when the change was rejected',
  edited: 'ended when the change was reopened',
};

/** endedLine says how a finished preview ended, for people: "was stopped", "ended when the change was published". */
export function endedLine(reason: string | undefined): string {
  if (!reason) return 'ended';
  return reasons[reason] ?? `ended (${reason})`;
}

/** timeLeft is how long until until, for people: "9 min 12 s left", "ended". */
export function timeLeft(until: string, now: number): string {
  const s = Math.round((new Date(until).getTime() - now) / 1000);
  if (Number.isNaN(s)) return '';
  if (s <= 0) return 'ended';
  const m = Math.floor(s / 60);
  return m > 0 ? `${m} min ${s % 60} s left` : `${s} s left`;
}

/**
 * keepLast is what the page shows after fetching next (null: the API's 404)
 * with prev shown before: a finished preview (the figures the control plane
 * kept) is shown as it is; otherwise, once a preview ends or is stopped the
 * nodes stop reporting it, so the last figures seen are kept (marked with
 * when they were last reported) rather than replaced by zeros or by nothing.
 */
export function keepLast(prev: PreviewView | null | undefined, next: Preview | null, now: string): PreviewView | null {
  if (next?.state === 'finished') return next; // the figures the control plane kept when it stopped
  const hadFigures = !!prev && prev.nodes.length > 0;
  if (next === null) {
    if (!prev || !hadFigures) return null;
    return prev.kept ? prev : { ...prev, state: prev.state === 'running' ? 'stopped' : prev.state, kept: now };
  }
  if (!prev || prev.since !== next.since || prev.change !== next.change) return next;
  if (next.nodes.length === 0 && hadFigures && next.state !== 'running') return { ...prev, state: next.state, until: next.until, kept: prev.kept ?? now };
  return next;
}
