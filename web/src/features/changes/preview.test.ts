import { describe, expect, it } from 'vitest';
import { ApiError, type Limit, type Preview } from '../../api/client';
import { conflictChange, durationError, endedLine, fieldErrors, keepLast, keyInfo, nounOf, pct, previewRows, previewSelector, startErrorTitle, summaryLine, timeLeft } from './preview';

const base: Preview = {
  change: 7,
  checksum: 'abc',
  state: 'running',
  since: '2026-12-04T22:00:00Z',
  until: '2026-12-04T22:10:00Z',
  by: 'editor',
  selector: {},
  nodes: ['gw-a', 'gw-b'],
  approximate: true,
  rules: [
    { rule: 'orders-per-ip', kind: 'limit', live: { allowed: 996, rejected: 4, shadowRejected: 0, shed: 0, level: 0 }, preview: { allowed: 688, rejected: 312, shadowRejected: 0, shed: 0, level: 0 }, topKeys: [{ key: 'ip=10.0.0.1', rejected: 40 }, { key: 'ip=10.0.0.2', rejected: 12 }] },
    { rule: 'per-user', kind: 'limit', live: { allowed: 0, rejected: 0, shadowRejected: 0, shed: 0, level: 0 }, preview: { allowed: 90, rejected: 10, shadowRejected: 0, shed: 0, level: 0 }, topKeys: [{ key: 'header:X-User=#0123456789abcdef01234567', rejected: 10 }] },
    { rule: 'catalog', kind: 'limit', live: { allowed: 50, rejected: 50, shadowRejected: 0, shed: 0, level: 0 }, preview: { allowed: 90, rejected: 10, shadowRejected: 0, shed: 0, level: 0 }, topKeys: [] },
    { rule: 'everything', kind: 'limit', live: { allowed: 10, rejected: 0, shadowRejected: 0, shed: 0, level: 0 }, preview: { allowed: 5, rejected: 5, shadowRejected: 0, shed: 0, level: 0 }, topKeys: [{ key: 'global', rejected: 5 }] },
  ],
};

const limits = [
  { id: 'orders-per-ip', key: ['ip'], rate: 10 },
  { id: 'per-user', key: ['ip', 'header:X-User'], scope: 'cluster', rate: 5 },
  { id: 'catalog', key: ['route'], rate: 100 },
  { id: 'everything', key: ['global'], rate: 5 },
] as Limit[];

describe('durationError', () => {
  it.each(['10m', '30m', '90s', '1m30s', '29m59s'])('accepts %s', (d) => expect(durationError(d)).toBeUndefined());
  it.each([
    { in: '', err: 'Enter how long' },
    { in: '10', err: 'a number and a unit' },
    { in: 'ten minutes', err: 'a number and a unit' },
    { in: '0s', err: 'more than 0' },
    { in: '31m', err: 'At most 30m (31m is longer)' },
    { in: '1h', err: 'At most 30m' },
  ])('refuses "$in"', (c) => expect(durationError(c.in)).toContain(c.err));
});

describe('previewSelector', () => {
  it('empty is every node', () => expect(previewSelector('  ')).toEqual({ selector: {} }));
  it('reads labels', () => expect(previewSelector('zone=a, pool=canary')).toEqual({ selector: { zone: 'a', pool: 'canary' } }));
  it('names the bad part', () => expect(previewSelector('pool=').error).toBe('Label value "" of pool must be 1 to 63 letters, digits or . _ / -; write labels as key=value, comma separated.'));
});

describe('server refusals', () => {
  const bad = new ApiError(400, { type: 'about:blank', title: 'invalid', status: 400, code: 'EINVALID', errors: [{ path: 'duration', message: 'must be positive and at most 30m0s' }, { path: 'selector.zone', message: 'bad value' }] });
  it('puts field errors at their fields', () => expect(fieldErrors(bad)).toEqual({ duration: 'The server refused it: must be positive and at most 30m0s.', selector: 'The server refused selector.zone: bad value.' }));
  it('titles a conflict', () => expect(startErrorTitle(new ApiError(409, { type: 'about:blank', title: 'conflict', status: 409, code: 'ECONFLICT' }))).toBe('The preview did not start: conflict'));
  it('titles a refusal', () => expect(startErrorTitle(new ApiError(403, { type: 'about:blank', title: 'forbidden', status: 403, code: 'EFORBIDDEN' }))).toBe('The preview did not start: not allowed'));
  it('ignores other errors', () => expect(fieldErrors(new Error('x'))).toEqual({}));
  it('names the change whose preview blocks a start', () =>
    expect(conflictChange(new ApiError(409, { type: 'about:blank', title: 'conflict', status: 409, code: 'ECONFLICT', detail: 'change 6 of namespace "shop" is being previewed until 2026-12-04T22:39:23Z; stop it first' }))).toBe(6));
  it('no change for other conflicts', () =>
    expect(conflictChange(new ApiError(409, { type: 'about:blank', title: 'conflict', status: 409, code: 'ECONFLICT', detail: 'change 6 is published: only an open or approved change is previewed' }))).toBeUndefined());
});

