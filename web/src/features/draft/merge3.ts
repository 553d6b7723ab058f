// A three-way merge of rule documents, for two people saving the same
// draft: base is the document as this tab last loaded or saved it (at the
// ETag its save named), theirs the server's draft now, mine the working
// copy. Changes made on one side only are taken; changes on both sides to
// different fields are combined; the same field changed differently on
// both sides (a rule deleted on one side and edited on the other
// included) is a conflict, which the caller resolves path by path.
//
// Objects merge key by key; lists whose every item is an object with a
// distinct string id (the rule lists, a route's tiers when they carry
// ids) merge item by item, matched by id, so that a reorder is not an
// edit; any other list is one value. Paths read like the server's field
// paths, with the id in the brackets: "limits[coupon].rate".

export type Side = 'theirs' | 'mine';

/** Conflict is one path both sides changed differently; undefined means absent (deleted). */
export type Conflict = { path: string; base: unknown; theirs: unknown; mine: unknown };

export type MergeResult<T> = {
  /** value is the merged document; at a conflict it holds the chosen side (mine when none was chosen). */
  value: T;
  /** conflicts lists every path changed differently on both sides, chosen or not. */
  conflicts: Conflict[];
  /** theirs lists the paths where their change was taken (mine left them as in base). */
  theirs: string[];
};

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** deepEqual compares JSON values; a key whose value is undefined counts as absent. */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((x, i) => deepEqual(x, b[i]));
  }
  if (isObj(a) && isObj(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const k of keys) if (!deepEqual(a[k], b[k])) return false;
    return true;
  }
  return false;
}

/** keyed is whether v is a list of objects with distinct string ids. */
function keyed(v: unknown): v is Obj[] {
  if (!Array.isArray(v)) return false;
  const seen = new Set<string>();
  for (const x of v) {
    if (!isObj(x) || typeof x.id !== 'string' || seen.has(x.id)) return false;
    seen.add(x.id);
  }
  return true;
}

const ids = (l: Obj[]) => l.map((x) => x.id as string);

/**
 * merge3 merges theirs and mine from base. choices picks a side for a
 * conflicting path (by Conflict.path); a conflict without one takes mine
 * in value and is still listed, so the caller can ask.
 */
export function merge3<T>(base: T, theirs: T, mine: T, choices: Record<string, Side> = {}): MergeResult<T> {
  const out: MergeResult<T> = { value: undefined as T, conflicts: [], theirs: [] };
  out.value = merge(base, theirs, mine, '', choices, out as MergeResult<unknown>) as T;
  return out;
}

/** unresolved lists the conflicts choices does not decide. */
export function unresolved(r: MergeResult<unknown>, choices: Record<string, Side>): Conflict[] {
  return r.conflicts.filter((c) => !choices[c.path]);
}

function merge(b: unknown, t: unknown, m: unknown, path: string, choices: Record<string, Side>, out: MergeResult<unknown>): unknown {
  if (deepEqual(t, m)) return t;
  if (deepEqual(b, t)) return m;
  if (deepEqual(b, m)) {
    changedPaths(b, t, path, out.theirs);
    return t;
  }
  // Both changed, differently: look inside when the shapes allow.
  if (isObj(t) && isObj(m) && (b === undefined || isObj(b))) {
    const bo = (b ?? {}) as Obj;
    const r: Obj = {};
    const keys = [...Object.keys(m), ...Object.keys(t).filter((k) => !(k in m))];
    for (const k of keys) {
      const v = merge(bo[k], t[k], m[k], path ? `${path}.${k}` : k, choices, out);
      if (v !== undefined) r[k] = v;
    }
    return r;
  }
  if (keyed(t) && keyed(m) && (b === undefined || keyed(b))) return mergeList((b ?? []) as Obj[], t, m, path, choices, out);
  const c: Conflict = { path: path || '(document)', base: b, theirs: t, mine: m };
  out.conflicts.push(c);
  return choices[c.path] === 'theirs' ? t : m;
}

function mergeList(b: Obj[], t: Obj[], m: Obj[], path: string, choices: Record<string, Side>, out: MergeResult<unknown>): Obj[] {
  const byId = (l: Obj[]) => new Map(l.map((x) => [x.id as string, x]));
  const bm = byId(b);
  const tm = byId(t);
  const mm = byId(m);
  const merged = new Map<string, Obj>();
  for (const id of new Set([...ids(m), ...ids(t), ...ids(b)])) {
    const v = merge(bm.get(id), tm.get(id), mm.get(id), `${path}[${id}]`, choices, out);
    if (v !== undefined) merged.set(id, v as Obj);
  }
  // Order: mine's, unless mine kept base's order and theirs changed it;
  // ids only the other side has go after their predecessor there.
  // Compared over the ids all three hold, so adds and deletes are no reorder.
  const common = (l: Obj[]) => ids(l).filter((id) => bm.has(id) && tm.has(id) && mm.has(id));
  const mineReordered = !deepEqual(common(m), common(b));
  const theirsReordered = !deepEqual(common(t), common(b));
  const [first, second] = theirsReordered && !mineReordered ? [ids(t), ids(m)] : [ids(m), ids(t)];
  const order = first.filter((id) => merged.has(id));
  second.forEach((id, i) => {
    if (!merged.has(id) || order.includes(id)) return;
    let at = 0;
    for (let j = i - 1; j >= 0; j--) {
      const k = order.indexOf(second[j]);
      if (k >= 0) {
        at = k + 1;
        break;
      }
    }
    order.splice(at, 0, id);
  });
  return order.map((id) => merged.get(id)!);
}

/** changedPaths appends the innermost paths where a and b differ. */
function changedPaths(a: unknown, b: unknown, path: string, into: string[]) {
  if (deepEqual(a, b)) return;
  if (isObj(a) && isObj(b)) {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) changedPaths(a[k], b[k], path ? `${path}.${k}` : k, into);
    return;
  }
  if (keyed(a) && keyed(b)) {
    const am = new Map(a.map((x) => [x.id as string, x]));
    const bm = new Map(b.map((x) => [x.id as string, x]));
    const before = into.length;
    for (const id of new Set([...am.keys(), ...bm.keys()])) changedPaths(am.get(id), bm.get(id), `${path}[${id}]`, into);
    if (into.length === before) into.push(`${path} (order)`);
    return;
  }
  into.push(path || '(document)');
}

/** describe is a conflict's or a path's value for the user: JSON, or "(absent)". */
export function describe(v: unknown): string {
  return v === undefined ? '(absent)' : JSON.stringify(v);
}
