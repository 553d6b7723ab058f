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
