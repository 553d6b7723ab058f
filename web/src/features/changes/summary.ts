// Plain-language summary of a structural diff (api.Diff), one line per rule,
// with the server's risk warnings attached to the rule they are about.
import type { Change, Diff } from '../../api/client';

/** Warning is a risk flag the server computes for a change (SHARED_CONTRACTS.md §1). */
export type Warning = { code: string; path?: string; message: string };

export type SummaryLine = {
  kind: string;
  id: string;
  op: 'added' | 'removed' | 'changed' | 'namespace' | 'kind' | 'reordered';
  text: string;
  warnings: Warning[];
};

const singular: Record<string, string> = { routes: 'route', identities: 'identity', limits: 'limit', classes: 'class', breakers: 'breaker', degrades: 'degrade' };

/** warningsOf reads a change's warnings; an older server without them yields []. */
export function warningsOf(c: Change | undefined): Warning[] {
  const w = (c as { warnings?: unknown } | undefined)?.warnings;
  return Array.isArray(w) ? (w as Warning[]) : [];
}

export function show(v: unknown): string {
  if (v === undefined || v === null) return '(none)';
  if (typeof v === 'string') return v;
  if (Array.isArray(v) && v.every((x) => typeof x !== 'object')) return `[${v.join(', ')}]`;
  return JSON.stringify(v);
}

type Rec = Record<string, unknown>;

function describeLimit(l: Rec): string {
  const per = l.algorithm === 'concurrency' ? ' in flight' : ` per ${show(l.period ?? '1s')}`;
  const key = Array.isArray(l.key) && l.key.length ? `, key ${show(l.key)}` : '';
  const scope = l.scope === 'cluster' ? `, cluster-wide${l.bucket ? ` in bucket ${show(l.bucket)}` : ''}` : '';
  return `${show(l.algorithm)} ${show(l.rate)}${per}${key}${scope}${onResources(l)}`;
}

/** onResources names the SDK resources a kind: service rule guards, when it names any. */
function onResources(r: Rec): string {
  return Array.isArray(r.resources) && r.resources.length ? `, on resources ${show(r.resources)}` : '';
}

function describeAdded(kind: string, r: Rec): string {
  switch (kind) {
    case 'limits':
      return describeLimit(r);
    case 'routes': {
      const m = (r.match ?? {}) as Rec;
      const p = m.path ?? m.pathPrefix ?? m.pathRegex ?? '/';
      return `${m.path ? 'path' : m.pathRegex ? 'regex' : 'prefix'} ${show(p)}`;
    }
    case 'degrades':
      return `${show(r.mode)} mode${r.mode === 'manual' ? `, level ${show(r.level ?? 0)}` : ''}${onResources(r)}`;
    case 'breakers':
      return `window ${show(r.window)}, open for ${show(r.openFor)}${onResources(r)}`;
  }
  return '';
}

function ruleOf(kind: string, id: string, ctx?: Rec): Rec | undefined {
  const list = ctx?.[kind];
  return Array.isArray(list) ? (list as Rec[]).find((r) => r.id === id) : undefined;
}

/**
 * summarize turns a diff into sentences such as
 * "limit orders-per-ip: rate 5 → 50 per 1s". next is the rule set after the
 * change, for context a field diff lacks (a changed rate's period).
 */
export function summarize(diff: Diff | undefined, warnings: Warning[] = [], next?: unknown): { lines: SummaryLine[]; general: Warning[] } {
  const lines: SummaryLine[] = [];
  const ctx = next as Rec | undefined;
  if (diff?.namespace) {
    lines.push({ kind: 'namespace', id: '', op: 'namespace', text: `namespace ${show(diff.namespace.old)} → ${show(diff.namespace.new)}`, warnings: [] });
  }
  if (diff?.kind) {
    lines.push({ kind: 'kind', id: '', op: 'kind', text: `kind ${show(diff.kind.old)} → ${show(diff.kind.new)}`, warnings: [] });
  }
  for (const r of diff?.rules ?? []) {
    const kind = r.kind ?? '';
    const id = r.id ?? '';
    const what = `${singular[kind] ?? kind} ${id}`;
    let text: string;
    if (r.op === 'added') {
      const d = describeAdded(kind, (r.new ?? {}) as Rec);
      text = `${what} added${d ? `: ${d}` : ''}`;
    } else if (r.op === 'removed') {
      text = `${what} removed`;
    } else {
      const rule = ruleOf(kind, id, ctx);
      const parts = (r.fields ?? []).map((f) => {
        let s = `${f.path} ${show(f.old)} → ${show(f.new)}`;
        if (kind === 'limits' && f.path === 'rate' && rule && rule.algorithm !== 'concurrency') s += ` per ${show(rule.period ?? '1s')}`;
        return s;
      });
      text = `${what}: ${parts.join('; ')}`;
    }
    lines.push({ kind, id, op: r.op ?? 'changed', text, warnings: [] });
  }
  for (const k of diff?.reordered ?? []) {
    lines.push({ kind: k, id: '', op: 'reordered', text: `${k} reordered (for routes, the first match wins)`, warnings: [] });
  }
  const general: Warning[] = [];
  for (const w of warnings) {
    const m = /^(routes|identities|limits|classes|breakers|degrades)\[([^\]]+)\]/.exec(w.path ?? '');
    const line = m && lines.find((l) => l.kind === m[1] && l.id === m[2]);
    if (line) line.warnings.push(w);
    else general.push(w);
  }
  return { lines, general };
}