describe('pct', () => {
  it.each([
    { in: null, want: '—' },
    { in: 0, want: '0.0\u00a0%' },
    { in: 0.0004, want: '<0.1\u00a0%' },
    { in: 0.312, want: '31.2\u00a0%' },
    { in: 1, want: '100.0\u00a0%' },
  ])('$in', (c) => expect(pct(c.in)).toBe(c.want));
});

describe('keyInfo', () => {
  it.each([
    { key: 'ip=10.0.0.1', want: { hashed: false, truncated: false } },
    { key: 'global', want: { hashed: false, truncated: false } },
    { key: 'route=orders', want: { hashed: false, truncated: false } },
    { key: 'ip=10.0.0.1|header:X-User=#0123456789abcdef01234567', want: { hashed: true, truncated: false } },
    { key: 'ip=2001:db8::1|cookie:session=#0123456789ab…#89abcdef', want: { hashed: true, truncated: true } },
    { key: 'route=a-very-long-route-id-that-goes-on-and-on-and-on-…#01234567', want: { hashed: false, truncated: true } },
  ])('$key', (c) => expect(keyInfo(c.key)).toEqual(c.want));
});

describe('nounOf', () => {
  it.each([
    { key: ['ip'], want: 'client' },
    { key: ['ip/24'], want: 'client' },
    { key: ['ip', 'header:X-User'], want: 'key' },
    { key: ['global'], want: undefined },
    { key: [], want: undefined },
  ])('$key', (c) => expect(nounOf({ id: 'x', key: c.key } as Limit)).toBe(c.want));
  it('a rule the page does not know is keyed', () => expect(nounOf(undefined)).toBe('key'));
});

describe('previewRows', () => {
  const rows = previewRows(base, limits);
  it('computes the reject shares', () => {
    expect(rows[0].live.rate).toBeCloseTo(0.004);
    expect(rows[0].preview.rate).toBeCloseTo(0.312);
    expect(rows[1].live.rate).toBeNull();
  });
  it('marks the rules that would reject more', () => expect(rows.map((r) => r.worse)).toEqual([true, true, false, true]));
  it('marks cluster limits approximate', () => expect(rows.map((r) => r.approximate)).toEqual([false, true, false, false]));
  it('flags hashed keys', () => expect(rows[1].topKeys[0].info.hashed).toBe(true));
  it('counts the distinct reported keys', () => expect(rows.map((r) => r.keys)).toEqual([2, 1, 0, 1]));
  it('shows a rule of an unknown kind with its unknown fields', () => {
    const p = { ...base, rules: [...base.rules, { rule: 'orders-degrade', kind: 'degrade', level: 2, shed: { shed: 40, allowed: 60 }, steps: [1, 2] }] } as unknown as Preview;
    const r = previewRows(p, limits)[4];
    expect(r).toMatchObject({ rule: 'orders-degrade', kind: 'degrade', worse: false, keys: 0, noun: 'key', topKeys: [] });
    expect(r.live.rate).toBeNull();
    expect(r.extras).toEqual(['level: 2', 'shed: shed 40, allowed 60', 'steps: 2 entries']);
  });
});

describe('summaryLine', () => {
  const rows = previewRows(base, limits);
  it('says what the approver approves', () =>
    expect(summaryLine(rows[0])).toBe('If approved: limit orders-per-ip would reject 31.2\u00a0% of requests from at least 2 clients; today 0.4\u00a0%.'));
  it('says when no live rule has that id, and that a cluster limit is approximate', () =>
    expect(summaryLine(rows[1])).toBe(
      'If approved: limit per-user would reject 10.0\u00a0% of requests from at least 1 key; today no live requests reached a rule of that id. (approximate: a cluster limit, each node judged alone)',
    ));
  it('a global limit has no one to count', () => expect(summaryLine(rows[3])).toBe('If approved: limit everything would reject 50.0\u00a0% of requests; today 0.0\u00a0%.'));
});

