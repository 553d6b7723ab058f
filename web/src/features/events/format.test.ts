import { describe, expect, it } from 'vitest';
import { change, detailText, reason } from './format';

describe('event cells', () => {
  it.each([
    { desc: 'plain facts as k=v, nested as {…}, empty ones left out', in: { action: 'change.publish', version: 5, after: { a: 1 }, reason: '', x: null }, want: 'action=change.publish version=5 after={…}' },
    { desc: 'a string', in: 'refused: bad rule', want: 'refused: bad rule' },
    { desc: 'nothing', in: undefined, want: '' },
  ])('detail: $desc', (c) => expect(detailText(c.in)).toBe(c.want));
  it.each([
    { desc: 'a level step', e: { id: 1, at: '', kind: 'degrade' as const, from: '0', to: '1' }, want: '0 → 1' },
    { desc: 'a version', e: { id: 1, at: '', kind: 'publish' as const, version: 4 }, want: 'v4' },
    { desc: 'a canary start (no state before it)', e: { id: 1, at: '', kind: 'canary' as const, to: 'start', version: 7 }, want: 'start v7' },
    { desc: 'a cancelled schedule', e: { id: 1, at: '', kind: 'publish' as const, to: 'schedule_cancelled', version: 5 }, want: 'schedule cancelled v5' },
    { desc: 'only the old state', e: { id: 1, at: '', kind: 'breaker' as const, from: 'open' }, want: 'was open' },
    { desc: 'neither', e: { id: 1, at: '', kind: 'node_joined' as const }, want: '' },
    { desc: 'a drain, not "node.override"', e: { id: 1, at: '', kind: 'override' as const, detail: { action: 'node.override', after: { drain: true, reason: 'kernel patch' } } }, want: 'drain' },
    { desc: 'a forced degrade', e: { id: 1, at: '', kind: 'override' as const, detail: { action: 'node.override', after: { degradeLevels: { 'shed-search': 1 } } } }, want: 'degrade rule shed-search to level 1' },
    { desc: 'an override cleared', e: { id: 1, at: '', kind: 'override' as const, detail: { action: 'node.override_delete' } }, want: 'cleared' },
  ])('change: $desc', (c) => expect(change(c.e)).toBe(c.want));
  it('reason: an override says why', () => {
    expect(reason({ id: 1, at: '', kind: 'override', detail: { action: 'node.override', after: { drain: true, reason: 'kernel patch' } } })).toBe('kernel patch');
    expect(reason({ id: 1, at: '', kind: 'publish', version: 3 })).toBe('');
  });
});
