// The one sentence every page says about a namespace's canary ("canary v7
// on 1 node (pool=canary), analysis: passing") and how the fleet's live
// nodes stand against the published and the canary versions. The overview,
// the nodes, versions, canary and change pages all say it with these, so a
// canary node never reads as "behind" on one page and "canary" on another.
import type { Node, Version } from '../../api/client';
import type { CanaryAnalysis, CanaryComparison } from '../../api/fleet';
import { plural } from '../../components/format';
import { formatLabels } from '../nodes/labels';

/** ActiveCanary is what GET .../canary answers: the canary and the live nodes its selector matches. */
export type ActiveCanary = {
  version?: number;
  selector?: Record<string, string>;
  analysis?: CanaryAnalysis;
  comparison?: CanaryComparison;
  nodes?: { nodeId?: string; version?: number; applied?: boolean }[];
  nodesError?: string;
};

/**
 * analysisText is how the analysis stands, in words: "waiting for a
 * window", "passing" (the last judged window passed), "too little traffic",
 * "breached", "passed, held for a person", "passed"; "none (promote or
 * abort by hand)" without an analysis.
 */
export function analysisText(c: Pick<ActiveCanary, 'analysis' | 'comparison'>): string {
  if (!c.analysis) return 'none (promote or abort by hand)';
  const cmp = c.comparison;
  if (!cmp) return 'waiting for a window';
  switch (cmp.state) {
    case undefined:
    case 'waiting':
      return 'waiting for a window';
    case 'held':
      return 'passed, held for a person';
    case 'passed':
      return 'passed';
    case 'breached':
      return 'breached';
  }
  if (cmp.verdict === 'breach') return 'breached';
  if (cmp.verdict === 'insufficient') return 'too little traffic';
  return cmp.verdict === 'pass' ? 'passing' : 'running';
}

/** analysisColor is the badge colour of analysisText's state. */
export function analysisColor(c: Pick<ActiveCanary, 'analysis' | 'comparison'>): string {
  const t = analysisText(c);
  if (t.startsWith('pass')) return 'green';
  if (t === 'breached') return 'red';
  if (t === 'too little traffic' || t.startsWith('passed, held')) return 'yellow';
  return 'gray';
}

/**
 * canarySummary is "canary v7 on 1 node (pool=canary), analysis: passing":
 * the nodes are the live ones its selector matches (what the canary API
 * reports); when etcd could not be read, the selector alone.
 */
export function canarySummary(c: ActiveCanary): string {
  const sel = formatLabels(c.selector);
  const where = c.nodesError ? `on the nodes of ${sel}` : `on ${plural((c.nodes ?? []).length, 'node')} (${sel})`;
  return `canary v${c.version} ${where}, analysis: ${analysisText(c)}`;
}

/**
 * publishedVersion is the version every node not in a canary should run:
 * the newest one that is not the active canary's and was not only ever a
 * canary (an aborted one). versions are newest first.
 */
export function publishedVersion(versions: Version[], canaryVersion?: number): number | undefined {
  return versions.find((v) => v.number !== canaryVersion && v.publication?.kind !== 'canary' && v.publication?.kind !== 'abort')?.number;
}

/**
 * rolledBack maps each version a rollback rolled back from to that
 * rollback's number: the version every node ran when the rollback was made
 * (publishedVersion of the older versions), not simply the one numbered
 * before it, which may be a canary that was aborted. versions are newest
 * first.
 */
export function rolledBack(versions: Version[]): Map<number, number> {
  const out = new Map<number, number>();
  versions.forEach((v, i) => {
    if (!v.rollbackOf || v.number === undefined) return;
    const from = publishedVersion(versions.slice(i + 1));
    if (from !== undefined && !out.has(from)) out.set(from, v.number);
  });
  return out;
}

export type FleetCounts = { live: number; current: number; canary: number; behind: number; ahead: number; published?: number };

/**
 * fleetCounts counts the live nodes by their version state (the control
 * plane's: a canary node runs the canary version it was selected for, not
 * an "ahead" or "behind" one). published is the version the nodes report
 * the namespace publishes.
 */
export function fleetCounts(nodes: Node[]): FleetCounts {
  const live = nodes.filter((n) => n.live);
  const count = (s: Node['versionState']) => live.filter((n) => n.versionState === s).length;
  return { live: live.length, current: count('current'), canary: count('canary'), behind: count('behind'), ahead: count('ahead'), published: nodes.find((n) => n.publishedVersion)?.publishedVersion };
}

/** fleetText is "4 live, 2 on v6, 1 on canary v7, 1 behind", leaving out what is 0 (but not the published version's count). */
export function fleetText(f: FleetCounts, published: number | undefined, canaryVersion?: number): string {
  if (f.live === 0) return '0 live';
  const parts: string[] = [];
  const v = f.published ?? published;
  if (v !== undefined) parts.push(`${f.current} on v${v}`);
  if (f.canary > 0) parts.push(`${f.canary} on canary${canaryVersion !== undefined ? ` v${canaryVersion}` : ''}`);
  if (f.behind > 0) parts.push(`${f.behind} behind`);
  if (f.ahead > 0) parts.push(`${f.ahead} ahead`);
  return [`${f.live} live`, ...parts].join(', ');
}
