// What the form view shows of each rule kind. Help text comes from
// api/schema.json's descriptions where the schema has one, so the form and
// the schema never disagree.
import schema from '../../../../api/schema.json';
import { getIn, type RuleKind } from './ruleset';

export type FieldType = 'text' | 'number' | 'select' | 'tags' | 'routes' | 'bool' | 'multiselect' | 'claims' | 'oneof' | 'tiers';

/** Choice is one shape of a 'oneof' field: the key that marks it, and the value switching to it writes. */
export type Choice = { value: string; label: string; init: Record<string, unknown> };

export type FieldSpec = {
  path: string;
  label: string;
  type: FieldType;
  options?: string[];
  help?: string;
  placeholder?: string;
  /** choices of a 'oneof' field (its value is the object at path; the first choice whose key it has is shown). */
  choices?: Choice[];
  /** when says whether the field applies to the rule as it is now; a field that does not is hidden (and, if set, listed to edit in YAML). */
  when?: (rule: Record<string, unknown>) => boolean;
  /** moreHelp follows the schema's description (help is used only where the schema has none). */
  moreHelp?: string;
  /** keepEmpty keeps an emptied text field as "" instead of removing it (it marks the shape of a 'oneof' parent). */
  keepEmpty?: boolean;
};

/** JWTAlgorithms are the signature algorithms an identity may accept (api.JWTAlgorithms): never none, never HS*. */
export const jwtAlgorithms = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'EdDSA'];

/** tierAlgorithms are the limit algorithms that take tiers. */
export const tierAlgorithms = ['token_bucket', 'sliding_window', 'fixed_window', 'leaky_bucket', 'quota'];

const has = (path: string) => (r: Record<string, unknown>) => getIn(r, path) !== undefined;
const lacks = (path: string) => (r: Record<string, unknown>) => getIn(r, path) === undefined;
const isQuota = (r: Record<string, unknown>) => r.algorithm === 'quota';

/** tierFields are the fields of one tier of a limit, relative to the tier. */
export const tierFields: FieldSpec[] = [
  { path: 'id', label: 'Tier id', type: 'text' },
  { path: 'match.claims', label: 'Tier claims', type: 'claims', help: 'name=value, one per entry (dotted names reach nested claims: org.id=42); all must hold. Empty: every caller the tiers above did not take (only the last tier).' },
  { path: 'rate', label: 'Tier rate', type: 'number', help: "Empty: the limit's rate." },
  { path: 'burst', label: 'Tier burst', type: 'number', help: "Empty: the tier's rate for a token or leaky bucket." },
  { path: 'period', label: 'Tier period', type: 'text', placeholder: '1s', help: "Empty: the limit's period (a calendar quota has none)." },
];

