// The change API returns its base version and a structural diff, not the
// proposed document; applyDiff rebuilds the proposed document from the two
// so the change page can show a side-by-side YAML diff.
import type { Diff } from '../../api/client';
import { parsePath } from '../draft/ruleset';

type Rec = Record<string, unknown>;
type Kind = 'routes' | 'limits' | 'breakers' | 'degrades';

function setPath(obj: Rec, path: (string | number)[], value: unknown, remove: boolean) {
  let cur: Rec | unknown[] = obj;
  for (let i = 0; i < path.length - 1; i++) {
    const seg = path[i];
    const nextSeg = path[i + 1];
    const c = cur as Record<string | number, unknown>;
    if (c[seg] === undefined || c[seg] === null || typeof c[seg] !== 'object') c[seg] = typeof nextSeg === 'number' ? [] : {};
    cur = c[seg] as Rec;
  }
  const last = path[path.length - 1];
  if (remove) {
    if (Array.isArray(cur) && typeof last === 'number') cur.splice(last, 1);
    else delete (cur as Rec)[last as string];
  } else (cur as Record<string | number, unknown>)[last] = value;
}

/** applyDiff returns base with diff applied: added rules appended, removed ones dropped, changed fields set. */
export function applyDiff(base: unknown, diff: Diff | undefined): Rec {
  const out = structuredClone((base ?? {}) as Rec);
  if (diff?.namespace && diff.namespace.new !== undefined) out.namespace = diff.namespace.new;
  for (const r of diff?.rules ?? []) {
    const kind = r.kind as Kind;
    const list = ((out[kind] as Rec[] | undefined) ?? []).slice();
    const i = list.findIndex((x) => x.id === r.id);
    if (r.op === 'added') list.push(structuredClone((r.new ?? { id: r.id }) as Rec));
    else if (r.op === 'removed') {
      if (i >= 0) list.splice(i, 1);
    } else if (i >= 0) {
      const rule = structuredClone(list[i]);
      for (const f of r.fields ?? []) setPath(rule, parsePath(f.path ?? ''), f.new, f.new === undefined);
      list[i] = rule;
    }
    if (list.length) out[kind] = list;
    else delete out[kind];
  }
  return out;
}
