import { describe, expect, it } from 'vitest';
import type { Node, Version } from '../../api/client';
import { analysisText, canarySummary, fleetCounts, fleetText, publishedVersion, rolledBack } from './summary';

const analysis = { window: '60s', onPass: 'hold' as const };

describe('analysisText', () => {
  it.each([
    { desc: 'no analysis', c: {}, want: 'none (promote or abort by hand)' },
    { desc: 'no window yet', c: { analysis, comparison: { state: 'waiting' as const } }, want: 'waiting for a window' },
    { desc: 'the last window passed', c: { analysis, comparison: { state: 'running' as const, verdict: 'pass' as const } }, want: 'passing' },
    { desc: 'too few requests', c: { analysis, comparison: { state: 'running' as const, verdict: 'insufficient' as const } }, want: 'too little traffic' },
    { desc: 'a breach', c: { analysis, comparison: { state: 'running' as const, verdict: 'breach' as const } }, want: 'breached' },
    { desc: 'held after a pass', c: { analysis, comparison: { state: 'held' as const, verdict: 'pass' as const } }, want: 'passed, held for a person' },
  ])('$desc', ({ c, want }) => expect(analysisText(c)).toBe(want));
});

describe('canarySummary', () => {
  it('names the version, the matching live nodes, the selector and the analysis', () => {
    expect(canarySummary({ version: 7, selector: { zone: 'a', pool: 'canary' }, analysis, comparison: { state: 'running', verdict: 'pass' }, nodes: [{ nodeId: 'gw-1' }] })).toBe('canary v7 on 1 node (pool=canary, zone=a), analysis: passing');
  });
  it('no node matching, and no analysis', () => {
    expect(canarySummary({ version: 3, selector: { pool: 'canary' }, nodes: [] })).toBe('canary v3 on 0 nodes (pool=canary), analysis: none (promote or abort by hand)');
  });
  it('etcd unreadable: the selector without a count', () => {
    expect(canarySummary({ version: 3, selector: { pool: 'canary' }, nodesError: 'etcd down', analysis })).toBe('canary v3 on the nodes of pool=canary, analysis: waiting for a window');
  });
});

describe('publishedVersion', () => {
  const v = (number: number, kind?: 'ruleset' | 'canary' | 'promote' | 'abort'): Version => ({ number, ...(kind ? { publication: { kind } } : {}) }) as Version;
  it('skips the active canary and aborted canaries', () => {
    expect(publishedVersion([v(8, 'canary'), v(7, 'abort'), v(6, 'ruleset'), v(5, 'ruleset')], 8)).toBe(6);
  });
  it('a promoted canary is the published version', () => {
    expect(publishedVersion([v(7, 'promote'), v(6, 'ruleset')])).toBe(7);
  });
  it('nothing published', () => {
    expect(publishedVersion([v(1, 'canary')], 1)).toBeUndefined();
  });
});

describe('rolledBack', () => {
  const v = (number: number, kind: 'ruleset' | 'canary' | 'promote' | 'abort', rollbackOf?: number): Version => ({ number, publication: { kind }, ...(rollbackOf ? { rollbackOf } : {}) }) as Version;
  it('marks the version the rollback replaced', () => {
    expect(rolledBack([v(5, 'ruleset', 3), v(4, 'ruleset'), v(3, 'ruleset')])).toEqual(new Map([[4, 5]]));
  });
  it('past an aborted canary: the version the nodes ran, not the one numbered before the rollback', () => {
    expect(rolledBack([v(6, 'ruleset', 3), v(5, 'abort'), v(4, 'ruleset'), v(3, 'ruleset')])).toEqual(new Map([[4, 6]]));
  });
  it('a promoted canary rolled back from; two rollbacks in a row', () => {
    expect(rolledBack([v(8, 'ruleset', 5), v(7, 'ruleset', 6), v(6, 'promote'), v(5, 'ruleset')])).toEqual(
      new Map([
        [7, 8],
        [6, 7],
      ]),
    );
  });
  it('no older version on the page: nothing marked', () => {
    expect(rolledBack([v(9, 'ruleset', 2)])).toEqual(new Map());
  });
});

describe('fleet', () => {
  const n = (nodeId: string, live: boolean, versionState?: Node['versionState']): Node => ({ nodeId, live, versionState, publishedVersion: 6 });
  it('a canary node is counted on the canary, not as behind or ahead (the overview bug: "2 live, 1 on v6")', () => {
    const f = fleetCounts([n('a', true, 'current'), n('b', true, 'canary'), n('c', false, 'behind')]);
    expect(f).toEqual({ live: 2, current: 1, canary: 1, behind: 0, ahead: 0, published: 6 });
    expect(fleetText(f, undefined, 7)).toBe('2 live, 1 on v6, 1 on canary v7');
  });
  it('behind and ahead nodes are named', () => {
    expect(fleetText(fleetCounts([n('a', true, 'behind'), n('b', true, 'ahead'), n('c', true, 'current')]), 6)).toBe('3 live, 1 on v6, 1 behind, 1 ahead');
  });
  it('no live node; the published version from the list when the nodes do not say it', () => {
    expect(fleetText(fleetCounts([]), 4)).toBe('0 live');
    expect(fleetText({ live: 1, current: 1, canary: 0, behind: 0, ahead: 0 }, 4)).toBe('1 live, 1 on v4');
  });
});
