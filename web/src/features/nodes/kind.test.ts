import { describe, expect, it } from 'vitest';
import { nodeKind } from './kind';

describe('nodeKind', () => {
  it('a node without kind is a gateway', () => expect(nodeKind({})).toEqual({ kind: 'gateway', label: 'gateway', service: '' }));
  it('a gateway ignores a stray service name', () => expect(nodeKind({ service: 'x' }).label).toBe('gateway'));
  it('an sdk node shows its service', () =>
    expect(nodeKind({ kind: 'sdk', service: 'orders' })).toEqual({ kind: 'sdk', label: 'sdk · orders', service: 'orders' }));
  it('an sdk node without a service name', () => expect(nodeKind({ kind: 'sdk' }).label).toBe('sdk'));
});
