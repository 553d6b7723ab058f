import { describe, expect, it } from 'vitest';
import type { Node } from '../../api/client';
import { publishScope } from './publishScope';

const n = (nodeId: string, live = true): Node => ({ nodeId, live });

describe('publishScope', () => {
  it('to every live node: the version and the count (gone nodes are not counted)', () => {
    expect(publishScope('shop', 5, [n('gw-1'), n('gw-2'), n('old', false)])).toEqual({
      title: 'Publish v5 to 2 nodes?',
      confirm: 'Publish to 2 nodes',
      nodes: 'Every live node of shop runs it: gw-1, gw-2.',
    });
  });
  it('one node, and none', () => {
    expect(publishScope('shop', 2, [n('gw-1')]).title).toBe('Publish v2 to 1 node?');
    expect(publishScope('shop', 2, undefined).nodes).toBe('No node of shop is live: nodes that join run it.');
  });
  it('as a canary: the nodes its selector matches', () => {
    expect(publishScope('shop', 7, [n('gw-1'), n('gw-2')], { matching: [n('gw-1')] })).toEqual({ title: 'Publish v7 as a canary on 1 node?', confirm: 'Publish canary' });
    expect(publishScope('shop', 7, [n('gw-1')], { matching: [] }).title).toBe('Publish v7 as a canary on 0 nodes?');
  });
  it('a long list is cut', () => {
    const many = Array.from({ length: 10 }, (_, i) => n(`gw-${i}`));
    expect(publishScope('shop', 3, many).nodes).toBe('Every live node of shop runs it: gw-0, gw-1, gw-2, gw-3, gw-4, gw-5, gw-6, gw-7 and 2 more.');
  });
});
