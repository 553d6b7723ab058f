package redislimit

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/limit"
)

// Cluster returns the factory limit.Compile takes as Options.Cluster, for
// the rule set of namespace ns: it compiles one scope: cluster limit into a
// limit.Limiter backed by this Store. Keys are
//
//	<prefix><ns>:{<limit id>:<key>}:<tb|fw|sw>
//
// or, for a limit that names a shared bucket (api.Limit.Bucket; its key is
// the values-only text, classify.Key.ValueText),
//
//	<prefix>~bucket:{<bucket>:<key>}:<tb|fw|sw>:<rate>/<period µs>/<burst>
//
// with the limited key's '{', '}' and '%' percent-escaped, so that the hash
// tag holds the whole key and every key one decision touches sits in one
// Redis Cluster slot. The factory fails for an algorithm Redis scope does not
// support, a rate that is not positive or a period under 1 ms. The factory
// and the limiters it returns are safe for concurrent use; a limiter keeps
// local state (batched leases, the local fallback) for at most
// Settings.MaxKeys keys. An unset mode means exact and an unset onStoreError
// means local, as api's canonical form does.
func (s *Store) Cluster(ns string) func(api.Limit) (limit.Limiter, error) {
	return func(l api.Limit) (limit.Limiter, error) { return s.newLimiter(ns, l) }
}

func (s *Store) newLimiter(ns string, l api.Limit) (limit.Limiter, error) {
	if l.Algorithm == api.Quota {
		return s.newQuota(ns, l)
	}
	if l.Rate <= 0 {
		return nil, fmt.Errorf("cluster limit %q: rate must be > 0", l.ID)
	}
	period := l.Period.D()
	if period <= 0 {
		period = time.Second
	}
	if period < time.Millisecond {
		return nil, fmt.Errorf("cluster limit %q: period must be at least 1ms", l.ID)
	}
	burst := l.Burst
	if burst <= 0 {
		burst = l.Rate
	}
	r := &rule{
		s:        s,
		id:       l.ID,
		period:   period,
		periodUS: period.Microseconds(),
		rate:     l.Rate,
		burst:    burst,
		policy:   l.OnStoreError,
	}
	switch l.Algorithm {
	case api.TokenBucket:
		r.script, r.suffix, r.returns = tokenBucketScript, "}:tb", true
	case api.FixedWindow:
		r.script, r.suffix, r.window = fixedWindowScript, "}:fw", true
		r.burst = l.Rate
	case api.SlidingWindow:
		r.script, r.suffix = slidingWindowScript, "}:sw"
		r.burst = l.Rate
	default:
		return nil, fmt.Errorf("cluster limit %q: algorithm %q has no redis implementation", l.ID, l.Algorithm)
	}
	r.argPeriod, r.argRate, r.argBurst = r.periodUS, r.rate, r.burst
	if r.policy == "" {
		r.policy = api.OnStoreErrorLocal
	}
	switch {
	case l.Bucket != "":
		// A shared bucket: no namespace, no limit id, and the parameters in
		// the key, so that limits naming one bucket with other parameters
		// keep apart budgets instead of rescaling one back and forth. '~'
		// is no namespace's, so no namespaced key can collide.
		r.prefix = s.set.Prefix + "~bucket:{" + l.Bucket + ":"
		r.suffix += fmt.Sprintf(":%d/%d/%d", r.rate, r.periodUS, r.burst)
	case ns != "":
		r.prefix = s.set.Prefix + ns + ":{" + l.ID + ":"
	default:
		r.prefix = s.set.Prefix + "{" + l.ID + ":"
	}
	r.local = newLocalFallback(l.Rate, r.burst, period, s.nodes, s.set.MaxKeys)
	if l.Mode == api.ModeBatched {
		b := &batched{rule: r, seed: maphash.MakeSeed(), maxPerShard: max(s.set.MaxKeys/leaseShards, 1)}
		b.lmax = max(1, int64(float64(r.burst)*s.set.LeaseFraction))
		for i := range b.shards {
			b.shards[i].m = make(map[string]*lease)
		}
		return b, nil
	}
	return &exact{rule: r}, nil
}

// rule is what exact and batched limiters share.
type rule struct {
	s        *Store
	id       string
	script   *redis.Script
	prefix   string // <prefix><ns>:{<id>:
	suffix   string // }:tb
	period   time.Duration
	periodUS int64
	rate     int64
	burst    int64
	window   bool // fixed window: a lease ends with its window
	returns  bool // token bucket: unused lease units go back
	policy   api.StoreErrorPolicy
	local    *localFallback
	// The script's constant arguments, boxed once rather than per call.
	argPeriod, argRate, argBurst any
}

