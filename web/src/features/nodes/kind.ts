// A node is a gateway (sluice-gateway) or a service running the in-service
// SDK (registration kind "sdk", with its service name): the nodes pages
// show which, so that gateways and services are one fleet.
import type { Node } from '../../api/client';

export type NodeKindInfo = {
  /** kind is "gateway" or "sdk". */
  kind: 'gateway' | 'sdk';
  /** label is what the pages show: "gateway", or "sdk · <service>". */
  label: string;
  /** service is an sdk node's service name ('' for a gateway). */
  service: string;
};

/** nodeKind reads a node's kind: an absent kind is a gateway; an sdk node without a service name is shown as "sdk". */
export function nodeKind(n: Pick<Node, 'kind' | 'service'>): NodeKindInfo {
  if (n.kind !== 'sdk') return { kind: 'gateway', label: 'gateway', service: '' };
  const service = n.service ?? '';
  return { kind: 'sdk', label: service ? `sdk · ${service}` : 'sdk', service };
}
