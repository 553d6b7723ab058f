import { describe, expect, it } from 'vitest';
import schema from '../../../../api/schema.json';
import { choiceOf, claimsToTags, documentKindHelp, documentKinds, editValue, fields, helpOf, jwtAlgorithms, newVariant, ratiosToTags, tagsToClaims, tagsToInts, tagsToRatios, tierFields, uncovered, visibleFields, type Ctx, type FieldSpec } from './fields';
import { newRule, newTier, ruleKinds, setIn } from './ruleset';
import type { RuleSet } from '../../api/client';

type Def = { description?: string; $ref?: string; properties?: Record<string, Def>; items?: Def; enum?: string[]; oneOf?: unknown; additionalProperties?: unknown };
const defs = (schema as unknown as { $defs: Record<string, Def> }).$defs;
const resolve = (d: Def | undefined): Def | undefined => {
  for (let i = 0; d?.$ref && i < 8; i++) d = defs[d.$ref.replace('#/$defs/', '')];
  return d;
};
/** schemaAt is the schema of a rule's field path, or undefined when the schema has no such field. */
function schemaAt(def: string, path: string): Def | undefined {
  let d: Def | undefined = defs[def];
  for (const seg of path.replace(/\[\d+\]/g, '.[]').split('.')) {
    const r = resolve(d);
    d = seg === '[]' ? r?.items : r?.properties?.[seg];
    if (!d) return undefined;
  }
  return resolve(d);
}
const defName = { routes: 'Route', identities: 'Identity', limits: 'Limit', classes: 'Class', breakers: 'Breaker', degrades: 'Degrade' } as const;