// key is the Redis key of a limited key.
func (r *rule) key(k string) string {
	if strings.ContainsAny(k, "{}%") {
		k = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D").Replace(k)
	}
	return r.prefix + k + r.suffix
}

// call runs the rule's script.
func (r *rule) call(ctx context.Context, key string, want, need, demand, low, ret int64) (reply, error) {
	return r.s.run(ctx, r.script, key, r.argPeriod, r.argRate, r.argBurst, want, need, demand, low, ret)
}

// fallback is the decision of the failure policy.
func (r *rule) fallback(key string, cost, now int64) limit.Decision {
	switch r.policy {
	case api.OnStoreErrorAllow:
		return limit.Decision{Allowed: true, Limit: r.rate, Remaining: r.rate}
	case api.OnStoreErrorDeny:
		return limit.Decision{Limit: r.rate, Reset: r.period, RetryAfter: r.s.set.ProbeEvery}
	default:
		d := r.local.take(key, cost, now)
		d.Limit = r.rate
		return d
	}
}

func (r *rule) errorf(err error) error { return fmt.Errorf("cluster limit %q: %w", r.id, err) }

// decision turns a script reply into a Decision.
func (r *rule) decision(rp reply, extra int64) limit.Decision {
	d := limit.Decision{Allowed: rp.granted > 0, Limit: r.rate, Remaining: rp.remaining + extra, Reset: rp.reset}
	if !d.Allowed {
		d.RetryAfter = rp.retry
		if rp.retry < 0 {
			d.RetryAfter = r.period
		}
	}
	return d
}

// exact asks Redis on every decision.
type exact struct{ *rule }

// Take implements limit.Limiter with one script call.
func (l *exact) Take(ctx context.Context, key string, cost int64, now int64) (limit.Decision, error) {
	rp, err := l.call(ctx, l.key(key), cost, cost, cost, 0, 0)
	if err != nil {
		return l.fallback(key, cost, now), l.errorf(err)
	}
	return l.decision(rp, 0), nil
}

// Refund implements limit.Limiter: it gives cost units back in Redis, or to
// the local fallback while the breaker is open.
func (l *exact) Refund(ctx context.Context, key string, cost int64, now int64) {
	if l.s.open.Load() {
		l.local.refund(key, cost, now)
		return
	}
	_, _ = l.call(ctx, l.key(key), 0, 0, 0, 0, cost)
}

// batched spends leases of units locally; see the package doc.
type batched struct {
	*rule
	lmax        int64 // the largest lease, in units
	seed        maphash.Seed
	maxPerShard int
	shards      [leaseShards]leaseShard
}

const leaseShards = 64

type leaseShard struct {
	mu sync.Mutex
	m  map[string]*lease
}

// lease is one key's local state on this node.
type lease struct {
	mu          sync.Mutex
	tokens      int64 // units leased and not spent
	expires     int64 // tokens are spendable until then
	deniedUntil int64 // Redis said no; deny locally until then
	remaining   int64 // the global budget left at the last reply
	reset       time.Duration
	retry       time.Duration
	used        int64   // units spent since the last refill
	lastRefill  int64   // when the last refill was sent
	rate        float64 // observed units per nanosecond on this node
	waiting     int64   // units wanted by Takes waiting for the refill
	inflight    chan struct{}
	failed      error // the last refill's error, nil after a success
}

func (b *batched) lease(key string) *lease {
	sh := &b.shards[maphash.String(b.seed, key)%leaseShards]
	sh.mu.Lock()
	ls := sh.m[key]
	if ls == nil {
		if len(sh.m) >= b.maxPerShard {
			n := 0
			for k, v := range sh.m { // forget a key no Take is refilling
				if v.mu.TryLock() {
					idle := v.inflight == nil
					v.mu.Unlock()
					if idle {
						delete(sh.m, k)
						break
					}
				}
				if n++; n > 8 {
					break
				}
			}
		}
		ls = &lease{}
		sh.m[key] = ls
	}
	sh.mu.Unlock()
	return ls
}

