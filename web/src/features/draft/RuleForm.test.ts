// RuleForm rendered to HTML (no DOM needed): what a rule holds that the
// form has no field for is listed under "Set in YAML", before and after an
// edit, and the fields of a kind: service document are what it allows.
import { MantineProvider } from '@mantine/core';
import { createElement, type ComponentProps } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import { editValue, fields } from './fields';
import { RuleForm } from './RuleForm';

type Props = ComponentProps<typeof RuleForm>;
const base: Omit<Props, 'kind' | 'rule'> = { index: 0, routeIds: ['orders'], errors: [], readOnly: false, onChange: () => {}, onRemove: () => {}, onEditYaml: () => {} };

function html(p: Pick<Props, 'kind' | 'rule'> & Partial<Props>): string {
  return renderToStaticMarkup(createElement(MantineProvider, null, createElement(RuleForm, { ...base, ...p })));
}

/** labelled says whether the markup has a form control labelled text (Mantine writes <label ...>text</label>). */
const labelled = (h: string, text: string) => new RegExp(`<label[^>]*>${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(<|</label>)`).test(h);

describe('a rule with a field the form does not know', () => {
  const rule = { id: 'orders-limit', algorithm: 'token_bucket', rate: 100, period: '1m', key: ['ip'], futureKnob: { level: 3 }, tiers: [{ id: 'pro', rate: 5, note: 'kept' }] };
  it('shows it under "Set in YAML" with a button to the YAML view', () => {
    const h = html({ kind: 'limits', rule });
    expect(h).toContain('Set in YAML');
    expect(h).toContain('futureKnob.level: 3');
    expect(h).toContain('tiers[0].note: kept');
    expect(h).toContain('Edit in YAML');
  });
  it('keeps it through a form edit, and still shows it', () => {
    const rate = fields.limits.find((f) => f.path === 'rate')!;
    const edited = editValue(rule, rate, 7);
    expect(edited).toMatchObject({ rate: 7, futureKnob: { level: 3 }, tiers: [{ id: 'pro', rate: 5, note: 'kept' }] });
    const h = html({ kind: 'limits', rule: edited });
    expect(h).toContain('futureKnob.level: 3');
    expect(h).toMatch(/value="7"/);
  });
  it('lists nothing when every field has its input', () => {
    expect(html({ kind: 'limits', rule: { id: 'l', algorithm: 'token_bucket', rate: 1 } })).not.toContain('Set in YAML');
  });
});

describe('kind: service documents in the form', () => {
  it('a route has no upstream fields; in a gateway document it has targets, TLS, protocol and health checks', () => {
    const route = { id: 'orders', match: { pathPrefix: '/orders' } };
    const svc = html({ kind: 'routes', rule: route, service: true });
    expect(labelled(svc, 'Path prefix')).toBe(true);
    for (const l of ['Protocol', 'Timeout', 'TLS server name', 'Health check path']) expect(labelled(svc, l), l).toBe(false);
    expect(svc).not.toContain('Add target');
    for (const t of ['Upstream TLS', 'Health check', 'Outlier detection']) expect(svc, t).not.toContain(`>${t}</summary>`);
    const gw = html({ kind: 'routes', rule: route });
    // A gateway route's optional sections are there, folded: their fields are made when first unfolded.
    for (const t of ['Upstream', 'Upstream TLS', 'Health check', 'Outlier detection']) expect(gw, t).toMatch(new RegExp(`<summary[^>]*>${t}</summary>`));
    for (const l of ['TLS server name', 'Health check path']) expect(labelled(gw, l), l).toBe(false);
    expect(gw).toContain('Add target');
    // A section with a field set starts unfolded, with every field.
    const set = html({ kind: 'routes', rule: { ...route, upstream: { targets: [{ url: 'http://127.0.0.1:9' }], timeout: '5s', tls: { serverName: 'orders' }, healthCheck: { path: '/healthz' } } } });
    for (const l of ['Protocol', 'Timeout', 'TLS server name', 'Health check path']) expect(labelled(set, l), l).toBe(true);
  });
  it('limits, breakers and degrades edit resources; a cluster limit its shared bucket', () => {
    for (const [kind, rule] of [
      ['limits', { id: 'l', algorithm: 'token_bucket', rate: 1, resources: ['orders.Create'] }],
      ['breakers', { id: 'b', window: '10s', openFor: '5s' }],
      ['degrades', { id: 'd', mode: 'manual' }],
    ] as const) {
      const h = html({ kind, rule, service: true });
      expect(labelled(h, 'Resources'), kind).toBe(true);
      expect(h).toContain('Guard.Do');
    }
    expect(html({ kind: 'limits', rule: { id: 'l', algorithm: 'token_bucket', rate: 1, resources: ['orders.Create'] }, service: true })).toContain('value="orders.Create"');
    expect(labelled(html({ kind: 'limits', rule: { id: 'l', algorithm: 'token_bucket', rate: 1, scope: 'cluster' } }), 'Shared bucket')).toBe(true);
    expect(labelled(html({ kind: 'limits', rule: { id: 'l', algorithm: 'token_bucket', rate: 1 } }), 'Shared bucket')).toBe(false);
  });
});

