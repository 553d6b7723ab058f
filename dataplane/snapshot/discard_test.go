package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/limit"
	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/dataplane/proxy"
)

// countedLimiter is a cluster limiter that counts how many are open.
type countedLimiter struct {
	open   *atomic.Int64
	closed atomic.Bool
}

func (l *countedLimiter) Take(context.Context, string, int64, int64) (limit.Decision, error) {
	return limit.Decision{Allowed: true}, nil
}
func (l *countedLimiter) Refund(context.Context, string, int64, int64) {}
func (l *countedLimiter) Close() error {
	if !l.closed.Swap(true) {
		l.open.Add(-1)
	}
	return nil
}

func mustValid(tb testing.TB, doc string) *api.Valid {
	tb.Helper()
	rs, err := api.Decode([]byte(doc))
	if err != nil {
		tb.Fatal(err)
	}
	v, err := api.Validated(rs)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// TestFailedCompileRetainsNothing compiles a rule set that fails on its last
// limit after the router, a new upstream origin and a new cluster limiter
// were made, and checks that the failed compile released them all (the
// pooled origins, the open cluster limiters and the metric series are what
// they were before) while the snapshot in service keeps what it holds.
func TestFailedCompileRetainsNothing(t *testing.T) {
	t.Parallel()
	var open atomic.Int64
	cluster := func(string) func(api.Limit) (limit.Limiter, error) {
		return func(l api.Limit) (limit.Limiter, error) {
			if l.ID == "bad" {
				return nil, errors.New("store refused")
			}
			open.Add(1)
			return &countedLimiter{open: &open}, nil
		}
	}
	tr := proxy.NewTransport(proxy.Settings{})
	opts := Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Transport: tr, Cluster: cluster}
	doc := func(routes, limits string) string {
		d := "namespace: t\nroutes:\n" + routes
		if limits != "" {
			d += "limits:\n" + limits
		}
		return d
	}
	const routeA = "  - {id: a, match: {pathPrefix: /a}, upstream: {targets: [{url: \"http://127.0.0.1:1\"}]}}\n"
	const routeB = "  - {id: b, match: {pathPrefix: /b}, upstream: {targets: [{url: \"http://127.0.0.2:2\"}]}}\n"
	limitOf := func(id string) string {
		return fmt.Sprintf("  - {id: %s, algorithm: token_bucket, rate: 10, scope: cluster}\n", id)
	}

	tests := []struct {
		desc    string
		prev    string // "" for a first compile
		next    string
		wantErr string
	}{
		{"first compile fails", "", doc(routeA+routeB, limitOf("c1")+limitOf("bad")), "store refused"},
		{"next compile fails", doc(routeA, limitOf("c1")), doc(routeA+routeB, limitOf("c1")+limitOf("c2")+limitOf("bad")), "store refused"},
		{"next compile fails without redis", doc(routeA, ""), doc(routeA+routeB, limitOf("c2")+limitOf("c3")), "scope cluster needs --redis"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			// Not parallel: the cases share the transport and the counters.
			m := metrics.New()
			o := opts
			o.Metrics = m
			if tc.wantErr == "scope cluster needs --redis" {
				o.Cluster = nil
			}
			var prev *Snapshot
			if tc.prev != "" {
				var err error
				if prev, err = Compile(context.Background(), mustValid(t, tc.prev), Meta{Version: 1}, nil, o); err != nil {
					t.Fatal(err)
				}
				defer prev.Retire(nil)
			}
			origins, limiters, series := tr.Origins(), open.Load(), testutil.CollectAndCount(m.LimitDecisions)
			next, err := Compile(context.Background(), mustValid(t, tc.next), Meta{Version: 2}, prev, o)
			if err == nil {
				next.Retire(nil)
				t.Fatal("compile succeeded")
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if got := tr.Origins(); got != origins {
				t.Errorf("pooled origins %d after the failed compile, %d before", got, origins)
			}
			if got := open.Load(); got != limiters {
				t.Errorf("open cluster limiters %d after the failed compile, %d before", got, limiters)
			}
			if got := testutil.CollectAndCount(m.LimitDecisions); got != series {
				t.Errorf("limit decision series %d after the failed compile, %d before", got, series)
			}
			if prev != nil && prev.routes["a"].upstream == nil {
				t.Error("the snapshot in service lost its route")
			}
		})
	}
	if n := tr.Origins(); n != 0 {
		t.Errorf("%d origins pooled once every snapshot is retired", n)
	}
	if n := open.Load(); n != 0 {
		t.Errorf("%d cluster limiters open once every snapshot is retired", n)
	}
}
