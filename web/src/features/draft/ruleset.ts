// The draft's two views share one value, the RuleSet; this module converts
// between it and YAML, edits it immutably for the forms, and maps the
// server's field paths ("limits[2].rate") to form fields and YAML lines.
import { isMap, isSeq, LineCounter, parseDocument, stringify } from 'yaml';
import type { Limit, RuleSet } from '../../api/client';

/** MaxYamlBytes is the largest YAML the editor accepts (the server's document limit). */
export const MaxYamlBytes = 8 << 20;

export const ruleKinds = ['routes', 'identities', 'limits', 'classes', 'breakers', 'degrades'] as const;
export type RuleKind = (typeof ruleKinds)[number];

export { toYaml } from './toYaml';

/** toYamlGeneral is the yaml library's writer, the reference for toYaml's tests. */
export function toYamlGeneral(v: unknown): string {
  return stringify(v, { lineWidth: 0, aliasDuplicateObjects: false });
}

export type YamlResult = { ok: true; ruleSet: RuleSet } | { ok: false; message: string; line?: number };

/** fromYaml parses the YAML view. It refuses oversized text before parsing, so a huge paste cannot freeze the tab. */
export function fromYaml(text: string): YamlResult {
  if (text.length > MaxYamlBytes) {
    return { ok: false, message: `the YAML is ${(text.length / (1 << 20)).toFixed(1)} MB; the limit is ${MaxYamlBytes >> 20} MB` };
  }
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, uniqueKeys: true, merge: false });
  if (doc.errors.length > 0) {
    const e = doc.errors[0];
    return { ok: false, message: e.message.split('\n')[0], line: e.linePos?.[0].line };
  }
  const value: unknown = doc.toJS({ maxAliasCount: 100 });
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    return { ok: false, message: 'the document must be a mapping with namespace, routes, limits, breakers and degrades' };
  }
  return { ok: true, ruleSet: value as RuleSet };
}

/** parsePath splits "limits[2].rate" into ["limits", 2, "rate"]. */
export function parsePath(path: string): (string | number)[] {
  const out: (string | number)[] = [];
  for (const m of path.matchAll(/([^.[\]]+)|\[(\d+)\]|\[([^\]]*)\]/g)) {
    if (m[1] !== undefined) out.push(m[1]);
    else if (m[2] !== undefined) out.push(Number(m[2]));
    else if (m[3] !== undefined) out.push(m[3]);
  }
  return out;
}

/** lineOfPath is the 1-based line of a field path in the YAML text, or of its nearest existing parent; 0 when unknown. */
export function lineOfPath(text: string, path: string): number {
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc });
  let node: unknown = doc.contents;
  let offset = -1;
  for (const seg of parsePath(path)) {
    if (isMap(node)) {
      const pair = node.items.find((p) => String((p.key as { value?: unknown })?.value) === String(seg));
      if (!pair) break;
      offset = (pair.key as { range?: [number, number, number] }).range?.[0] ?? offset;
      node = pair.value;
    } else if (isSeq(node)) {
      let item: unknown;
      if (typeof seg === 'number') item = node.items[seg];
      else item = node.items.find((it) => isMap(it) && String(it.get('id')) === seg);
      if (!item) break;
      offset = (item as { range?: [number, number, number] }).range?.[0] ?? offset;
      node = item;
    } else break;
  }
  return offset < 0 ? 0 : lc.linePos(offset).line;
}

/** ruleIdOfPath turns "limits[2].rate" into { kind: "limits", id of the rule at index 2, field: "rate" }. */
export function ruleOfPath(rs: RuleSet, path: string): { kind: RuleKind; index: number; id?: string; field: string } | undefined {
  const [kind, idx, ...rest] = parsePath(path);
  if (!ruleKinds.includes(kind as RuleKind)) return undefined;
  const rules = (rs[kind as RuleKind] ?? []) as { id?: string }[];
  const index = typeof idx === 'number' ? idx : rules.findIndex((r) => r.id === idx);
  return { kind: kind as RuleKind, index, id: rules[index]?.id, field: rest.join('.') };
}

/** withLimit returns a copy of rs whose limit at index i is replaced by f(old). */
export function withLimit(rs: RuleSet, i: number, f: (l: Limit) => Limit): RuleSet {
  const limits = [...(rs.limits ?? [])];
  limits[i] = f(limits[i]);
  return { ...rs, limits };
}

/** setField sets (or, for undefined / "", removes) one top-level field of a rule. */
export function setField<T extends object>(rule: T, field: string, value: unknown): T {
  const out = { ...rule } as Record<string, unknown>;
  if (value === undefined || value === '' || (Array.isArray(value) && value.length === 0)) delete out[field];
  else out[field] = value;
  return out as T;
}

/** newLimit is a sensible default limit: 100 requests per second per client address. */
export function newLimit(rs: RuleSet): Limit {
  const ids = new Set((rs.limits ?? []).map((l) => l.id));
  let n = (rs.limits?.length ?? 0) + 1;
  while (ids.has(`limit-${n}`)) n++;
  return { id: `limit-${n}`, key: ['ip'], algorithm: 'token_bucket', rate: 100, period: '1s' };
}