describe('clientsAffected', () => {
  const counted: Preview = {
    ...base,
    rules: base.rules.map((r, i) => (i === 0 ? { ...r, clientsAffected: { count: 57, approximate: true } } : i === 1 ? { ...r, clientsAffected: { count: 1, approximate: false } } : r)),
  };
  const rows = previewRows(counted, limits);
  it('reads the counted clients, and leaves them out when absent', () => {
    expect(rows[0].clients).toEqual({ count: 57, approximate: true });
    expect(rows[2].clients).toBeUndefined();
    expect(rows[0].extras).toEqual([]);
  });
  it('says about how many clients when several nodes counted', () =>
    expect(summaryLine(rows[0])).toBe('If approved: limit orders-per-ip would reject 31.2\u00a0% of requests from about 57 clients; today 0.4\u00a0%.'));
  it('an exact count replaces the top-keys lower bound', () =>
    expect(summaryLine(rows[1])).toBe(
      'If approved: limit per-user would reject 10.0\u00a0% of requests from 1 key; today no live requests reached a rule of that id. (approximate: a cluster limit, each node judged alone)',
    ));
});

describe('endedLine', () => {
  it.each([
    { reason: 'stopped', want: 'was stopped' },
    { reason: 'expired', want: 'ran its full duration' },
    { reason: 'published', want: 'ended when the change was published' },
    { reason: 'change gone', want: 'ended (change gone)' },
    { reason: undefined, want: 'ended' },
  ])('$reason', (c) => expect(endedLine(c.reason)).toBe(c.want));
});

describe('timeLeft', () => {
  const until = '2026-12-04T22:10:00Z';
  const at = (s: string) => new Date(s).getTime();
  it.each([
    { now: '2026-12-04T22:00:48Z', want: '9 min 12 s left' },
    { now: '2026-12-04T22:09:30Z', want: '30 s left' },
    { now: '2026-12-04T22:10:00Z', want: 'ended' },
  ])('$now', (c) => expect(timeLeft(until, at(c.now))).toBe(c.want));
});

describe('keepLast', () => {
  const now = '2026-12-04T22:11:00Z';
  const ended: Preview = { ...base, state: 'done', nodes: [], rules: base.rules.map((r) => ({ ...r, preview: { allowed: 0, rejected: 0, shadowRejected: 0, shed: 0, level: 0 }, topKeys: [] })) };
  it('takes the first answer', () => expect(keepLast(undefined, base, now)).toBe(base));
  it('no preview is null', () => expect(keepLast(undefined, null, now)).toBeNull());
  it('keeps the last figures when the nodes stop reporting an ended preview', () => {
    const k = keepLast(base, ended, now);
    expect(k).toMatchObject({ state: 'done', kept: now, nodes: ['gw-a', 'gw-b'] });
    expect(k?.rules[0].preview.rejected).toBe(312);
    expect(keepLast(k, ended, '2026-12-04T22:12:00Z')?.kept).toBe(now);
  });
  it('keeps the last figures of a stopped preview', () => expect(keepLast(base, null, now)).toMatchObject({ state: 'stopped', kept: now }));
  it('drops a stopped preview nobody reported', () => expect(keepLast({ ...base, nodes: [] }, null, now)).toBeNull());
  it('a new preview replaces the kept one', () => {
    const next = { ...base, since: '2026-12-04T22:20:00Z', nodes: [] };
    expect(keepLast({ ...base, kept: now, state: 'stopped' }, next, now)).toBe(next);
  });
  it("a finished preview is the control plane's figures, whatever the page saw", () => {
    const finished: Preview = { ...base, state: 'finished', endedAt: now, reason: 'stopped', nodes: ['gw-a'] };
    expect(keepLast({ ...base, kept: now, state: 'stopped' }, finished, now)).toBe(finished);
    expect(keepLast(undefined, finished, now)).toBe(finished);
  });
  it('a running preview with no report yet is shown as it is', () => {
    const next = { ...base, nodes: [] };
    expect(keepLast(base, next, now)).toBe(next);
  });
});
