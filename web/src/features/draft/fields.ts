// What the form view shows of each rule kind. Help text comes from
// api/schema.json's descriptions where the schema has one, so the form and
// the schema never disagree.
import schema from '../../../../api/schema.json';
import { getIn, newTier, parsePath, setIn, type RuleKind } from './ruleset';

export type FieldType =
  | 'text'
  | 'textarea'
  | 'number'
  | 'select'
  | 'tags'
  | 'numtags'
  | 'routes'
  | 'classes'
  | 'bool'
  | 'multiselect'
  | 'claims'
  | 'ratios'
  | 'json'
  | 'oneof'
  | 'list';

/** Choice is one shape of a 'oneof' field: the key that marks it, and the value switching to it writes (none: the field is removed). */
export type Choice = { value: string; label: string; init?: Record<string, unknown> };

/** Ctx is what a field's visibility may depend on besides its rule: the document's kind, and the rule a list item belongs to. */
export type Ctx = { service: boolean; parent?: Record<string, unknown> };

type Rule = Record<string, unknown>;

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
  when?: (rule: Rule, ctx: Ctx) => boolean;
  /** moreHelp follows the schema's description (help is used only where the schema has none). */
  moreHelp?: string;
  /** keepEmpty keeps an emptied text field as "" instead of removing it (it marks the shape of a 'oneof' parent). */
  keepEmpty?: boolean;
  /** required: a select that cannot be cleared. */
  required?: boolean;
  /**
   * default is the value the server takes when the field is absent (api
   * Normalize, api/canonical.go): a select shows it, marked "(default)",
   * while the rule does not set it, and writes nothing unless the user picks
   * another value.
   */
  default?: string;
  /** section groups optional fields under a heading, folded until one of them is set. */
  section?: string;
  /** item are the fields of one element of a 'list' field, relative to the element. */
  item?: FieldSpec[];
  /** itemLabel names one element of a 'list' field ("Tier"). */
  itemLabel?: string;
  /** newItem is the element "Add" appends to a 'list' field, given the rule. */
  newItem?: (rule: Rule) => Rule;
};

type Def = { description?: string; $ref?: string; properties?: Record<string, Def>; items?: Def; enum?: string[]; default?: unknown };
const defs = (schema as unknown as { $defs: Record<string, Def> }).$defs;

function resolve(d: Def | undefined): Def | undefined {
  for (let i = 0; d?.$ref && i < 8; i++) d = defs[d.$ref.replace('#/$defs/', '')];
  return d;
}

/** schemaAt is the schema of a field path ("upstream.targets[0].url") under a $defs entry, or undefined. */
export function schemaAt(def: string, path: string): Def | undefined {
  let d: Def | undefined = defs[def];
  for (const seg of path.replace(/\[\d*\]/g, '.[]').split('.').filter(Boolean)) {
    const r = resolve(d);
    d = seg === '[]' ? r?.items : r?.properties?.[seg];
    if (!d) return undefined;
  }
  return d;
}

/** enumOf is the schema's enum of a field: select options come from it, so the form offers what the server accepts. */
function enumOf(def: string, path: string): string[] {
  const e = resolve(schemaAt(def, path))?.enum;
  if (!e) throw new Error(`api/schema.json: ${def}.${path} has no enum`);
  return e;
}

/**
 * defaultOf is the value the server takes for an absent field, as
 * api/schema.json's "default" says (api/defaults_test.go holds it to
 * Normalize's).
 */
function defaultOf(def: string, path: string): string {
  const d = resolve(schemaAt(def, path))?.default;
  if (typeof d !== 'string') throw new Error(`api/schema.json: ${def}.${path} has no default`);
  return d;
}

/** JWTAlgorithms are the signature algorithms an identity may accept (api.JWTAlgorithms): never none, never HS*. */
export const jwtAlgorithms = enumOf('Identity', 'jwt.algorithms[]');

/** tierAlgorithms are the limit algorithms that take tiers (in a gateway document: tiers match verified claims, and a service document has no identities). */
export const tierAlgorithms = ['token_bucket', 'sliding_window', 'fixed_window', 'leaky_bucket', 'quota'];

/** documentKinds are the values of a rule document's kind (gateway, the default, is written absent). */
export const documentKinds = enumOf('RuleSet', 'kind');

