import { describe, expect, it } from 'vitest';
import schema from '../../../../api/schema.json';
import { choiceOf, claimsToTags, fields, helpOf, jwtAlgorithms, tagsToClaims, tierFields, uncovered, visibleFields, type FieldSpec } from './fields';
import { newRule, newTier, ruleKinds, setIn } from './ruleset';
import type { RuleSet } from '../../api/client';

type Def = { $ref?: string; properties?: Record<string, Def>; items?: Def; enum?: string[]; oneOf?: unknown; additionalProperties?: unknown };
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
    const r = { id: 'l', algorithm: 'adaptive', adaptive: { target: '50ms' }, exempt: ['10.0.0.0/8'], rate: 5, key: ['ip'], response: { status: 503 } };
    expect(list('limits', r).sort()).toEqual(['adaptive.target', 'exempt', 'response.status']);
  });
  it('lists a period a calendar quota ignores, and a second upstream target', () => {
    expect(list('limits', { id: 'q', algorithm: 'quota', calendar: 'day', period: '1h' })).toEqual(['period']);
    const route = { id: 'r', upstream: { targets: [{ url: 'http://a' }, { url: 'http://b', weight: 2 }] } };
    expect(list('routes', route)).toEqual(['upstream.targets[1].url', 'upstream.targets[1].weight']);
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
