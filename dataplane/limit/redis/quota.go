package redislimit

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/limit"
)

// quotaScript counts a quota's units in one key per calendar (or fixed)
// period: KEYS[1] is <prefix><ns>:{<limit id>:<key>}:q:<period start, Unix
// seconds>, so that the count survives gateway restarts and rule swaps
// (the key does not depend on the rate), a raised quota admits the
// difference at once (the quota is an argument), and a new period is a new
// key. ARGV: [1] quota, [2] cost to take (0: none), [3] units to give back,
// [4] the key's expiry (Unix ms: the period's end plus a day), [5] the
// period's reset in µs (echoed). It answers like every script: {granted,
// remaining, reset µs, retry µs, repaired}. A value that is not a
// non-negative integer is impossible state: deleted, counted as fresh and
// reported repaired.
var quotaScript = redis.NewScript(`
local quota, cost, ret, expat, reset = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local repaired = 0
local raw = redis.call('GET', KEYS[1])
local used = 0
if raw then
  used = tonumber(raw)
  if used == nil or used ~= used or used < 0 or used ~= math.floor(used) or used > 1e15 then
    redis.call('DEL', KEYS[1])
    used = 0
    repaired = 1
  end
end
if ret > 0 and used > 0 then
  used = math.max(0, used - ret)
  redis.call('SET', KEYS[1], string.format('%d', used), 'PXAT', expat)
end
local granted = 0
if cost > 0 and used + cost <= quota then
  used = used + cost
  granted = cost
  redis.call('SET', KEYS[1], string.format('%d', used), 'PXAT', expat)
end
local retry = 0
if cost > 0 and granted == 0 then
  retry = reset
  if cost > quota then retry = -1 end
end
return {granted, quota - used, reset, retry, repaired}
`)

// quota is an exact count per period in Redis (api.Quota): one script call
// per decision.
type quota struct {
	*rule
	l     api.Limit
	wall  func() time.Time
	ns    string
	usage *quotaUsage
}

func (s *Store) newQuota(ns string, l api.Limit) (limit.Limiter, error) {
	if l.Rate <= 0 {
		return nil, fmt.Errorf("cluster limit %q: rate must be > 0", l.ID)
	}
	if _, _, ok := l.QuotaWindow(time.Now()); !ok {
		return nil, fmt.Errorf("cluster limit %q: a quota needs a calendar in a known timezone or a period", l.ID)
	}
	period := l.NominalPeriod()
	r := &rule{s: s, id: l.ID, script: quotaScript, suffix: "}:q:", period: period, periodUS: period.Microseconds(),
		rate: l.Rate, burst: l.Rate, policy: l.OnStoreError}
	if r.policy == "" {
		r.policy = api.OnStoreErrorLocal
	}
	if ns != "" {
		r.prefix = s.set.Prefix + ns + ":{" + l.ID + ":"
	} else {
		r.prefix = s.set.Prefix + "{" + l.ID + ":"
	}
	r.local = newLocalFallback(l.Rate, l.Rate, period, s.nodes, s.set.MaxKeys)
	wall := s.set.Wall
	if wall == nil {
		wall = time.Now
	}
	return &quota{rule: r, l: l, wall: wall, ns: ns, usage: s.usageFor(ns, l.ID, "")}, nil
}

// SetTier implements limit.TierSetter: the quota decides for tier of its
// limit, and its usage is that tier's.
func (q *quota) SetTier(tier string) { q.usage = q.s.usageFor(q.ns, q.l.ID, tier) }

// window returns the Redis key of k for the period holding now, the key's
// expiry (Unix ms), the time left until the period ends and its start.
func (q *quota) window(k string) (key string, expat int64, reset time.Duration, start time.Time) {
	now := q.wall()
	start, end, _ := q.l.QuotaWindow(now)
	return q.key(k) + strconv.FormatInt(start.Unix(), 10), end.Add(24 * time.Hour).UnixMilli(), end.Sub(now), start
}

// Take implements limit.Limiter with one script call: it takes cost units
// of the current period's quota, or none.
func (q *quota) Take(ctx context.Context, key string, cost int64, now int64) (limit.Decision, error) {
	rk, expat, reset, start := q.window(key)
	rp, err := q.s.run(ctx, q.script, rk, q.rate, cost, 0, expat, reset.Microseconds())
	if err != nil {
		return q.fallback(key, cost, now), q.errorf(err)
	}
	q.usage.observe(start, q.rate-rp.remaining, rp.granted, q.rate)
	d := limit.Decision{Allowed: rp.granted > 0, Limit: q.rate, Remaining: rp.remaining, Reset: reset}
	if !d.Allowed {
		d.RetryAfter = reset
	}
	return d, nil
}

// Refund implements limit.Limiter: it gives cost units back to the current
// period's count.
func (q *quota) Refund(ctx context.Context, key string, cost int64, now int64) {
	if q.s.open.Load() {
		q.local.refund(key, cost, now)
		return
	}
	rk, expat, reset, _ := q.window(key)
	_, _ = q.s.run(ctx, q.script, rk, q.rate, 0, cost, expat, reset.Microseconds())
}
