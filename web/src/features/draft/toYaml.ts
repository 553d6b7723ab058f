// toYaml: block YAML for JSON data (a rule set), without the yaml library,
// so the version page's web worker (versions/yamlWorker.ts) carries only this.
import type { RuleSet } from '../../api/client';

const keyword = /^(true|false|null|yes|no|on|off|y|n|~)$/i;
const plainString = /^[A-Za-z0-9_/][\w./@+-]*$/;

/** scalar writes a string plain when YAML reads it back as the same string, else double-quoted (JSON's escapes are YAML's). */
function scalar(v: unknown): string {
  if (typeof v === 'string') {
    const plain = plainString.test(v) && !keyword.test(v) && Number.isNaN(Number(v));
    return plain ? v : JSON.stringify(v);
  }
  if (v === null || v === undefined) return 'null';
  return String(v);
}

function isEmpty(v: unknown): string | null {
  if (Array.isArray(v)) return v.length === 0 ? '[]' : null;
  if (v && typeof v === 'object') {
    for (const _ in v) return null;
    return '{}';
  }
  return scalar(v);
}

/**
 * emit writes v's lines at indentation ind; the first line, when v is a
 * mapping, starts with first instead (a list item's "- ").
 */
function emit(v: unknown, ind: string, out: string[], first = ind) {
  if (Array.isArray(v)) {
    for (const item of v) {
      const s = isEmpty(item);
      if (s !== null) {
        out.push(`${ind}- ${s}`);
      } else if (Array.isArray(item)) {
        out.push(`${ind}-`);
        emit(item, ind + '  ', out);
      } else {
        emit(item, ind + '  ', out, `${ind}- `);
      }
    }
    return;
  }
  let lead = first;
  const obj = v as Record<string, unknown>;
  for (const k in obj) {
    const val = obj[k];
    if (val === undefined) continue;
    const s = isEmpty(val);
    if (s !== null) out.push(`${lead}${scalar(k)}: ${s}`);
    else {
      out.push(`${lead}${scalar(k)}:`);
      emit(val, ind + '  ', out);
    }
    lead = ind;
  }
}

/**
 * toYaml writes a rule set as block YAML, in the document's own key order.
 * It is a small emitter for JSON data (a rule set is JSON), many times
 * faster than a general YAML writer at 10,000 rules; fromYaml reads it back
 * to the same value (a unit test holds the two together).
 */
export function toYaml(rs: RuleSet): string {
  const out: string[] = [];
  emit(rs, '', out);
  return out.join('\n') + '\n';
}