/** documentKindHelp is the help of the document's kind selector. */
export const documentKindHelp = `${defs.RuleSet.properties?.kind?.description ?? ''} A service document's routes have no upstream (the service's own handlers answer); its limits, breakers and degrade plans name resources (what the service passes to Guard.Do, or a gRPC full method name) beside routes; it has no identities.`;

const has = (path: string) => (r: Rule) => getIn(r, path) !== undefined;
const lacks = (path: string) => (r: Rule) => getIn(r, path) === undefined;
const algo = (r: Rule | undefined) => String(r?.algorithm ?? 'token_bucket');
const isQuota = (r: Rule) => algo(r) === 'quota';
const algoIn =
  (...as: string[]) =>
  (r: Rule) =>
    as.includes(algo(r));
const keyHas = (r: Rule, f: (part: string) => boolean) => Array.isArray(r.key) && r.key.some((k) => typeof k === 'string' && f(k));
const cluster = (r: Rule) => r.scope === 'cluster';
const either =
  (a: (r: Rule, c: Ctx) => boolean, b: (r: Rule, c: Ctx) => boolean) =>
  (r: Rule, c: Ctx) =>
    a(r, c) || b(r, c);
/** service: a field of kind: service documents (shown elsewhere only when set, so the server's error shows at it). */
const service = (path: string) => either((_r, c) => c.service, has(path));
const gateway = (_r: Rule, c: Ctx) => !c.service;

const keyHelp =
  "ip, route, global, header:NAME, query:NAME, cookie:NAME, jwt:CLAIM (verified claims, needs an identity; dotted for nested: jwt:org.id), sdk:NAME (a value the service passes in sdk.Keys: kind: service, on a rule naming resources only; a guarded call carries global, route and sdk: parts).";

/** tierFields are the fields of one tier of a limit, relative to the tier. */
export const tierFields: FieldSpec[] = [
  { path: 'id', label: 'Tier id', type: 'text' },
  { path: 'match.claims', label: 'Tier claims', type: 'claims', help: 'name=value, one per entry (dotted names reach nested claims: org.id=42); all must hold. Empty: every caller the tiers above did not take (only the last tier).' },
  { path: 'rate', label: 'Tier rate', type: 'number', help: "Empty: the limit's rate." },
  { path: 'burst', label: 'Tier burst', type: 'number', help: "Empty: the tier's rate for a token or leaky bucket." },
  { path: 'period', label: 'Tier period', type: 'text', placeholder: '1s', help: "Empty: the limit's period (a calendar quota has none)." },
];

/** targetFields are the fields of one upstream target. */
export const targetFields: FieldSpec[] = [
  { path: 'url', label: 'Target URL', type: 'text', placeholder: 'http://127.0.0.1:8081', keepEmpty: true },
  { path: 'weight', label: 'Weight', type: 'number' },
];

/** variantFields are the fields of one A/B variant of a limit; its cost and other adaptive settings are edited in YAML. */
export const variantFields: FieldSpec[] = [
  { path: 'id', label: 'Variant id', type: 'text' },
  { path: 'weight', label: 'Weight (% of clients)', type: 'number' },
  { path: 'rate', label: 'Variant rate', type: 'number', when: (v, c) => algo(c.parent) !== 'adaptive' || v.rate !== undefined, help: "Empty: the limit's rate." },
  { path: 'period', label: 'Variant period', type: 'text', placeholder: '1s', when: (v, c) => !['adaptive', 'concurrency'].includes(algo(c.parent)) || v.period !== undefined, help: "Empty: the limit's period." },
  { path: 'burst', label: 'Variant burst', type: 'number', when: (v, c) => ['token_bucket', 'leaky_bucket'].includes(algo(c.parent)) || v.burst !== undefined, help: "Empty: the limit's burst." },
  { path: 'adaptive.minLimit', label: 'Variant min limit', type: 'number', when: (v, c) => algo(c.parent) === 'adaptive' || v.adaptive !== undefined },
  { path: 'adaptive.maxLimit', label: 'Variant max limit', type: 'number', when: (v, c) => algo(c.parent) === 'adaptive' || v.adaptive !== undefined },
  { path: 'adaptive.initialLimit', label: 'Variant initial limit', type: 'number', when: (v, c) => algo(c.parent) === 'adaptive' || v.adaptive !== undefined },
];