export const fields: Record<RuleKind, FieldSpec[]> = {
  routes: [
    { path: 'id', label: 'Id', type: 'text' },
    { path: 'match.pathPrefix', label: 'Path prefix', type: 'text', placeholder: '/api/orders' },
    { path: 'match.path', label: 'Exact path', type: 'text' },
    { path: 'match.methods', label: 'Methods', type: 'tags', help: 'Empty matches every method.' },
    { path: 'match.hosts', label: 'Hosts', type: 'tags', help: 'Empty matches every host.' },
    { path: 'upstream.targets[0].url', label: 'Upstream URL', type: 'text', help: 'The first target; edit several in the YAML view.' },
    { path: 'upstream.timeout', label: 'Timeout', type: 'text', placeholder: '30s' },
    { path: 'upstream.stripPrefix', label: 'Strip the path prefix', type: 'bool' },
  ],
  limits: [
    { path: 'id', label: 'Id', type: 'text' },
    { path: 'routes', label: 'Routes', type: 'routes' },
    { path: 'algorithm', label: 'Algorithm', type: 'select', options: ['token_bucket', 'sliding_window', 'fixed_window', 'leaky_bucket', 'concurrency', 'adaptive', 'quota'], help: 'quota: an exact count per day, week, month or fixed period, kept in Redis (scope: cluster) across restarts and rule changes.' },
    { path: 'rate', label: 'Rate', type: 'number', help: 'Requests (or cost units) per period; for concurrency, how many in flight at once; for a quota, how many per period.' },
    { path: 'calendar', label: 'Calendar', type: 'select', options: ['day', 'week', 'month'], when: isQuota },
    { path: 'timezone', label: 'Time zone', type: 'text', placeholder: 'UTC', when: (r) => isQuota(r) && r.calendar !== undefined },
    { path: 'period', label: 'Period', type: 'text', placeholder: '1s', when: (r) => !(isQuota(r) && r.calendar !== undefined), help: 'A quota: a fixed period (720h), instead of a calendar.' },
    { path: 'burst', label: 'Burst', type: 'number', help: "The token bucket's capacity or the leaky bucket's queue; empty means the rate.", when: (r) => !isQuota(r) },
    { path: 'key', label: 'Key', type: 'tags', moreHelp: 'ip, route, global, header:NAME, query:NAME, cookie:NAME, jwt:CLAIM (verified claims, needs an identity; dotted for nested: jwt:org.id); empty means global.' },
    { path: 'scope', label: 'Scope', type: 'select', options: ['node', 'cluster'], help: 'node: counters in each gateway; cluster: shared through Redis (a quota needs it).' },
    { path: 'shadow', label: 'Shadow (count, never reject)', type: 'bool' },
    { path: 'tiers', label: 'Tiers', type: 'tiers', when: (r) => r.tiers !== undefined || tierAlgorithms.includes(String(r.algorithm ?? 'token_bucket')) },
  ],
  identities: [
    { path: 'id', label: 'Id', type: 'text' },
    { path: 'routes', label: 'Routes', type: 'routes', help: 'Empty means every route; a route has at most one identity.' },
    {
      path: 'jwt.from',
      label: 'Token from',
      type: 'oneof',
      choices: [
        { value: 'header', label: 'Header', init: { header: 'Authorization', scheme: 'Bearer' } },
        { value: 'cookie', label: 'Cookie', init: { cookie: '' } },
      ],
    },
    { path: 'jwt.from.header', label: 'Header', type: 'text', placeholder: 'Authorization', when: lacks('jwt.from.cookie'), keepEmpty: true },
    { path: 'jwt.from.scheme', label: 'Scheme', type: 'text', placeholder: 'Bearer', when: lacks('jwt.from.cookie'), help: 'The auth scheme before the token (compared ignoring case); empty: the whole header value is the token.' },
    { path: 'jwt.from.cookie', label: 'Cookie', type: 'text', when: has('jwt.from.cookie'), keepEmpty: true },
    {
      path: 'jwt.jwks',
      label: 'Keys (JWKS) from',
      type: 'oneof',
      choices: [
        { value: 'url', label: 'URL', init: { url: '' } },
        { value: 'file', label: 'File', init: { file: '' } },
      ],
    },
    { path: 'jwt.jwks.url', label: 'JWKS URL', type: 'text', placeholder: 'https://idp.example.com/.well-known/jwks.json', when: has('jwt.jwks.url'), keepEmpty: true },
    { path: 'jwt.jwks.refresh', label: 'Refresh', type: 'text', placeholder: '10m', when: has('jwt.jwks.url'), help: 'How often the URL is fetched (an unknown kid fetches it at most once per refresh/10); empty: 10m.' },
    { path: 'jwt.jwks.file', label: 'JWKS file', type: 'text', placeholder: '/etc/sluice/jwks.json', when: lacks('jwt.jwks.url'), keepEmpty: true, help: "An absolute path on the gateway's host, read again when it changes." },
    { path: 'jwt.issuer', label: 'Issuer', type: 'text', placeholder: 'https://idp.example.com', help: 'The iss claim a token must carry, exactly.' },
    { path: 'jwt.audiences', label: 'Audiences', type: 'tags', help: "A token's aud must name one of them; empty: aud is not checked." },
    { path: 'jwt.algorithms', label: 'Algorithms', type: 'multiselect', options: jwtAlgorithms },
    { path: 'jwt.clockSkew', label: 'Clock skew', type: 'text', placeholder: '30s' },
    { path: 'jwt.required', label: 'Required (no token: 401)', type: 'bool', help: 'Off: a request without a token goes on with no claims (its jwt: key parts are "missing", so such callers share one bucket).' },
  ],
  classes: [
    { path: 'id', label: 'Id', type: 'text' },
    { path: 'match.claims', label: 'Claims', type: 'claims' },
    { path: 'match.routes', label: 'Routes', type: 'routes', help: 'Empty means every route.' },
    { path: 'match.methods', label: 'Methods', type: 'tags', help: 'Empty matches every method.' },
    { path: 'match.headers', label: 'Headers (trusted proxies only)', type: 'claims', help: 'name=value. Honoured only when the connection comes from --trusted-proxies; from any other peer the header earns nothing. Prefer claims.' },
  ],
  breakers: [
    { path: 'id', label: 'Id', type: 'text' },
    { path: 'routes', label: 'Routes', type: 'routes' },
    { path: 'window', label: 'Window', type: 'text', placeholder: '10s' },
    { path: 'errorRatio', label: 'Error ratio', type: 'number' },
    { path: 'consecutiveFailures', label: 'Consecutive failures', type: 'number' },
    { path: 'minRequests', label: 'Minimum requests', type: 'number' },
    { path: 'openFor', label: 'Open for', type: 'text', placeholder: '5s' },
  ],
  degrades: [
    { path: 'id', label: 'Id', type: 'text' },
    { path: 'routes', label: 'Routes', type: 'routes' },
    { path: 'mode', label: 'Mode', type: 'select', options: ['auto', 'manual'] },
    { path: 'level', label: 'Manual level', type: 'number', help: '0 normal, 1 shed part of the traffic, 2 shed all of it.' },
    { path: 'window', label: 'Window', type: 'text', placeholder: '3s' },
  ],
};