/** routeIds lists the ids of the draft's routes, for the limit's route picker. */
export function routeIds(rs: RuleSet): string[] {
  return (rs.routes ?? []).map((r) => r.id);
}

/** sameRuleSet compares two rule sets by value (key order ignored). */
export function sameRuleSet(a: unknown, b: unknown): boolean {
  return stableJSON(a) === stableJSON(b);
}

function stableJSON(v: unknown): string {
  return JSON.stringify(v, (_k, val) =>
    val && typeof val === 'object' && !Array.isArray(val)
      ? Object.fromEntries(Object.entries(val as Record<string, unknown>).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)))
      : val,
  );
}

/** getIn reads a dotted path ("upstream.targets[0].url") of a rule. */
export function getIn(obj: unknown, path: string): unknown {
  let cur = obj;
  for (const seg of parsePath(path)) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string | number, unknown>)[seg];
  }
  return cur;
}

/** setIn returns a copy of obj with the dotted path set; undefined, "" and [] remove the field. */
export function setIn<T>(obj: T, path: string, value: unknown): T {
  const segs = parsePath(path);
  const rec = (o: unknown, i: number): unknown => {
    const seg = segs[i];
    const base = (Array.isArray(o) ? [...o] : o && typeof o === 'object' ? { ...(o as object) } : typeof seg === 'number' ? [] : {}) as Record<string | number, unknown>;
    if (i === segs.length - 1) {
      if (value === undefined || value === '' || (Array.isArray(value) && value.length === 0)) delete base[seg];
      else base[seg] = value;
    } else base[seg] = rec(base[seg], i + 1);
    return base;
  };
  return rec(obj, 0) as T;
}

/** withRule returns a copy of rs with rule i of kind replaced by f(old), or removed when f returns undefined. */
export function withRule(rs: RuleSet, kind: RuleKind, i: number, f: (r: Record<string, unknown>) => Record<string, unknown> | undefined): RuleSet {
  const list = [...((rs[kind] ?? []) as Record<string, unknown>[])];
  const r = f(list[i]);
  if (r === undefined) list.splice(i, 1);
  else list[i] = r;
  const out = { ...rs, [kind]: list } as Record<string, unknown>;
  if (list.length === 0) delete out[kind];
  return out as RuleSet;
}

/** isService says whether rs is a kind: service document (run by the in-service SDK). */
export function isService(rs: RuleSet | null | undefined): boolean {
  return rs?.kind === 'service';
}

/** withDocKind sets the document's kind; the gateway, the default, is written absent. */
export function withDocKind(rs: RuleSet, kind: string): RuleSet {
  const out = { ...rs };
  if (kind === 'service') out.kind = 'service';
  else delete out.kind;
  return out;
}

/** newRule is a sensible default rule of a kind, with an unused id; in a kind: service document, a route has no upstream and a limit keys on global. */
export function newRule(rs: RuleSet, kind: RuleKind): Record<string, unknown> {
  const prefix = { routes: 'route', identities: 'identity', limits: 'limit', classes: 'class', breakers: 'breaker', degrades: 'degrade' }[kind];
  const ids = new Set(((rs[kind] ?? []) as { id?: string }[]).map((r) => r.id));
  let n = ((rs[kind] ?? []) as unknown[]).length + 1;
  while (ids.has(`${prefix}-${n}`)) n++;
  const id = `${prefix}-${n}`;
  switch (kind) {
    case 'limits':
      return isService(rs) ? { ...newLimit(rs), id, key: ['global'] } : { ...newLimit(rs), id };
    case 'routes':
      if (isService(rs)) return { id, match: { pathPrefix: '/' } };
      return { id, match: { pathPrefix: '/' }, upstream: { targets: [{ url: 'http://127.0.0.1:8081' }], timeout: '30s' } };
    case 'breakers':
      return { id, window: '10s', errorRatio: 0.5, openFor: '5s' };
    case 'degrades':
      return { id, mode: 'manual', level: 0 };
    case 'identities':
      // Where keys come from and the issuer are the user's to fill: the server's check names them until then.
      return { id, jwt: { from: { header: 'Authorization', scheme: 'Bearer' }, jwks: { url: '' }, issuer: '', algorithms: ['RS256', 'ES256', 'EdDSA'] } };
    case 'classes':
      return { id, match: { claims: {} } };
  }
}

/** newTier is a tier with an unused id and the limit's rate, taking every caller until claims are given. */
export function newTier(limit: Record<string, unknown>): Record<string, unknown> {
  const tiers = (Array.isArray(limit.tiers) ? limit.tiers : []) as { id?: string }[];
  const ids = new Set(tiers.map((t) => t.id));
  let n = tiers.length + 1;
  while (ids.has(`tier-${n}`)) n++;
  return { id: `tier-${n}`, rate: typeof limit.rate === 'number' ? limit.rate : 100 };
}