describe('the form follows the schema', () => {
  for (const kind of ruleKinds) {
    it(`every ${kind} field is a field of the schema`, () => {
      for (const f of fields[kind]) expect(schemaAt(defName[kind], f.path), `${kind}.${f.path}`).toBeDefined();
    });
  }
  it('every tier field is a field of the schema', () => {
    for (const f of tierFields) expect(schemaAt('Tier', f.path), f.path).toBeDefined();
  });
  it('the algorithms offered are the schema enum: never none, never HS*', () => {
    expect(jwtAlgorithms).toEqual(schemaAt('Identity', 'jwt.algorithms')?.items?.enum);
    expect(jwtAlgorithms.some((a) => a === 'none' || a.startsWith('HS'))).toBe(false);
  });
  it('select options are the schema enums', () => {
    const algo = fields.limits.find((f) => f.path === 'algorithm')!;
    expect([...algo.options!].sort()).toEqual([...schemaAt('Limit', 'algorithm')!.enum!].sort());
    const cal = fields.limits.find((f) => f.path === 'calendar')!;
    expect(cal.options).toEqual(schemaAt('Limit', 'calendar')!.enum);
  });
  it('help comes from the schema where it says something', () => {
    const f = (kind: keyof typeof fields, path: string) => fields[kind].find((x) => x.path === path)!;
    expect(helpOf('identities', f('identities', 'jwt.algorithms'))).toMatch(/HMAC/);
    expect(helpOf('identities', f('identities', 'jwt.clockSkew'))).toMatch(/5m/);
    expect(helpOf('limits', f('limits', 'calendar'))).toMatch(/Monday/);
    expect(helpOf('limits', f('limits', 'key'))).toMatch(/composite key.*jwt:CLAIM/);
    expect(helpOf('classes', f('classes', 'match.claims'))).toMatch(/dotted/);
    expect(helpOf('classes', f('classes', 'match.headers'))).toMatch(/trusted-proxies/);
    const tierRate: FieldSpec = { ...tierFields.find((x) => x.path === 'rate')!, path: 'tiers[0].rate' };
    expect(helpOf('limits', tierRate)).toMatch(/limit's rate/);
  });
});

describe('claims as name=value entries', () => {
  it('round-trips a map', () => {
    const m = { plan: 'pro', 'org.id': '42' };
    expect(tagsToClaims(claimsToTags(m))).toEqual({ claims: m, bad: [] });
  });
  it('splits at the first =, so a value may hold one', () => {
    expect(tagsToClaims(['scope=a=b']).claims).toEqual({ scope: 'a=b' });
  });
  it('refuses entries without a name', () => {
    expect(tagsToClaims(['plan', '=pro', 'tier=gold'])).toEqual({ claims: { tier: 'gold' }, bad: ['plan', '=pro'] });
  });
  it('shows a non-string value as its JSON', () => {
    expect(claimsToTags({ n: 3, b: true })).toEqual(['n=3', 'b=true']);
  });
});

describe('fields shown by the rule', () => {
  const paths = (kind: keyof typeof fields, r: Record<string, unknown>) => visibleFields(kind, r).map((f) => f.path);
  it('a quota on a calendar shows calendar and time zone, not period or burst', () => {
    const p = paths('limits', { id: 'q', algorithm: 'quota', rate: 1000, calendar: 'month' });
    expect(p).toEqual(expect.arrayContaining(['calendar', 'timezone', 'tiers']));
    expect(p).not.toContain('period');
    expect(p).not.toContain('burst');
  });
  it('a quota on a fixed period shows the period, and no time zone', () => {
    const p = paths('limits', { id: 'q', algorithm: 'quota', rate: 1000, period: '720h' });
    expect(p).toContain('period');
    expect(p).not.toContain('timezone');
  });
  it('a token bucket shows no calendar; a concurrency limit no tiers', () => {
    expect(paths('limits', { id: 'l', algorithm: 'token_bucket' })).not.toContain('calendar');
    expect(paths('limits', { id: 'c', algorithm: 'concurrency' })).not.toContain('tiers');
    expect(paths('limits', { id: 'c', algorithm: 'concurrency', tiers: [{ id: 'x', rate: 1 }] })).toContain('tiers');
  });
  it('an identity shows the header fields or the cookie, the URL fields or the file', () => {
    const header = paths('identities', { id: 'i', jwt: { jwks: { url: 'https://x/j' } } });
    expect(header).toEqual(expect.arrayContaining(['jwt.from.header', 'jwt.from.scheme', 'jwt.jwks.url', 'jwt.jwks.refresh']));
    expect(header).not.toContain('jwt.from.cookie');
    expect(header).not.toContain('jwt.jwks.file');
    const cookie = paths('identities', { id: 'i', jwt: { from: { cookie: 'session' }, jwks: { file: '/j.json' } } });
    expect(cookie).toEqual(expect.arrayContaining(['jwt.from.cookie', 'jwt.jwks.file']));
    expect(cookie).not.toContain('jwt.from.header');
    expect(cookie).not.toContain('jwt.jwks.refresh');
  });
  it('the token source and key source choices follow the keys present', () => {
    const from = fields.identities.find((f) => f.path === 'jwt.from')!;
    const jwks = fields.identities.find((f) => f.path === 'jwt.jwks')!;
    expect(choiceOf(from, undefined)).toBe('header');
    expect(choiceOf(from, { cookie: '' })).toBe('cookie');
    expect(choiceOf(jwks, { file: '/j' })).toBe('file');
    expect(choiceOf(jwks, { url: '' })).toBe('url');
  });
});

describe('fields the form cannot edit', () => {
  const list = (kind: keyof typeof fields, r: Record<string, unknown>) => uncovered(r, visibleFields(kind, r)).map(([p]) => p);
  it('lists what no field edits, and nothing the form shows', () => {
    const r = { id: 'l', algorithm: 'adaptive', adaptive: { target: '50ms', maxLimit: 9 }, exempt: ['10.0.0.0/8'], rate: 5, key: ['ip'], response: { status: 503 } };
    expect(list('limits', r).sort()).toEqual(['adaptive.target']);
  });
  it('lists a period a calendar quota ignores; every upstream target is editable', () => {
    expect(list('limits', { id: 'q', algorithm: 'quota', calendar: 'day', period: '1h' })).toEqual(['period']);
    const route = { id: 'r', upstream: { targets: [{ url: 'http://a' }, { url: 'http://b', weight: 2 }] } };
    expect(list('routes', route)).toEqual([]);
  });
  it('lists a key no field knows wherever it is: at the top, in a nested object, in a list element', () => {
    const route = { id: 'r', colour: 'red', match: { pathPrefix: '/', query: { a: '1' } }, upstream: { targets: [{ url: 'http://a', zone: 'b' }], retries: 3 } };
    expect(list('routes', route).sort()).toEqual(['colour', 'match.query.a', 'upstream.retries', 'upstream.targets[0].zone']);
    const tiered = { id: 'l', algorithm: 'token_bucket', rate: 1, tiers: [{ id: 't', rate: 2, note: 'x' }], variants: [] };
    expect(list('limits', tiered)).toEqual(['tiers[0].note']);
  });
  it("lists a variant's cost, and a hidden list whole", () => {
    const l = { id: 'l', algorithm: 'token_bucket', rate: 5, variants: [{ id: 'v', weight: 10, rate: 9, cost: { header: 'X-C' } }] };
    expect(list('limits', l)).toEqual(['variants[0].cost.header']);
    const c = { id: 'c', algorithm: 'concurrency', rate: 5, variants: [{ id: 'v', weight: 10, burst: 3 }] };
    expect(list('limits', c)).toEqual([]);
  });
  it('lists the header of an identity that also sets a cookie, and the file of one that also sets a URL', () => {
    expect(list('identities', { id: 'i', jwt: { from: { cookie: 's' }, jwks: { file: '/j' }, issuer: 'x', algorithms: ['RS256'] } })).toEqual([]);
    expect(list('identities', { id: 'i', jwt: { from: { header: 'X-T', cookie: 's' }, jwks: { file: '/j' }, issuer: 'x', algorithms: ['RS256'] } })).toEqual(['jwt.from.header']);
    expect(list('identities', { id: 'i', jwt: { from: { header: 'X-T', cookie: 's' }, jwks: { file: '/j', url: 'https://x' }, issuer: 'x' } })).toEqual(['jwt.from.header', 'jwt.jwks.file']);
  });
  it('a full identity, tiered limit and class are all editable', () => {
    const rs = {} as RuleSet;
    const id = newRule(rs, 'identities');
    expect(list('identities', setIn(id, 'jwt.clockSkew', '30s'))).toEqual([]);
    const tiered = { id: 'l', algorithm: 'token_bucket', rate: 10, key: ['jwt:sub'], tiers: [{ id: 'pro', match: { claims: { plan: 'pro' } }, rate: 100 }, { id: 'free', rate: 5 }] };
    expect(list('limits', tiered)).toEqual([]);
    expect(list('classes', { id: 'gold', match: { claims: { tier: 'gold' }, routes: ['a'], headers: { 'X-P': '1' } } })).toEqual([]);
  });
});

/** leaves are the paths of every field the schema allows under a definition: objects are walked, arrays of objects too ("[]"), maps and scalars are leaves. */
function leaves(def: Def, base: string, seen: string[] = []): string[] {
  const d = resolve(def);
  if (!d?.properties) return [base];
  const out: string[] = [];
  for (const [k, v] of Object.entries(d.properties)) {
    const p = base ? `${base}.${k}` : k;
    const r = resolve(v);
    if (r?.items && resolve(r.items)?.properties) out.push(...leaves(r.items, `${p}[]`, seen));
    else out.push(...leaves(v, p, seen));
  }
  return out;
}
/** formPaths are the paths the form's fields edit, list elements as "[]". */
function formPaths(fs: FieldSpec[], base = ''): string[] {
  return fs.flatMap((f) => (f.type === 'list' ? formPaths(f.item ?? [], `${base}${f.path}[].`) : [`${base}${f.path}`]));
}

describe('every field of the rule document is in the form', () => {
  // What is edited in the YAML view only (shown read-only in the form under "Set in YAML").
  const yamlOnly: Record<string, string[]> = {
    limits: ['variants[].cost.header', 'variants[].cost.bodyBytesPerUnit', 'variants[].adaptive.percentile', 'variants[].adaptive.buffer', 'variants[].adaptive.window', 'variants[].adaptive.probeInterval'],
  };
  for (const kind of ruleKinds) {
    it(`${kind}: every schema field has a form field, or is listed as YAML-only`, () => {
      const form = new Set(formPaths(fields[kind]));
      const missing = leaves(defs[defName[kind]], '').filter((p) => !form.has(p) && !(yamlOnly[kind] ?? []).includes(p));
      expect(missing).toEqual([]);
    });
  }
  it('the document kind offers the schema enum', () => {
    expect(documentKinds).toEqual(['gateway', 'service']);
    expect(documentKindHelp).toMatch(/in-service SDK/);
  });
});

describe('kind: service documents', () => {
  const svc: Ctx = { service: true };
  const paths = (kind: keyof typeof fields, r: Record<string, unknown>, ctx?: Ctx) => visibleFields(kind, r, ctx).map((f) => f.path);
  it('a route shows no upstream field in a service document, and lists an upstream left there to edit in YAML', () => {
    const r = { id: 'r', match: { pathPrefix: '/orders' } };
    expect(paths('routes', r, svc).filter((p) => p.startsWith('upstream'))).toEqual([]);
    expect(paths('routes', r)).toEqual(expect.arrayContaining(['upstream.targets', 'upstream.tls.ca', 'upstream.healthCheck.path', 'upstream.protocol']));
    const withUp = { ...r, upstream: { targets: [{ url: 'http://a' }] } };
    expect(uncovered(withUp, visibleFields('routes', withUp, svc), svc)).toEqual([['upstream.targets', [{ url: 'http://a' }]]]);
  });
  it('limits, breakers and degrades take resources in a service document (and show them in a gateway one only when set)', () => {
    for (const kind of ['limits', 'breakers', 'degrades'] as const) {
      expect(paths(kind, { id: 'x' }, svc)).toContain('resources');
      expect(paths(kind, { id: 'x' })).not.toContain('resources');
      expect(paths(kind, { id: 'x', resources: ['a'] })).toContain('resources');
      const f = fields[kind].find((x) => x.path === 'resources')!;
      expect(f.type).toBe('tags');
      expect(helpOf(kind, f)).toMatch(/Guard\.Do/);
    }
  });
  it('a limit of a service document offers no tiers (no identity verifies claims there) unless it has some', () => {
    expect(paths('limits', { id: 'l', algorithm: 'token_bucket' }, svc)).not.toContain('tiers');
    expect(paths('limits', { id: 'l', algorithm: 'token_bucket' })).toContain('tiers');
    expect(paths('limits', { id: 'l', algorithm: 'token_bucket', tiers: [] }, svc)).toContain('tiers');
  });
  it('the key help names sdk:NAME', () => {
    for (const kind of ['limits', 'degrades'] as const) expect(helpOf(kind, fields[kind].find((x) => x.path === 'key')!)).toMatch(/sdk:NAME/);
  });
  it('bucket is offered on cluster limits other than quotas', () => {
    expect(paths('limits', { id: 'l', algorithm: 'token_bucket', scope: 'cluster' })).toContain('bucket');
    expect(paths('limits', { id: 'l', algorithm: 'token_bucket', scope: 'node' })).not.toContain('bucket');
    expect(paths('limits', { id: 'l', algorithm: 'quota', scope: 'cluster' })).not.toContain('bucket');
    expect(paths('limits', { id: 'l', algorithm: 'quota', scope: 'cluster', bucket: 'b' })).toContain('bucket');
    expect(helpOf('limits', fields.limits.find((x) => x.path === 'bucket')!)).toMatch(/shared across namespaces/);
  });
});

describe('fields by algorithm and mode', () => {
  const paths = (kind: keyof typeof fields, r: Record<string, unknown>) => visibleFields(kind, r).map((f) => f.path);
  it('an adaptive limit shows its settings and reserve, no rate, period, burst or cost', () => {
    const p = paths('limits', { id: 'a', algorithm: 'adaptive' });
    expect(p).toEqual(expect.arrayContaining(['adaptive.maxLimit', 'adaptive.percentile', 'reserve', 'variants']));
    for (const x of ['rate', 'period', 'burst', 'cost']) expect(p).not.toContain(x);
  });
  it('a leaky bucket shows max delay; a cluster limit its mode and what to do when Redis fails', () => {
    expect(paths('limits', { id: 'l', algorithm: 'leaky_bucket' })).toContain('maxDelay');
    expect(paths('limits', { id: 'l', algorithm: 'token_bucket' })).not.toContain('maxDelay');
    expect(paths('limits', { id: 'l', scope: 'cluster' })).toEqual(expect.arrayContaining(['mode', 'onStoreError']));
  });
  it('a cost is none, a header or body bytes', () => {
    const cost = fields.limits.find((f) => f.path === 'cost')!;
    expect(choiceOf(cost, undefined)).toBe('none');
    expect(choiceOf(cost, { bodyBytesPerUnit: 10 })).toBe('bodyBytesPerUnit');
    expect(paths('limits', { id: 'l', cost: { header: 'X-C' } })).toContain('cost.header');
    expect(paths('limits', { id: 'l', cost: { header: 'X-C' } })).not.toContain('cost.bodyBytesPerUnit');
  });
  it('tiers and variants exclude each other', () => {
    expect(paths('limits', { id: 'l', tiers: [{ id: 't', rate: 1 }] })).not.toContain('variants');
    expect(paths('limits', { id: 'l', variants: [{ id: 'v', weight: 5, rate: 1 }] })).not.toContain('tiers');
  });
  it('an auto degrade plan shows its triggers and no manual level', () => {
    const p = paths('degrades', { id: 'd', mode: 'auto' });
    expect(p).toEqual(expect.arrayContaining(['triggers.level1.qpsAbove', 'triggers.level2.successRateBelow', 'shedOrder', 'fallback.json']));
    expect(p).not.toContain('level');
    expect(paths('degrades', { id: 'd', mode: 'manual' })).not.toContain('triggers.level1.qpsAbove');
  });
});

describe('entries that parse', () => {
  it('reads a reserve as class=share', () => {
    expect(tagsToRatios(['gold=0.2', 'silver=x', 'bad', 'x='])).toEqual({ value: { gold: 0.2 }, bad: ['bad', 'silver=x', 'x='] });
    expect(ratiosToTags({ gold: 0.2 })).toEqual(['gold=0.2']);
  });
  it('reads statuses as whole numbers', () => {
    expect(tagsToInts(['503', ' 429 ', '5xx', '1.5'])).toEqual({ value: [503, 429], bad: ['5xx', '1.5'] });
  });
});

describe('edits keep what the form does not show', () => {
  it('setting a field keeps unknown keys beside it and above it', () => {
    const r = { id: 'l', algorithm: 'token_bucket', rate: 1, future: { on: true }, response: { status: 429, extra: 1 } };
    const rate = fields.limits.find((f) => f.path === 'rate')!;
    const st = fields.limits.find((f) => f.path === 'response.status')!;
    const out = editValue(editValue(r, rate, 9), st, 503);
    expect(out).toEqual({ id: 'l', algorithm: 'token_bucket', rate: 9, future: { on: true }, response: { status: 503, extra: 1 } });
  });
  it('an emptied keepEmpty field stays "" so its parent keeps its shape', () => {
    const f = fields.limits.find((x) => x.path === 'cost.header')!;
    expect(editValue({ id: 'l', cost: { header: 'X' } }, f, '')).toEqual({ id: 'l', cost: { header: '' } });
  });
  it('a new variant has an unused id, a weight and the limit rate (an adaptive one, a max limit)', () => {
    expect(newVariant({ rate: 7, variants: [{ id: 'variant-2' }] })).toEqual({ id: 'variant-3', weight: 10, rate: 7 });
    expect(newVariant({ algorithm: 'adaptive' })).toEqual({ id: 'variant-1', weight: 10, adaptive: { maxLimit: 100 } });
  });
});

describe('new rules', () => {
  it('a new identity reads Bearer tokens and offers no HMAC algorithm', () => {
    const i = newRule({ identities: [{ id: 'identity-1' }] } as unknown as RuleSet, 'identities');
    expect(i.id).toBe('identity-2');
    expect(i).toMatchObject({ jwt: { from: { header: 'Authorization', scheme: 'Bearer' } } });
    expect((i.jwt as { algorithms: string[] }).algorithms.every((a) => jwtAlgorithms.includes(a))).toBe(true);
  });
  it('a new tier has an unused id and the limit rate', () => {
    expect(newTier({ rate: 7, tiers: [{ id: 'tier-2' }] })).toEqual({ id: 'tier-3', rate: 7 });
    expect(newTier({})).toEqual({ id: 'tier-1', rate: 100 });
  });
});