type Def = { description?: string; $ref?: string; properties?: Record<string, Def>; items?: Def };
const defs = (schema as unknown as { $defs: Record<string, Def> }).$defs;
const defName: Record<RuleKind, string> = { routes: 'Route', identities: 'Identity', limits: 'Limit', classes: 'Class', breakers: 'Breaker', degrades: 'Degrade' };

function resolve(d: Def | undefined): Def | undefined {
  for (let i = 0; d?.$ref && i < 8; i++) d = defs[d.$ref.replace('#/$defs/', '')];
  return d;
}

/** helpOf is a field's help: the schema's description, else the form's own. */
export function helpOf(kind: RuleKind, f: FieldSpec): string | undefined {
  let d: Def | undefined = defs[defName[kind]];
  let desc: string | undefined;
  for (const seg of f.path.replace(/\[\d+\]/g, '.[]').split('.').filter(Boolean)) {
    const r = resolve(d);
    d = seg === '[]' ? r?.items : r?.properties?.[seg];
    desc = d?.description ?? resolve(d)?.description;
  }
  if (f.path === 'id' || f.path.endsWith('.id')) return f.help;
  if (f.moreHelp) return desc ? `${desc} ${f.moreHelp}` : f.moreHelp;
  return desc ?? f.help;
}

/** claimsToTags shows a name→value map as "name=value" entries. */
export function claimsToTags(v: unknown): string[] {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return [];
  return Object.entries(v as Record<string, unknown>).map(([k, x]) => `${k}=${typeof x === 'string' ? x : JSON.stringify(x)}`);
}

/** tagsToClaims reads "name=value" entries back into a map; bad lists the entries without a name and an "=". */
export function tagsToClaims(tags: string[]): { claims: Record<string, string>; bad: string[] } {
  const claims: Record<string, string> = {};
  const bad: string[] = [];
  for (const t of tags) {
    const i = t.indexOf('=');
    const k = i > 0 ? t.slice(0, i).trim() : '';
    if (!k) bad.push(t);
    else claims[k] = t.slice(i + 1).trim();
  }
  return { claims, bad };
}

/** choiceOf is the choice a 'oneof' value is in: the first whose key it has, else the first. */
export function choiceOf(f: FieldSpec, v: unknown): string {
  const cs = f.choices ?? [];
  const o = v && typeof v === 'object' ? (v as Record<string, unknown>) : {};
  return (cs.find((c) => c.value in o) ?? cs[0])?.value ?? '';
}

/** visibleFields are the fields of kind that apply to rule as it is. */
export function visibleFields(kind: RuleKind, rule: Record<string, unknown>): FieldSpec[] {
  return fields[kind].filter((f) => !f.when || f.when(rule));
}

/**
 * uncovered lists the fields set in rule that no visible form field edits,
 * as [path, value] pairs: the form shows them read-only, to edit in YAML,
 * and keeps them as they are.
 */
export function uncovered(rule: Record<string, unknown>, shown: FieldSpec[]): [string, unknown][] {
  const paths = shown.filter((f) => f.type !== 'oneof').map((f) => f.path);
  const covers = (p: string) => paths.some((f) => f === p || p.startsWith(f + '.') || p.startsWith(f + '[') || f.startsWith(p + '.') || f.startsWith(p + '['));
  const out: [string, unknown][] = [];
  const walk = (v: unknown, p: string) => {
    if (v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length > 0) {
      for (const [k, x] of Object.entries(v as Record<string, unknown>)) walk(x, p ? `${p}.${k}` : k);
    } else if (Array.isArray(v) && paths.some((f) => f.startsWith(p + '['))) {
      v.forEach((x, i) => walk(x, `${p}[${i}]`));
    } else if (p && !covers(p)) out.push([p, v]);
  };
  walk(rule, '');
  return out;
}
