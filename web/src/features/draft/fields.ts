// What the form view shows of each rule kind. Help text comes from
// api/schema.json's descriptions where the schema has one, so the form and
// the schema never disagree.
import schema from '../../../../api/schema.json';
import type { RuleKind } from './ruleset';

export type FieldType = 'text' | 'number' | 'select' | 'tags' | 'routes' | 'bool';
export type FieldSpec = { path: string; label: string; type: FieldType; options?: string[]; help?: string; placeholder?: string };

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
    { path: 'algorithm', label: 'Algorithm', type: 'select', options: ['token_bucket', 'sliding_window', 'fixed_window', 'leaky_bucket', 'concurrency'] },
    { path: 'rate', label: 'Rate', type: 'number', help: 'Requests (or cost units) per period; for concurrency, how many in flight at once.' },
    { path: 'period', label: 'Period', type: 'text', placeholder: '1s' },
    { path: 'burst', label: 'Burst', type: 'number', help: "The token bucket's capacity or the leaky bucket's queue; empty means the rate." },
    { path: 'key', label: 'Key', type: 'tags', help: 'ip, route, global, header:NAME, query:NAME, cookie:NAME; empty means global.' },
    { path: 'scope', label: 'Scope', type: 'select', options: ['node', 'cluster'], help: 'node: counters in each gateway; cluster: shared through Redis.' },
    { path: 'shadow', label: 'Shadow (count, never reject)', type: 'bool' },
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
const defName: Record<RuleKind, string> = { routes: 'Route', limits: 'Limit', breakers: 'Breaker', degrades: 'Degrade' };

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
  if (f.path === 'id') return f.help;
  return desc ?? f.help;
}
