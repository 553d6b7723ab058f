import { describe, expect, it } from 'vitest';
import type { Node } from '../../api/client';
import { overrideBody, servingOthers, ttlError } from './override';

describe('ttlError', () => {
  it.each([
    { desc: 'empty: until cleared', in: '', want: undefined },
    { desc: 'minutes', in: '15m', want: undefined },
    { desc: 'thirty days', in: '720h', want: undefined },
    { desc: 'over thirty days', in: '721h', want: 'at most 30 days (720h)' },
    { desc: 'zero', in: '0', want: 'must be more than 0' },
    { desc: 'no unit', in: '15', want: 'a duration such as 15m or 2h' },
  ])('$desc', (c) => expect(ttlError(c.in)).toBe(c.want));
});

describe('overrideBody', () => {
  it.each<{ desc: string; drain: boolean; levels: Record<string, string>; ttl: string; reason: string; want: unknown }>([
    { desc: 'drain only, until cleared', drain: true, levels: {}, ttl: ' ', reason: ' maintenance ', want: { drain: true, degradeLevels: {}, reason: 'maintenance' } },
    { desc: 'forced levels, unforced ones left out', drain: false, levels: { a: '2', b: '', c: '0' }, ttl: '15m', reason: 'incident', want: { drain: false, degradeLevels: { a: 2, c: 0 }, ttl: '15m', reason: 'incident' } },
    { desc: 'nothing to override', drain: false, levels: { a: '' }, ttl: '15m', reason: 'x', want: undefined },
  ])('$desc', (c) => expect(overrideBody(c.drain, c.levels, c.ttl, c.reason)).toEqual(c.want));
});

describe('servingOthers', () => {
  const n = (nodeId: string, more: Partial<Node> = {}): Node => ({ nodeId, live: true, ...more }) as Node;
  it.each([
    { desc: 'the only node', nodes: [n('a')], want: 0 },
    { desc: 'another live node', nodes: [n('a'), n('b')], want: 1 },
    { desc: 'the other is gone', nodes: [n('a'), n('b', { live: false })], want: 0 },
    { desc: 'the other drains', nodes: [n('a'), n('b', { draining: true })], want: 0 },
    { desc: 'the other was asked to drain', nodes: [n('a'), n('b', { override: { drain: true } })], want: 0 },
  ])('$desc', (c) => expect(servingOthers(c.nodes, 'a')).toBe(c.want));
});
