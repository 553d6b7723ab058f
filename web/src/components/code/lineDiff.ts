// A line-first diff for the merge view (its DiffConfig.override). The merge
// package's own diff works on characters: between two 10,000-rule documents
// whose 100 changes are spread over 1,000 lines it walks tens of thousands of
// characters per edit step. Rule sets change by whole lines, so this diff
// drops the common leading and trailing lines, runs Myers's algorithm over the
// remaining lines, and only then diffs characters, inside each changed block
// of lines, with the package's own diff (so the in-line marks are the same).
import { Change, diff } from '@codemirror/merge';

/** MaxLineEdits bounds the line diff (its memory grows with its square); past it the package's diff, with a timeout, does the middle. */
export const MaxLineEdits = 2000;

/** splitLines splits after each newline, so every line keeps its own and the lines concatenate back to the text. */
function splitLines(s: string): string[] {
  const out: string[] = [];
  let from = 0;
  for (;;) {
    const nl = s.indexOf('\n', from);
    if (nl < 0) break;
    out.push(s.slice(from, nl + 1));
    from = nl + 1;
  }
  if (from < s.length) out.push(s.slice(from));
  return out;
}

type Hunk = { a0: number; a1: number; b0: number; b1: number };

/** myers is the changed blocks between a[0..n) and b[0..m), or null past maxD edits. */
function myers(a: string[], b: string[], maxD: number): Hunk[] | null {
  const n = a.length;
  const m = b.length;
  const max = Math.min(n + m, maxD);
  const off = max + 1;
  let v = new Int32Array(2 * max + 3);
  const trace: Int32Array[] = [];
  let found = -1;
  for (let d = 0; d <= max && found < 0; d++) {
    trace.push(v.slice(off - d - 1, off + d + 2)); // k from -d-1 to d+1
    const next = v; // updated in place; the trace holds the previous step
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[off + k - 1] < v[off + k + 1]) ? v[off + k + 1] : v[off + k - 1] + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      next[off + k] = x;
      if (x >= n && y >= m) {
        found = d;
        break;
      }
    }
    v = next;
  }
  if (found < 0) return null;
  // Walk back through the trace: one line deleted or inserted per step,
  // adjacent edits joined into blocks.
  const edits: Hunk[] = [];
  let x = n;
  let y = m;
  for (let d = found; d > 0; d--) {
    const pv = trace[d];
    const o = d + 1;
    const k = x - y;
    const down = k === -d || (k !== d && pv[o + k - 1] < pv[o + k + 1]);
    const pk = down ? k + 1 : k - 1;
    const px = pv[o + pk];
    const py = px - pk;
    edits.push(down ? { a0: px, a1: px, b0: py, b1: py + 1 } : { a0: px, a1: px + 1, b0: py, b1: py });
    x = px;
    y = py;
  }
  const hunks: Hunk[] = [];
  for (let i = edits.length - 1; i >= 0; i--) {
    const e = edits[i];
    const last = hunks[hunks.length - 1];
    if (last && last.a1 === e.a0 && last.b1 === e.b0) {
      last.a1 = e.a1;
      last.b1 = e.b1;
    } else hunks.push({ ...e });
  }
  return hunks;
}

/** lineDiff is the changes from a to b, found line by line and refined by characters inside the changed blocks. */
export function lineDiff(a: string, b: string): readonly Change[] {
  // The common leading and trailing whole lines, by comparing characters
  // (no line strings made for them).
  const minLen = Math.min(a.length, b.length);
  let p = 0;
  while (p < minLen && a.charCodeAt(p) === b.charCodeAt(p)) p++;
  if (p === a.length && p === b.length) return [];
  const posA = p === 0 ? 0 : a.lastIndexOf('\n', p - 1) + 1;
  const posB = posA;
  let s = 0;
  while (s < minLen - posA && a.charCodeAt(a.length - 1 - s) === b.charCodeAt(b.length - 1 - s)) s++;
  // The suffix starts after a newline on both sides (or is empty).
  let endA = a.length - s;
  if (s > 0 && a.charCodeAt(endA - 1) !== 10) {
    const nl = a.indexOf('\n', endA);
    endA = nl < 0 ? a.length : nl + 1;
  }
  const endB = b.length - (a.length - endA);
  const midA = splitLines(a.slice(posA, endA));
  const midB = splitLines(b.slice(posB, endB));
  const at = (lines: string[], base: number) => {
    // Offsets of each middle line's start, and of the end.
    const o = new Array<number>(lines.length + 1);
    o[0] = base;
    for (let i = 0; i < lines.length; i++) o[i + 1] = o[i] + lines[i].length;
    return o;
  };
  const oa = at(midA, posA);
  const ob = at(midB, posB);
  const hunks = myers(midA, midB, MaxLineEdits);
  const out: Change[] = [];
  const refine = (fromA: number, toA: number, fromB: number, toB: number, timeout?: number) => {
    if (fromA === toA || fromB === toB) {
      out.push(new Change(fromA, toA, fromB, toB));
      return;
    }
    for (const c of diff(a.slice(fromA, toA), b.slice(fromB, toB), timeout ? { timeout } : undefined)) {
      out.push(new Change(c.fromA + fromA, c.toA + fromA, c.fromB + fromB, c.toB + fromB));
    }
  };
  if (hunks === null) {
    refine(oa[0], oa[midA.length], ob[0], ob[midB.length], 500);
    return out;
  }
  for (const h of hunks) refine(oa[h.a0], oa[h.a1], ob[h.b0], ob[h.b1]);
  return out;
}
