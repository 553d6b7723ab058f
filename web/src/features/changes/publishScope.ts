// What the change page's Publish confirmation says: which version goes to
// how many nodes (every live node, or the canary's), so nobody publishes
// without seeing the scope. The summary of the change itself is summary.ts'.
import type { Node } from '../../api/client';
import { plural } from '../../components/format';

/** nodes is the all-nodes scope in words; a canary's is the canary form's CanaryScope. */
export type PublishScope = { title: string; confirm: string; nodes?: string };

const names = (nodes: Node[], max = 8) => {
  const ids = nodes.map((n) => n.nodeId ?? '');
  return ids.length <= max ? ids.join(', ') : `${ids.slice(0, max).join(', ')} and ${ids.length - max} more`;
};

/**
 * publishScope is the confirmation of publishing as version next: to every
 * live node ("Publish v5 to 3 nodes?"), or as a canary on the live nodes
 * its selector matches ("Publish v7 as a canary on 1 node?").
 */
export function publishScope(ns: string, next: number, nodes: Node[] | undefined, canary?: { matching: Node[] }): PublishScope {
  const live = (nodes ?? []).filter((n) => n.live);
  if (canary) return { title: `Publish v${next} as a canary on ${plural(canary.matching.length, 'node')}?`, confirm: 'Publish canary' };
  return {
    title: `Publish v${next} to ${plural(live.length, 'node')}?`,
    confirm: `Publish to ${plural(live.length, 'node')}`,
    nodes: live.length ? `Every live node of ${ns} runs it: ${names(live)}.` : `No node of ${ns} is live: nodes that join run it.`,
  };
}
