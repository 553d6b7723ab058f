// Label selectors as the console reads them from people ("zone=a, tier=edge"):
// the nodes page filters by one, a canary is published with one. The
// patterns are api/openapi.yaml's Selector (the server checks them again).
export type Selector = Record<string, string>;

const keyRe = /^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$/;
const valueRe = /^[A-Za-z0-9._/-]{1,63}$/;

/** parseSelector reads "k=v, k2=v2"; an empty text is the empty selector. The error names the part that is wrong. */
export function parseSelector(text: string): { selector: Selector; error?: undefined } | { selector?: undefined; error: string } {
  const selector: Selector = {};
  const parts = text.split(',').map((p) => p.trim()).filter((p) => p !== '');
  if (parts.length > 16) return { error: `at most 16 labels, not ${parts.length}` };
  for (const p of parts) {
    const eq = p.indexOf('=');
    if (eq < 0) return { error: `"${p}" is not key=value` };
    const k = p.slice(0, eq).trim();
    const v = p.slice(eq + 1).trim();
    if (!keyRe.test(k)) return { error: `label key "${k}" must start with a letter or digit and hold only letters, digits and . _ / - (at most 63)` };
    if (!valueRe.test(v)) return { error: `label value "${v}" of ${k} must be 1 to 63 letters, digits or . _ / -` };
    if (k in selector && selector[k] !== v) return { error: `label ${k} is given twice` };
    selector[k] = v;
  }
  return { selector };
}

/** matches reports whether labels has every label of selector with its value. */
export function matches(labels: Record<string, string> | undefined, selector: Selector): boolean {
  return Object.entries(selector).every(([k, v]) => labels?.[k] === v);
}

/** formatLabels writes labels as a selector text, keys sorted. */
export function formatLabels(labels: Record<string, string> | undefined): string {
  return Object.entries(labels ?? {})
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}=${v}`)
    .join(', ');
}
