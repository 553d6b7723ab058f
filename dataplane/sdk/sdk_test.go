package sdk

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/dataplane/source"
)

// testClock is an injected clock: tests move it, never sleep.
type testClock struct{ ns atomic.Int64 }

func newClock() *testClock {
	c := &testClock{}
	c.ns.Store(int64(time.Hour))
	return c
}
func (c *testClock) now() int64          { return c.ns.Load() }
func (c *testClock) add(d time.Duration) { c.ns.Add(int64(d)) }
func discard() *slog.Logger              { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
func ok(context.Context) error           { return nil }
func fail(context.Context) error         { return errors.New("boom") }
func writeRules(tb testing.TB, doc string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "rules.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// newGuard starts a Guard on doc (a rules file) with clock c.
func newGuard(tb testing.TB, doc string, c *testClock) *Guard {
	tb.Helper()
	g, err := New(context.Background(), Config{Namespace: "orders-svc", RulesFile: writeRules(tb, doc), Now: c.now, Logger: discard()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { g.Close() })
	return g
}

const header = "namespace: orders-svc\nkind: service\n"

// rejected returns err's *Rejected or fails.
func rejected(tb testing.TB, err error) *Rejected {
	tb.Helper()
	var rej *Rejected
	if !errors.As(err, &rej) {
		tb.Fatalf("err = %v; want a *Rejected", err)
	}
	return rej
}

// TestDoTokenBucket: a token bucket keyed on sdk:user admits each user's
// burst, refuses the next call without running it (a *Rejected naming the
// rule, 429, Retry-After), keeps users apart, and refills with the clock.
func TestDoTokenBucket(t *testing.T) {
	t.Parallel()
	c := newClock()
	g := newGuard(t, header+`limits:
  - {id: per-user, resources: [orders.Create], key: [sdk:user], algorithm: token_bucket, rate: 2, period: 1s}
`, c)
	ctx := context.Background()
	alice, bob := Keys{"user": "alice"}, Keys{"user": "bob"}
	for i := range 2 {
		if err := g.Do(ctx, "orders.Create", alice, ok); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	ran := false
	err := g.Do(ctx, "orders.Create", alice, func(context.Context) error { ran = true; return nil })
	rej := rejected(t, err)
	if ran || rej.Kind != "limit" || rej.Rule != "per-user" || rej.Status != 429 || rej.RetryAfter != time.Second {
		t.Fatalf("ran=%v rejection %+v", ran, rej)
	}
	if !strings.Contains(err.Error(), `limit "per-user"`) {
		t.Fatalf("message %q", err)
	}
	if err := g.Do(ctx, "orders.Create", bob, ok); err != nil {
		t.Fatalf("bob: %v", err)
	}
	if err := g.Do(ctx, "orders.List", alice, ok); err != nil {
		t.Fatalf("a resource no rule names: %v", err)
	}
	c.add(500 * time.Millisecond) // one token back
	if err := g.Do(ctx, "orders.Create", alice, ok); err != nil {
		t.Fatalf("after refill: %v", err)
	}
	rejected(t, g.Do(ctx, "orders.Create", alice, ok))
}

// TestDoBreaker: fn's errors trip the breaker, which then refuses with 503
// for openFor; after it a probe runs, and a successful one closes it.
func TestDoBreaker(t *testing.T) {
	t.Parallel()
	c := newClock()
	g := newGuard(t, header+`breakers:
  - {id: db, resources: [db.Query], window: 10s, consecutiveFailures: 3, openFor: 5s, halfOpenProbes: 1}
`, c)
	ctx := context.Background()
	for range 3 {
		if err := g.Do(ctx, "db.Query", nil, fail); err == nil || err.Error() != "boom" {
			t.Fatalf("fn's error not returned: %v", err)
		}
	}
	rej := rejected(t, g.Do(ctx, "db.Query", nil, ok))
	if rej.Kind != "breaker" || rej.Rule != "db" || rej.Status != 503 || rej.RetryAfter != 5*time.Second {
		t.Fatalf("rejection %+v", rej)
	}
	c.add(5 * time.Second)
	if err := g.Do(ctx, "db.Query", nil, ok); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if err := g.Do(ctx, "db.Query", nil, ok); err != nil {
		t.Fatalf("after a successful probe: %v", err)
	}
}

// TestDoConcurrencyReleases: a concurrency slot is held while fn runs and
// given back when it returns, also when it panics; the panic is re-raised
// and counted as a failure.
func TestDoConcurrencyReleases(t *testing.T) {
	t.Parallel()
	c := newClock()
	g := newGuard(t, header+`limits:
  - {id: one-at-a-time, resources: [queue.Publish], algorithm: concurrency, rate: 1}
breakers:
  - {id: queue, resources: [queue.Publish], window: 10s, consecutiveFailures: 1, openFor: 5s}
`, c)
	ctx := context.Background()
	err := g.Do(ctx, "queue.Publish", nil, func(ctx context.Context) error {
		inner := g.Do(ctx, "queue.Publish", nil, ok)
		if rej := rejected(t, inner); rej.Rule != "one-at-a-time" {
			t.Errorf("inner rejection %+v", rej)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if r := recover(); r != "kaboom" {
				t.Fatalf("recovered %v; want the panic re-raised", r)
			}
		}()
		_ = g.Do(ctx, "queue.Publish", nil, func(context.Context) error { panic("kaboom") })
	}()
	// The slot came back, and the panic tripped the breaker (one failure).
	rej := rejected(t, g.Do(ctx, "queue.Publish", nil, ok))
	if rej.Kind != "breaker" {
		t.Fatalf("after a panic: %+v; want the breaker open", rej)
	}
	c.add(5 * time.Second)
	if err := g.Do(ctx, "queue.Publish", nil, ok); err != nil {
		t.Fatalf("the slot was not released: %v", err)
	}
}

// TestDoCallerGone: a call whose ctx was cancelled and that returns an
// error is not a failure of the resource.
func TestDoCallerGone(t *testing.T) {
	t.Parallel()
	c := newClock()
	g := newGuard(t, header+`breakers:
  - {id: db, resources: [db.Query], window: 10s, consecutiveFailures: 1, openFor: 5s}
`, c)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Do(ctx, "db.Query", nil, func(ctx context.Context) error { return ctx.Err() }); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if err := g.Do(context.Background(), "db.Query", nil, ok); err != nil {
		t.Fatalf("a cancelled call tripped the breaker: %v", err)
	}
}

// TestDoDegradeAndDrain: a degrade plan at level 2 sheds every call (503,
// the plan named); a drain refuses every guarded call, also of resources no
// rule names.
func TestDoDegradeAndDrain(t *testing.T) {
	t.Parallel()
	c := newClock()
	g := newGuard(t, header+`degrades:
  - {id: coupons, resources: [coupon.Issue], mode: manual, level: 2, fallback: {retryAfter: 30s}}
`, c)
	ctx := context.Background()
	rej := rejected(t, g.Do(ctx, "coupon.Issue", Keys{"user": "a"}, ok))
	if rej.Kind != "degrade" || rej.Rule != "coupons" || rej.Status != 503 || rej.RetryAfter != 30*time.Second {
		t.Fatalf("rejection %+v", rej)
	}
	g.Drain(true)
	if rej := rejected(t, g.Do(ctx, "anything", nil, ok)); rej.Rule != RuleDrained || rej.Status != 503 {
		t.Fatalf("drained: %+v", rej)
	}
	g.Drain(false)
	if err := g.Do(ctx, "anything", nil, ok); err != nil {
		t.Fatal(err)
	}
}

// TestApplyKeepsState: a new version that leaves a limit unchanged keeps
// its state (a user who spent their burst stays refused); a refused version
// keeps the last good one; a gateway document is refused.
func TestApplyKeepsState(t *testing.T) {
	t.Parallel()
	c := newClock()
	limits := `limits:
  - {id: per-user, resources: [orders.Create], key: [sdk:user], algorithm: token_bucket, rate: 1, period: 1m}
`
	g := newGuard(t, header+limits, c)
	ctx := context.Background()
	alice := Keys{"user": "alice"}
	if err := g.Do(ctx, "orders.Create", alice, ok); err != nil {
		t.Fatal(err)
	}
	v2 := header + limits + `breakers:
  - {id: db, resources: [db.Query], window: 10s, consecutiveFailures: 3, openFor: 5s}
`
	if err := g.apply(ctx, source.Update{Data: []byte(v2), Version: 2, Source: "test"}); err != nil {
		t.Fatal(err)
	}
	rejected(t, g.Do(ctx, "orders.Create", alice, ok))
	gw := "namespace: orders-svc\nroutes:\n  - {id: a, match: {pathPrefix: /}, upstream: {targets: [{url: 'http://127.0.0.1:1'}]}}\n"
	err := g.apply(ctx, source.Update{Data: []byte(gw), Version: 3, Source: "test"})
	if err == nil || !strings.Contains(err.Error(), "kind: service") {
		t.Fatalf("a gateway document: %v", err)
	}
	if st := g.Status(); st.Version != 2 || st.LastApplyError == "" {
		t.Fatalf("status %+v", st)
	}
	rejected(t, g.Do(ctx, "orders.Create", alice, ok))
}

// TestNewErrors: New names what is wrong with its Config or rules file.
func TestNewErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bad := writeRules(t, header+"limits:\n  - {id: l, resources: [x], key: [ip], algorithm: token_bucket, rate: 1}\n")
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{RulesFile: "x"}, "Namespace is required"},
		{Config{Namespace: "a"}, "one of Config.RulesFile and Config.Etcd"},
		{Config{Namespace: "a", Etcd: []string{"127.0.0.1:1"}}, "needs Config.TrustKeys"},
		{Config{Namespace: "orders-svc", RulesFile: bad}, "limits[0].key[0]"},
		{Config{Namespace: "other", RulesFile: bad}, "not this service's namespace"},
	} {
		tc.cfg.Logger = discard()
		g, err := New(ctx, tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v; want an error containing %q", tc.cfg, err, tc.want)
		}
		if g != nil {
			t.Errorf("New returned a Guard with an error")
		}
	}
}

// TestCloseStops: Close stops the file watch New started (the goroutine
// returns) and is safe twice; calls after it run unguarded.
func TestCloseStops(t *testing.T) {
	t.Parallel()
	c := newClock()
	g, err := New(context.Background(), Config{Namespace: "orders-svc", Logger: discard(), Now: c.now,
		RulesFile: writeRules(t, header+"limits:\n  - {id: l, resources: [x], algorithm: token_bucket, rate: 1, period: 1h}\n")})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Do(context.Background(), "x", nil, ok); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.group.Done():
	default:
		t.Fatal("the group still runs after Close")
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Do(context.Background(), "x", nil, ok); err != nil {
		t.Fatalf("after Close: %v", err)
	}
}
