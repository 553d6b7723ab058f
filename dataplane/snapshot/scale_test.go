package snapshot

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/metrics"
)

// largeRuleSet returns a valid rule set of n rules (the mix of the api
// package's BenchmarkDecodeValidate): n/2 routes, n/4 limits, n/8 breakers
// and n/8 degrades; limit number rate is given rate+i so that two calls with
// different rates differ in every limit... only in limit 0.
func largeRuleSet(n int, rate int64) *api.RuleSet {
	rs := &api.RuleSet{Namespace: "big"}
	nr := n / 2
	for i := range nr {
		m := api.Match{PathPrefix: fmt.Sprintf("/api/v1/svc%d", i), Methods: []string{"GET", "POST"}}
		switch i % 10 {
		case 1:
			m = api.Match{Path: fmt.Sprintf("/exact/%d", i)}
		case 2:
			m = api.Match{PathRegex: fmt.Sprintf(`^/items/%d/[0-9]+$`, i)}
		case 3:
			m.Hosts = []string{fmt.Sprintf("h%d.example.com", i), "*.example.org"}
		case 4:
			m.Headers = map[string]string{"X-Tenant": fmt.Sprint(i)}
		}
		rs.Routes = append(rs.Routes, api.Route{ID: fmt.Sprintf("r%d", i), Match: m, Upstream: api.Upstream{
			Targets: []api.Target{{URL: fmt.Sprintf("http://10.0.%d.%d:8080", i/250%250, i%250+1), Weight: 2}, {URL: "http://10.1.0.1:8080"}},
			Timeout: api.Duration(5 * time.Second)}})
	}
	for i := range n / 4 {
		r := int64(100 + i)
		if i == 0 {
			r = rate
		}
		rs.Limits = append(rs.Limits, api.Limit{ID: fmt.Sprintf("l%d", i), Routes: []string{fmt.Sprintf("r%d", i%nr)},
			Key: []string{"ip", "header:X-User"}, Algorithm: api.TokenBucket, Rate: r, Period: api.Duration(time.Second), Burst: 200})
	}
	for i := range n / 8 {
		rs.Breakers = append(rs.Breakers, api.Breaker{ID: fmt.Sprintf("b%d", i), Routes: []string{fmt.Sprintf("r%d", i)},
			Window: api.Duration(10 * time.Second), ErrorRatio: 0.5, OpenFor: api.Duration(5 * time.Second), FailureStatuses: []int{500, 502, 503}})
	}
	for i := range n / 8 {
		rs.Degrades = append(rs.Degrades, api.Degrade{ID: fmt.Sprintf("d%d", i), Routes: []string{fmt.Sprintf("r%d", nr-1-i)},
			Mode: api.DegradeAuto, Triggers: &api.DegradeTriggers{Level1: &api.Trigger{QPSAbove: 1000}}})
	}
	return rs
}

func benchOptions() Options {
	return Options{Metrics: metrics.New(), Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
}

// BenchmarkCompileSwap measures what a node does when a new version of a
// large rule set arrives: compile it against the snapshot in service (one
// limit changed, everything else carried over), swap it in and retire the
// old one. Target: 20k rules in ≤ 500 ms, linear in size.
func BenchmarkCompileSwap(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 20_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			versions := []*api.RuleSet{largeRuleSet(n, 1), largeRuleSet(n, 2)}
			for _, rs := range versions {
				if err := rs.Validate(); err != nil {
					b.Fatal(err)
				}
			}
			opts := benchOptions()
			var cur atomic.Pointer[Snapshot]
			first, err := Compile(context.Background(), versions[0], Meta{Version: 1}, nil, opts)
			if err != nil {
				b.Fatal(err)
			}
			cur.Store(first)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				prev := cur.Load()
				next, err := Compile(context.Background(), versions[i%2], Meta{Version: int64(i + 1)}, prev, opts)
				if err != nil {
					b.Fatal(err)
				}
				cur.Store(next)
				prev.Retire(next)
			}
			cur.Load().Retire(nil)
		})
	}
}

// BenchmarkCompileLoad measures a node's first load of a large rule set:
// compile with nothing to carry over, swap in.
func BenchmarkCompileLoad(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 20_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			rs := largeRuleSet(n, 1)
			b.ReportAllocs()
			for b.Loop() {
				s, err := Compile(context.Background(), rs, Meta{Version: 1}, nil, benchOptions())
				if err != nil {
					b.Fatal(err)
				}
				s.Retire(nil)
			}
		})
	}
}
