// The override form's rules: what a TTL may be and the body it sends
// (api.Override as PUT …/nodes/{id}/override takes it). The control plane
// checks the same again and names what it refuses.
import { parseDuration } from '../traffic/series';
import type { Node } from '../../api/client';
import type { OverrideInput } from './hooks';

const maxTTL = 30 * 24 * 3600;

/** ttlError says what is wrong with a TTL text, or undefined when it is fine (empty: until cleared). */
export function ttlError(ttl: string): string | undefined {
  if (ttl.trim() === '') return undefined;
  const s = parseDuration(ttl);
  if (Number.isNaN(s)) return 'a duration such as 15m or 2h';
  if (s <= 0) return 'must be more than 0';
  if (s > maxTTL) return 'at most 30 days (720h)';
  return undefined;
}

/**
 * overrideBody is the request for the form's state: levels maps degrade rule
 * ids to '' (not forced) or '0'..'2'; undefined when the override would
 * neither drain nor force a level (the server refuses such an override).
 */
export function overrideBody(drain: boolean, levels: Record<string, string>, ttl: string, reason: string): OverrideInput | undefined {
  const degradeLevels = Object.fromEntries(
    Object.entries(levels)
      .filter(([, v]) => v !== '')
      .map(([k, v]) => [k, Number(v)]),
  );
  if (!drain && Object.keys(degradeLevels).length === 0) return undefined;
  return { drain, degradeLevels, ...(ttl.trim() ? { ttl: ttl.trim() } : {}), reason: reason.trim() };
}

/**
 * servingOthers counts the live nodes other than id that neither drain nor
 * were asked to: the ones left to serve the namespace if id drains (0: id is
 * the last, and the override dialog warns).
 */
export function servingOthers(nodes: Node[], id: string): number {
  return nodes.filter((n) => n.nodeId !== id && n.live && !n.draining && !n.override?.drain).length;
}