describe('selects with a default', () => {
  /** selectShows is the text the select labelled label shows (Mantine's input value). */
  const selectShows = (h: string, label: string) => {
    const id = h.match(new RegExp(`<label[^>]*for="([^"]+)"[^>]*>${label}<`))?.[1];
    expect(id, `a select labelled ${label}`).toBeTruthy();
    const input = h.match(new RegExp(`<input[^>]*id="${id!.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}"[^>]*>`))?.[0] ?? '';
    return input.match(/ value="([^"]*)"/)?.[1];
  };

  it('an unset scope shows node, marked as the default (as the server normalizes it), and the rule is left as it is', () => {
    const rule = { id: 'l', algorithm: 'token_bucket', rate: 5, period: '1s' };
    const h = html({ kind: 'limits', rule });
    expect(selectShows(h, 'Scope')).toBe('node (default)');
    expect(rule).toEqual({ id: 'l', algorithm: 'token_bucket', rate: 5, period: '1s' });
    // Picking the shown default again is Mantine's deselect (null): the field stays absent, nothing is written.
    const scope = fields.limits.find((f) => f.path === 'scope')!;
    expect(scope.default).toBe('node');
    expect(editValue(rule, scope, undefined)).toEqual(rule);
  });

  it('a set scope shows its value; cluster shows its own defaults for mode and onStoreError', () => {
    expect(selectShows(html({ kind: 'limits', rule: { id: 'l', algorithm: 'token_bucket', scope: 'node' } }), 'Scope')).toBe('node (default)');
    const h = html({ kind: 'limits', rule: { id: 'l', algorithm: 'token_bucket', scope: 'cluster' } });
    expect(selectShows(h, 'Scope')).toBe('cluster');
    expect(selectShows(h, 'Cluster mode')).toBe('exact (default)');
    expect(selectShows(h, 'When Redis fails')).toBe('local (default)');
    expect(selectShows(html({ kind: 'limits', rule: { id: 'l', algorithm: 'token_bucket', scope: 'cluster', mode: 'batched' } }), 'Cluster mode')).toBe('batched');
  });

  it('an unset cookie decoding shows percent, the default; a value the schema lacks is still shown', () => {
    expect(selectShows(html({ kind: 'limits', rule: { id: 'l', algorithm: 'token_bucket', key: ['cookie:sid'] } }), 'Cookie decoding')).toBe('percent (default)');
    expect(selectShows(html({ kind: 'limits', rule: { id: 'l', algorithm: 'token_bucket', scope: 'zone' } }), 'Scope')).toBe('zone');
  });

  it('a select without one value for absent shows what absent means instead', () => {
    // The Upstream section opens when one of its fields is set.
    const h = html({ kind: 'routes', rule: { id: 'r', match: { pathPrefix: '/' }, upstream: { targets: [{ url: 'http://a' }], timeout: '5s' } } });
    expect(selectShows(h, 'Protocol')).toBe('');
    expect(h).toMatch(/<input[^>]*placeholder="by each target&#x27;s scheme"[^>]*id="routes\[0\]\.upstream\.protocol"/);
    expect(selectShows(html({ kind: 'limits', rule: { id: 'l', algorithm: 'quota', rate: 5 } }), 'Calendar')).toBe('');
  });
});