/** unusedId is prefix-N for the first N from n up that ids lacks. */
function unusedId(items: unknown, prefix: string): string {
  const list = (Array.isArray(items) ? items : []) as { id?: string }[];
  const ids = new Set(list.map((t) => t.id));
  let n = list.length + 1;
  while (ids.has(`${prefix}-${n}`)) n++;
  return `${prefix}-${n}`;
}

/** newVariant is a variant with an unused id taking 10% of clients, at the limit's settings until edited. */
export function newVariant(limit: Rule): Rule {
  const id = unusedId(limit.variants, 'variant');
  if (algo(limit) === 'adaptive') return { id, weight: 10, adaptive: { maxLimit: 100 } };
  return { id, weight: 10, rate: typeof limit.rate === 'number' ? limit.rate : 100 };
}

const fallbackStatus: FieldSpec = { path: 'fallback.status', label: 'Status', type: 'number', placeholder: '503', section: 'Fallback' };
const fallbackRetry: FieldSpec = { path: 'fallback.retryAfter', label: 'Retry after', type: 'text', placeholder: '5s', section: 'Fallback' };

export const fields: Record<RuleKind, FieldSpec[]> = {
  routes: [
    { path: 'id', label: 'Id', type: 'text' },
    { path: 'match.pathPrefix', label: 'Path prefix', type: 'text', placeholder: '/api/orders' },
    { path: 'match.path', label: 'Exact path', type: 'text' },
    { path: 'match.pathRegex', label: 'Path regex', type: 'text', placeholder: '^/api/v[0-9]+/orders' },
    { path: 'match.methods', label: 'Methods', type: 'tags', help: 'Empty matches every method.' },
    { path: 'match.hosts', label: 'Hosts', type: 'tags', help: 'Empty matches every host.' },
    { path: 'match.headers', label: 'Headers', type: 'claims', placeholder: 'X-Canary=true' },
    { path: 'upstream.targets', label: 'Targets', type: 'list', item: targetFields, itemLabel: 'Target', newItem: () => ({ url: '' }), when: gateway },
    { path: 'upstream.protocol', label: 'Protocol', type: 'select', options: enumOf('Upstream', 'protocol'), placeholder: "by each target's scheme", when: gateway, section: 'Upstream' },
    { path: 'upstream.timeout', label: 'Timeout', type: 'text', placeholder: '30s', when: gateway, section: 'Upstream' },
    { path: 'upstream.bodyTimeout', label: 'Body timeout', type: 'text', placeholder: '10s', when: gateway, section: 'Upstream' },
    { path: 'upstream.writeTimeout', label: 'Write timeout', type: 'text', placeholder: '10s', when: gateway, section: 'Upstream' },
    { path: 'upstream.stripPrefix', label: 'Strip the path prefix', type: 'bool', when: gateway, section: 'Upstream' },
    { path: 'upstream.tls.serverName', label: 'TLS server name', type: 'text', when: gateway, section: 'Upstream TLS' },
    { path: 'upstream.tls.ca', label: 'TLS CA (PEM)', type: 'textarea', placeholder: '-----BEGIN CERTIFICATE-----', when: gateway, section: 'Upstream TLS' },
    { path: 'upstream.healthCheck.path', label: 'Health check path', type: 'text', placeholder: '/healthz', when: gateway, section: 'Health check', help: 'GET on every target each interval; 2xx/3xx within the timeout is a success.' },
    { path: 'upstream.healthCheck.interval', label: 'Interval', type: 'text', placeholder: '10s', when: gateway, section: 'Health check' },
    { path: 'upstream.healthCheck.timeout', label: 'Timeout', type: 'text', placeholder: '2s', when: gateway, section: 'Health check' },
    { path: 'upstream.healthCheck.healthyAfter', label: 'Healthy after', type: 'number', when: gateway, section: 'Health check' },
    { path: 'upstream.healthCheck.unhealthyAfter', label: 'Unhealthy after', type: 'number', when: gateway, section: 'Health check' },
    { path: 'upstream.outlier.consecutiveFailures', label: 'Consecutive failures', type: 'number', when: gateway, section: 'Outlier detection' },
    { path: 'upstream.outlier.baseEjection', label: 'Base ejection', type: 'text', placeholder: '30s', when: gateway, section: 'Outlier detection' },
    { path: 'upstream.outlier.maxEjection', label: 'Max ejection', type: 'text', placeholder: '5m', when: gateway, section: 'Outlier detection' },
    { path: 'upstream.outlier.maxEjectedRatio', label: 'Max ejected ratio', type: 'number', when: gateway, section: 'Outlier detection' },
  ],
  limits: [
    { path: 'id', label: 'Id', type: 'text' },
    { path: 'routes', label: 'Routes', type: 'routes' },
    { path: 'resources', label: 'Resources', type: 'tags', placeholder: 'orders.Create', when: service('resources') },
    { path: 'algorithm', label: 'Algorithm', type: 'select', options: enumOf('Limit', 'algorithm'), required: true, help: 'quota: an exact count per day, week, month or fixed period, kept in Redis (scope: cluster) across restarts and rule changes.' },
    { path: 'rate', label: 'Rate', type: 'number', when: either((r) => algo(r) !== 'adaptive', has('rate')), help: 'Requests (or cost units) per period; for concurrency, how many in flight at once; for a quota, how many per period.' },
    { path: 'calendar', label: 'Calendar', type: 'select', options: enumOf('Limit', 'calendar'), placeholder: 'none: the period', when: either(isQuota, has('calendar')) },
    { path: 'timezone', label: 'Time zone', type: 'text', placeholder: 'UTC', when: either((r) => isQuota(r) && r.calendar !== undefined, has('timezone')) },
    { path: 'period', label: 'Period', type: 'text', placeholder: '1s', when: (r) => (!(isQuota(r) && r.calendar !== undefined) && !['adaptive', 'concurrency'].includes(algo(r))) || (r.period !== undefined && !(isQuota(r) && r.calendar !== undefined)), help: 'A quota: a fixed period (720h), instead of a calendar.' },
    { path: 'burst', label: 'Burst', type: 'number', help: "The token bucket's capacity or the leaky bucket's queue; empty means the rate.", when: either(algoIn('token_bucket', 'leaky_bucket'), has('burst')) },
    { path: 'maxDelay', label: 'Max delay', type: 'text', placeholder: '0s', help: 'How long a request may wait for its turn in the leaky bucket.', when: either(algoIn('leaky_bucket'), has('maxDelay')) },
    { path: 'key', label: 'Key', type: 'tags', moreHelp: `${keyHelp} Empty means global.` },
    { path: 'ipv6Prefix', label: 'IPv6 prefix', type: 'number', placeholder: '64', when: either((r) => keyHas(r, (k) => k === 'ip'), has('ipv6Prefix')) },
    { path: 'cookieDecoding', label: 'Cookie decoding', type: 'select', options: enumOf('Limit', 'cookieDecoding'), default: defaultOf('Limit', 'cookieDecoding'), when: either((r) => keyHas(r, (k) => k.startsWith('cookie:')), has('cookieDecoding')) },
    { path: 'scope', label: 'Scope', type: 'select', options: enumOf('Limit', 'scope'), default: defaultOf('Limit', 'scope'), help: 'node: counters in each gateway; cluster: shared through Redis (a quota needs it).' },
    { path: 'mode', label: 'Cluster mode', type: 'select', options: enumOf('Limit', 'mode'), default: defaultOf('Limit', 'mode'), help: 'exact: every decision asks Redis; batched: each node spends a local share and syncs it.', when: either(cluster, has('mode')) },
    { path: 'onStoreError', label: 'When Redis fails', type: 'select', options: enumOf('Limit', 'onStoreError'), default: defaultOf('Limit', 'onStoreError'), help: 'local: the limit ÷ live nodes, in each node; allow; deny.', when: either(cluster, has('onStoreError')) },
    { path: 'bucket', label: 'Shared bucket', type: 'text', placeholder: 'orders-budget', when: either((r) => cluster(r) && !isQuota(r), has('bucket')) },
    { path: 'shadow', label: 'Shadow (count, never reject)', type: 'bool' },
    { path: 'exempt', label: 'Exempt clients', type: 'tags', placeholder: '10.0.0.0/8', help: 'Client CIDRs or addresses never limited.' },
    {
      path: 'cost',
      label: 'Cost per request',
      type: 'oneof',
      choices: [
        { value: 'none', label: '1 per request' },
        { value: 'header', label: 'From a header', init: { header: 'X-Cost' } },
        { value: 'bodyBytesPerUnit', label: 'By body size', init: { bodyBytesPerUnit: 1024 } },
      ],
      when: either((r) => !['adaptive', 'concurrency'].includes(algo(r)), has('cost')),
      section: 'Cost',
    },
    { path: 'cost.header', label: 'Cost header', type: 'text', when: has('cost.header'), keepEmpty: true, section: 'Cost' },
    { path: 'cost.bodyBytesPerUnit', label: 'Body bytes per unit', type: 'number', when: has('cost.bodyBytesPerUnit'), section: 'Cost' },
    { path: 'adaptive.minLimit', label: 'Min limit', type: 'number', placeholder: '1', when: either(algoIn('adaptive'), has('adaptive')), section: 'Adaptive' },
    { path: 'adaptive.maxLimit', label: 'Max limit', type: 'number', placeholder: '1000', when: either(algoIn('adaptive'), has('adaptive')), section: 'Adaptive' },
    { path: 'adaptive.initialLimit', label: 'Initial limit', type: 'number', placeholder: '20', when: either(algoIn('adaptive'), has('adaptive')), section: 'Adaptive' },
    { path: 'adaptive.percentile', label: 'Percentile', type: 'number', placeholder: '0.9', when: either(algoIn('adaptive'), has('adaptive')), section: 'Adaptive' },
    { path: 'adaptive.buffer', label: 'Buffer', type: 'number', placeholder: '0.1', when: either(algoIn('adaptive'), has('adaptive')), section: 'Adaptive' },
    { path: 'adaptive.window', label: 'Window', type: 'text', placeholder: '1s', when: either(algoIn('adaptive'), has('adaptive')), section: 'Adaptive' },
    { path: 'adaptive.probeInterval', label: 'Probe interval', type: 'text', placeholder: '60s', when: either(algoIn('adaptive'), has('adaptive')), section: 'Adaptive' },
    { path: 'reserve', label: 'Reserve (class=share)', type: 'ratios', placeholder: 'gold=0.2', when: either(algoIn('concurrency', 'adaptive'), has('reserve')), section: 'Priority' },
    { path: 'response.status', label: 'Status', type: 'number', placeholder: '429', section: 'Rejection response' },
    { path: 'response.contentType', label: 'Content type', type: 'text', placeholder: 'application/problem+json', section: 'Rejection response' },
    { path: 'response.body', label: 'Body', type: 'textarea', section: 'Rejection response' },
    { path: 'variants', label: 'Variants', type: 'list', item: variantFields, itemLabel: 'Variant', newItem: newVariant, when: (r) => r.variants !== undefined || !(Array.isArray(r.tiers) && r.tiers.length > 0) },
    { path: 'tiers', label: 'Tiers', type: 'list', item: tierFields, itemLabel: 'Tier', newItem: (r) => newTier(r), when: (r, c) => r.tiers !== undefined || (!c.service && tierAlgorithms.includes(algo(r)) && !(Array.isArray(r.variants) && r.variants.length > 0)) },
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
    { path: 'resources', label: 'Resources', type: 'tags', placeholder: 'orders.Create', when: service('resources') },
    { path: 'window', label: 'Window', type: 'text', placeholder: '10s' },
    { path: 'errorRatio', label: 'Error ratio', type: 'number', help: 'Of 5xx answers and transport errors; 0 is off.' },
    { path: 'consecutiveFailures', label: 'Consecutive failures', type: 'number' },
    { path: 'minRequests', label: 'Minimum requests', type: 'number' },
    { path: 'slowCallDuration', label: 'Slow call duration', type: 'text', placeholder: '500ms' },
    { path: 'slowCallRatio', label: 'Slow call ratio', type: 'number' },
    { path: 'failureStatuses', label: 'Failure statuses', type: 'numtags', placeholder: '503', help: 'Statuses counted as failures; empty: every 5xx.' },
    { path: 'openFor', label: 'Open for', type: 'text', placeholder: '5s', help: 'Doubles after each failed probe, up to max open for.' },
    { path: 'maxOpenFor', label: 'Max open for', type: 'text', placeholder: '60s' },
    { path: 'halfOpenProbes', label: 'Half-open probes', type: 'number' },
    fallbackStatus,
    fallbackRetry,
    { path: 'fallback.contentType', label: 'Content type', type: 'text', placeholder: 'application/json', section: 'Fallback' },
    { path: 'fallback.body', label: 'Body', type: 'textarea', section: 'Fallback' },
  ],
  degrades: [
    { path: 'id', label: 'Id', type: 'text' },
    { path: 'routes', label: 'Routes', type: 'routes' },
    { path: 'resources', label: 'Resources', type: 'tags', placeholder: 'orders.Create', when: service('resources') },
    { path: 'mode', label: 'Mode', type: 'select', options: enumOf('Degrade', 'mode'), required: true },
    { path: 'level', label: 'Manual level', type: 'number', help: '0 normal, 1 shed part of the traffic, 2 shed all of it.', when: either((r) => r.mode !== 'auto', has('level')) },
    { path: 'window', label: 'Window', type: 'text', placeholder: '3s' },
    { path: 'level1ShedRatio', label: 'Level 1 shed ratio', type: 'number', placeholder: '0.5' },
    { path: 'recoverAfter', label: 'Recover after (windows)', type: 'number', placeholder: '5' },
    { path: 'key', label: 'Shed key', type: 'tags', help: 'Level 1 sheds the same clients consistently by this key.', moreHelp: `${keyHelp} Empty means ip (global for a plan naming resources).` },
    { path: 'shedOrder', label: 'Shed order', type: 'classes' },
    { path: 'triggers.level1.qpsAbove', label: 'Level 1: QPS above', type: 'number', when: either((r) => r.mode === 'auto', has('triggers')), section: 'Triggers' },
    { path: 'triggers.level1.successRateBelow', label: 'Level 1: success rate below', type: 'number', placeholder: '0.95', when: either((r) => r.mode === 'auto', has('triggers')), section: 'Triggers' },
    { path: 'triggers.level2.qpsAbove', label: 'Level 2: QPS above', type: 'number', when: either((r) => r.mode === 'auto', has('triggers')), section: 'Triggers' },
    { path: 'triggers.level2.successRateBelow', label: 'Level 2: success rate below', type: 'number', placeholder: '0.9', when: either((r) => r.mode === 'auto', has('triggers')), section: 'Triggers' },
    fallbackStatus,
    fallbackRetry,
    { path: 'fallback.html', label: 'HTML (browsers)', type: 'textarea', section: 'Fallback' },
    { path: 'fallback.json', label: 'JSON (API clients)', type: 'json', placeholder: '{"code": 5031, "message": "busy"}', section: 'Fallback' },
  ],
};