// Take implements limit.Limiter: it spends the node's lease for key, and
// refills it (one refill in flight per key) when it is spent or expired.
func (b *batched) Take(ctx context.Context, key string, cost int64, now int64) (limit.Decision, error) {
	ls := b.lease(key)
	var timer *time.Timer // bounds all waiting of this Take to one Timeout
	var waitStart time.Time
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	ls.mu.Lock()
	for {
		if ls.tokens >= cost && now < ls.expires {
			ls.tokens -= cost
			ls.used += cost
			d := limit.Decision{Allowed: true, Limit: b.rate, Remaining: ls.remaining + ls.tokens, Reset: ls.reset}
			ls.mu.Unlock()
			return d, nil
		}
		if now < ls.deniedUntil {
			d := limit.Decision{Limit: b.rate, Remaining: ls.remaining, Reset: ls.reset, RetryAfter: time.Duration(ls.deniedUntil - now)}
			ls.mu.Unlock()
			return d, nil
		}
		if ls.inflight == nil {
			break
		}
		// Another Take is refilling: wait for it, within one deadline.
		ch := ls.inflight
		ls.waiting += cost
		ls.mu.Unlock()
		if timer == nil {
			waitStart = time.Now()
			timer = time.NewTimer(b.s.set.Timeout)
		}
		var err error
		select {
		case <-ch:
		case <-timer.C:
			err = fmt.Errorf("waiting for a lease: %w", context.DeadlineExceeded)
		case <-ctx.Done():
			err = fmt.Errorf("waiting for a lease: %w", ctx.Err())
		}
		if err != nil {
			select {
			case <-ch: // the refill ended too: use it
				err = nil
			default:
			}
		}
		ls.mu.Lock()
		ls.waiting -= cost
		now = b.s.set.Clock()
		if err == nil && ls.failed != nil && ls.tokens < cost {
			err = ls.failed // the refill we waited for failed: do not ask again
		}
		if err != nil {
			ls.mu.Unlock()
			return b.fallback(key, cost, now), b.errorf(err)
		}
		if ls.tokens < cost && ls.remaining < cost && ls.deniedUntil <= now {
			// The refill we waited for left the shared budget below cost and
			// other Takes spent what it brought: Redis has just said no.
			d := limit.Decision{Limit: b.rate, Remaining: ls.remaining, Reset: ls.reset,
				RetryAfter: time.Duration(float64(cost-ls.remaining) * float64(b.period) / float64(b.rate))}
			ls.mu.Unlock()
			return d, nil
		}
	}
	if timer != nil {
		// This Take waited already: its own call gets what is left of
		// its one Timeout.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, waitStart.Add(b.s.set.Timeout))
		defer cancel()
	}
	return b.refill(ctx, ls, key, cost, now)
}

// refill asks Redis for a lease; ls.mu is held on entry and released.
func (b *batched) refill(ctx context.Context, ls *lease, key string, cost, now int64) (limit.Decision, error) {
	var ret int64
	if b.returns {
		ret = ls.tokens // expired or too few: give them back
	}
	ls.tokens = 0
	if ls.lastRefill != 0 && now > ls.lastRefill {
		obs := float64(ls.used) / float64(now-ls.lastRefill)
		ls.rate = (ls.rate + obs) / 2
	}
	top := max(b.lmax, cost)
	want := int64(math.Ceil(ls.rate * float64(b.s.set.LeaseTTL)))
	demand := min(cost+ls.waiting, top)
	want = min(max(want, demand), top)
	low := b.lmax * b.s.nodes()
	ch := make(chan struct{})
	ls.inflight = ch
	ls.mu.Unlock()

	rp, err := b.call(ctx, b.key(key), want, cost, demand, low, ret)

	ls.mu.Lock()
	ls.inflight = nil
	close(ch)
	if err != nil {
		ls.failed = err
		ls.mu.Unlock()
		return b.fallback(key, cost, now), b.errorf(err)
	}
	ls.failed = nil
	ls.remaining, ls.reset, ls.retry = rp.remaining, rp.reset, rp.retry
	if rp.granted == 0 {
		wait := b.s.set.LeaseTTL
		if rp.retry >= 0 {
			wait = min(rp.retry, wait)
		}
		ls.deniedUntil = now + int64(wait)
		d := b.decision(rp, 0)
		ls.mu.Unlock()
		return d, nil
	}
	ttl := min(b.s.set.LeaseTTL, b.period)
	if b.window {
		ttl = min(ttl, rp.reset)
	}
	ls.tokens = rp.granted - cost
	ls.expires = now + int64(ttl)
	ls.used = cost
	ls.lastRefill = now
	ls.deniedUntil = 0
	d := b.decision(rp, ls.tokens)
	ls.mu.Unlock()
	return d, nil
}

// Refund implements limit.Limiter: the units go back into the node's lease
// (never above the largest lease), or to the local fallback while the
// breaker is open.
func (b *batched) Refund(ctx context.Context, key string, cost int64, now int64) {
	if b.s.open.Load() {
		b.local.refund(key, cost, now)
		return
	}
	ls := b.lease(key)
	ls.mu.Lock()
	// A window's expired lease is gone with its window; a token bucket's
	// expired units go back to Redis with the next refill.
	if now < ls.expires || b.returns {
		ls.tokens = min(ls.tokens+cost, max(b.lmax, cost))
		ls.used = max(ls.used-cost, 0)
	}
	ls.mu.Unlock()
}
