package redislimit

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/api"
)

// wallClock is an injected wall clock.
type wallClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *wallClock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *wallClock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// countingHook counts the commands a client sends (a script run is one
// EVALSHA, or EVALSHA then EVAL the first time).
type countingHook struct{ n atomic.Int64 }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := strings.ToLower(cmd.Name()); name == "evalsha" || name == "eval" {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestQuotaMonthInRedis runs a monthly quota (Europe/Paris) against the
// machine's Redis with an injected clock: exact count, one script call per
// decision, the count kept by a new Store (a gateway restart) and by a
// rate change (a rule swap), a raised quota admitting the difference at
// once, RateLimit reset = time to the boundary, and a fresh quota at the
// first instant of the next month (Paris time, not UTC).
func TestQuotaMonthInRedis(t *testing.T) {
	t.Parallel()
	mustSharedRedis(t)
	prefix := freshPrefix(t)
	paris, _ := time.LoadLocation("Europe/Paris")
	clock := &wallClock{t: time.Date(2027, 1, 31, 23, 0, 0, 0, paris)}
	hook := &countingHook{}
	client := redis.NewClient(&redis.Options{Addr: sharedRedis, DisableIdentity: true})
	client.AddHook(hook)
	t.Cleanup(func() { client.Close() })
	store := func() *Store {
		st, err := NewWithClient(context.Background(), client, Settings{Prefix: prefix, Wall: clock.now, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	l := api.Limit{ID: "monthly", Algorithm: api.Quota, Rate: 3, Calendar: api.CalendarMonth, Timezone: "Europe/Paris", Scope: api.ScopeCluster, OnStoreError: api.OnStoreErrorDeny}
	lim := mustLimiter(t, store(), l)
	ctx := context.Background()
	for i := range 3 {
		before := hook.n.Load()
		d, err := lim.Take(ctx, "user{1}", 1, 0)
		if err != nil || !d.Allowed || d.Remaining != int64(2-i) {
			t.Fatalf("take %d: %+v %v", i, d, err)
		}
		if n := hook.n.Load() - before; n != 1 && !(i == 0 && n == 2) {
			t.Fatalf("take %d cost %d script calls", i, n)
		}
		if d.Reset != time.Hour {
			t.Fatalf("reset %s, want 1h to the Paris month boundary", d.Reset)
		}
	}
	if d, _ := lim.Take(ctx, "user{1}", 1, 0); d.Allowed || d.RetryAfter != time.Hour {
		t.Fatalf("fourth take: %+v", d)
	}
	// A gateway restart: a new Store and limiter see the same count.
	lim2 := mustLimiter(t, store(), l)
	if d, _ := lim2.Take(ctx, "user{1}", 1, 0); d.Allowed {
		t.Fatalf("after a restart the used count was lost: %+v", d)
	}
	// A rule swap that raises the quota to 5 admits the difference at once.
	l.Rate = 5
	lim3 := mustLimiter(t, store(), l)
	for i := range 2 {
		if d, _ := lim3.Take(ctx, "user{1}", 1, 0); !d.Allowed {
			t.Fatalf("raised quota, take %d refused: %+v", i, d)
		}
	}
	if d, _ := lim3.Take(ctx, "user{1}", 1, 0); d.Allowed {
		t.Fatalf("raised quota over-admitted: %+v", d)
	}
	// A refund gives a unit back.
	lim3.Refund(ctx, "user{1}", 1, 0)
	if d, _ := lim3.Take(ctx, "user{1}", 1, 0); !d.Allowed {
		t.Fatalf("after a refund: %+v", d)
	}
	// 23:59:59.999 Paris on January 31 is still January; 00:00 February 1 is a
	// new period (in UTC it is still January 31, 23:00).
	clock.set(time.Date(2027, 1, 31, 23, 59, 59, 999e6, paris))
	if d, _ := lim3.Take(ctx, "user{1}", 1, 0); d.Allowed {
		t.Fatalf("just before the boundary: %+v", d)
	}
	clock.set(time.Date(2027, 2, 1, 0, 0, 0, 0, paris))
	d, err := lim3.Take(ctx, "user{1}", 1, 0)
	if err != nil || !d.Allowed || d.Remaining != 4 {
		t.Fatalf("at the boundary: %+v %v", d, err)
	}
	if d.Reset != 28*24*time.Hour {
		t.Fatalf("February reset %s, want 28 days", d.Reset)
	}
	// The keys sit in one hash slot per limited key: {monthly:user%7B1%7D}.
	keys, err := client.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !strings.Contains(k, "{monthly:user%7B1%7D}:q:") {
			t.Errorf("key %q lacks the hash tag", k)
		}
		client.Del(ctx, k)
	}
	if len(keys) != 2 {
		t.Errorf("keys %q, want one per month", keys)
	}
}

// TestQuotaStoreDown checks the fail mode of a quota whose Redis is
// unreachable: deny, as onStoreError says.
func TestQuotaStoreDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	st := mustStore(t, Settings{URL: "redis://" + addr, Prefix: freshPrefix(t), Timeout: 50 * time.Millisecond})
	lim := mustLimiter(t, st, api.Limit{ID: "q", Algorithm: api.Quota, Rate: 10, Period: api.Duration(time.Hour), OnStoreError: api.OnStoreErrorDeny})
	d, err := lim.Take(context.Background(), "k", 1, 0)
	if err == nil || d.Allowed {
		t.Fatalf("store down, deny: %+v %v", d, err)
	}
}
