package redislimit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/limit"
)

// localFallback is the in-memory limiter of onStoreError: local: a
// limit.Local token bucket (GCRA, at most maxKeys keys, least recently used
// forgotten first) enforcing this node's share of the rule, its rate and
// burst divided by the live nodes (burst rounded up, at least 1), for every
// algorithm: while Redis is away, a bucket with capacity burst÷nodes refilled
// at rate÷nodes is the closest local stand-in for a window too. The share is
// rate units per nodes×period, so no precision is lost to the division.
// When the node count changes the share is rebuilt and its keys carried
// over at the same fill (limit.Carried, as across a reload). Safe for concurrent use.
type localFallback struct {
	rate, burst int64 // whole cluster
	period      time.Duration
	nodes       func() int64
	maxKeys     int

	mu    sync.Mutex // serializes rebuilding the share
	share atomic.Pointer[localShare]
}

// localShare is the Local for one node count.
type localShare struct {
	nodes int64
	l     *limit.Local
}

func newLocalFallback(rate, burst int64, period time.Duration, nodes func() int64, maxKeys int) *localFallback {
	return &localFallback{rate: rate, burst: burst, period: period, nodes: nodes, maxKeys: maxKeys}
}

// current returns the Local of the live node count at now.
func (f *localFallback) current(now int64) *limit.Local {
	n := f.nodes()
	if sh := f.share.Load(); sh != nil && sh.nodes == n {
		return sh.l
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.share.Load()
	if old != nil && old.nodes == n {
		return old.l
	}
	l, err := f.build(old, n, now)
	if err != nil {
		return nil // unreachable: newLimiter checked the rate and period
	}
	f.share.Store(&localShare{nodes: n, l: l})
	return l
}

// build returns the share of n nodes, carrying old's keys over.
func (f *localFallback) build(old *localShare, n, now int64) (*limit.Local, error) {
	l := api.Limit{
		Algorithm: api.TokenBucket,
		Rate:      f.rate,
		Period:    api.Duration(f.period * time.Duration(n)),
		Burst:     max((f.burst+n-1)/n, 1),
		Key:       []string{"key"}, // any key but "global": one state per key
	}
	if old == nil {
		return limit.NewLocal(l, f.maxKeys)
	}
	return limit.Carried(old.l, l, f.maxKeys, now)
}

// take decides locally. Limit is left to the caller.
func (f *localFallback) take(key string, cost, now int64) limit.Decision {
	l := f.current(now)
	if l == nil {
		return limit.Decision{RetryAfter: f.period}
	}
	d, _ := l.Take(context.Background(), key, cost, now)
	return d
}

// refund gives units back, up to the capacity.
func (f *localFallback) refund(key string, cost, now int64) {
	if l := f.current(now); l != nil {
		l.Refund(context.Background(), key, cost, now)
	}
}