const defName: Record<RuleKind, string> = { routes: 'Route', identities: 'Identity', limits: 'Limit', classes: 'Class', breakers: 'Breaker', degrades: 'Degrade' };

/** helpOf is a field's help: the field's own description in the schema, else the form's, else that of the type it refers to. */
export function helpOf(kind: RuleKind, f: FieldSpec): string | undefined {
  const d = schemaAt(defName[kind], f.path);
  const own = d?.description;
  const ref = resolve(d)?.description;
  if (f.path === 'id' || f.path.endsWith('.id')) return f.help;
  if (f.moreHelp) return own || ref ? `${own ?? ref} ${f.moreHelp}` : f.moreHelp;
  return own ?? f.help ?? ref;
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

/** ratiosToTags shows a name→number map (a limit's reserve) as "name=number" entries. */
export function ratiosToTags(v: unknown): string[] {
  return claimsToTags(v);
}

/** tagsToRatios reads "name=number" entries back into a map; bad lists the entries without a name or a number. */
export function tagsToRatios(tags: string[]): { value: Record<string, number>; bad: string[] } {
  const { claims, bad } = tagsToClaims(tags);
  const value: Record<string, number> = {};
  for (const [k, x] of Object.entries(claims)) {
    const n = x === '' ? NaN : Number(x);
    if (Number.isFinite(n)) value[k] = n;
    else bad.push(`${k}=${x}`);
  }
  return { value, bad };
}

/** tagsToInts reads entries that must be integers (a breaker's failure statuses); bad lists the others. */
export function tagsToInts(tags: string[]): { value: number[]; bad: string[] } {
  const value: number[] = [];
  const bad: string[] = [];
  for (const t of tags) {
    if (/^\s*-?\d+\s*$/.test(t)) value.push(Number(t));
    else bad.push(t);
  }
  return { value, bad };
}

/** choiceOf is the choice a 'oneof' value is in: the first whose key it has, else the one that means absent (no init), else the first. */
export function choiceOf(f: FieldSpec, v: unknown): string {
  const cs = f.choices ?? [];
  const o = v && typeof v === 'object' ? (v as Record<string, unknown>) : {};
  return (cs.find((c) => c.value in o) ?? cs.find((c) => !c.init) ?? cs[0])?.value ?? '';
}

/** visibleFields are the fields of kind (or of a list's items, with fs) that apply to rule as it is. */
export function visibleFields(kind: RuleKind, rule: Rule, ctx: Ctx = { service: false }, fs: FieldSpec[] = fields[kind]): FieldSpec[] {
  return fs.filter((f) => !f.when || f.when(rule, ctx));
}

/** editValue is rule after the form sets field f to v: setIn, except that an emptied keepEmpty field stays "" (it marks its parent's shape). */
export function editValue(rule: Rule, f: FieldSpec, v: unknown): Rule {
  if (!(f.keepEmpty && v === '')) return setIn(rule, f.path, v);
  const segs = parsePath(f.path);
  const leaf = segs.pop()!;
  const parentPath = f.path.slice(0, f.path.length - String(leaf).length - 1);
  const parent = parentPath ? getIn(rule, parentPath) : rule;
  const next = { ...(parent && typeof parent === 'object' ? parent : {}), [leaf]: '' };
  return parentPath ? setIn(rule, parentPath, next) : next;
}

/**
 * editedPaths are the paths the shown fields edit in rule: a field's own
 * path, and for a list the paths of its elements' shown fields
 * ("tiers[0].rate"). lists are the paths of the lists themselves (an empty
 * list is edited, but not what an element holds beyond its fields).
 */
function editedPaths(rule: Rule, shown: FieldSpec[], ctx: Ctx, base = ''): { leaves: string[]; lists: string[] } {
  const leaves: string[] = [];
  const lists: string[] = [];
  for (const f of shown) {
    if (f.type === 'oneof') continue;
    const p = base + f.path;
    if (f.type !== 'list') {
      leaves.push(p);
      continue;
    }
    lists.push(p);
    const items = getIn(rule, f.path);
    if (!Array.isArray(items)) continue;
    items.forEach((it, j) => {
      const item = (it && typeof it === 'object' ? it : {}) as Rule;
      const sub = editedPaths(item, visibleFields('limits', item, { ...ctx, parent: rule }, f.item ?? []), ctx, `${p}[${j}].`);
      leaves.push(...sub.leaves);
      lists.push(...sub.lists);
    });
  }
  return { leaves, lists };
}

/**
 * uncovered lists the fields set in rule that no visible form field edits,
 * as [path, value] pairs: the form shows them read-only under "Set in
 * YAML", and keeps them as they are. Any key the form does not know (one
 * the schema gained, or a typo the server will refuse) is listed, so
 * nothing in a rule is ever hidden or dropped by the form.
 */
export function uncovered(rule: Rule, shown: FieldSpec[], ctx: Ctx = { service: false }): [string, unknown][] {
  const { leaves, lists } = editedPaths(rule, shown, ctx);
  const covers = (p: string) => lists.includes(p) || leaves.some((f) => f === p || p.startsWith(f + '.') || p.startsWith(f + '[') || f.startsWith(p + '.') || f.startsWith(p + '['));
  const out: [string, unknown][] = [];
  const walk = (v: unknown, p: string) => {
    if (v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length > 0 && !leaves.includes(p)) {
      for (const [k, x] of Object.entries(v as Record<string, unknown>)) walk(x, p ? `${p}.${k}` : k);
    } else if (Array.isArray(v) && v.length > 0 && lists.includes(p)) {
      v.forEach((x, i) => walk(x, `${p}[${i}]`));
    } else if (p && !covers(p)) out.push([p, v]);
  };
  walk(rule, '');
  return out;
}
