package limit

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
)

// TestChainsMatchApplies checks the one-pass chain construction against the
// definition: a route's chain holds exactly the limits api.Applies to it, in
// evaluation order (class, then document order), and routes no limit names
// share the chain of the limits without routes.
func TestChainsMatchApplies(t *testing.T) {
	t.Parallel()
	var ls []api.Limit
	for i := range 40 {
		l := api.Limit{ID: fmt.Sprintf("l%d", i), Algorithm: api.TokenBucket, Rate: 10, Key: []string{"ip"}}
		switch i % 5 {
		case 0: // every route
		case 1:
			l.Routes = []string{fmt.Sprintf("r%d", i%7)}
		case 2:
			l.Routes = []string{fmt.Sprintf("r%d", i%7), fmt.Sprintf("r%d", (i+1)%7)}
			l.Key = []string{"header:X-User"}
		case 3:
			l.Algorithm, l.Routes = api.Concurrency, []string{fmt.Sprintf("r%d", i%3)}
		case 4:
			l.Algorithm, l.MaxDelay = api.LeakyBucket, 0
		}
		ls = append(ls, l)
	}
	s := mustCompile(t, ls, nil, newClock().opts(Options{}))
	for _, route := range []string{"r0", "r1", "r2", "r3", "r4", "r5", "r6", "unnamed"} {
		var want []string
		for class := range classLeaky + 1 {
			for _, ru := range s.rules {
				if ru.class == class && api.Applies(ru.l.Routes, route) {
					want = append(want, ru.l.ID)
				}
			}
		}
		var got []string
		c := s.Chain(route)
		if c != nil {
			for i, ru := range c.rules {
				got = append(got, ru.l.ID)
				if c.specs[c.keyIdx[i]].String() != ru.key.String() {
					t.Errorf("%s: rule %s has key spec %s, want %s", route, ru.l.ID, c.specs[c.keyIdx[i]], ru.key)
				}
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("chain of %s = %v, want %v", route, got, want)
		}
	}
}

// BenchmarkCompileChains measures limit.Compile of n limits that each name
// their own route (plus one limit on every route), the shape where building
// the route chains used to cost routes × limits.
func BenchmarkCompileChains(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 20_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			ls := []api.Limit{{ID: "all", Algorithm: api.TokenBucket, Rate: 10, Key: []string{"ip"}}}
			for i := range n {
				ls = append(ls, api.Limit{ID: fmt.Sprintf("l%d", i), Routes: []string{fmt.Sprintf("r%d", i)},
					Algorithm: api.TokenBucket, Rate: 10, Key: []string{"ip"}})
			}
			ls = normalized(ls)
			b.ReportAllocs()
			for b.Loop() {
				s, err := Compile(ls, nil, Options{SweepInterval: -1})
				if err != nil {
					b.Fatal(err)
				}
				s.Close()
			}
		})
	}
}

// TestChainMayWait: a chain may wait when one of its limits is shared
// through a store or is a leaky bucket that delays, variants included.
func TestChainMayWait(t *testing.T) {
	t.Parallel()
	store := Options{Cluster: func(api.Limit) (Limiter, error) {
		return &storeLimiter{take: func() (Decision, error) { return Decision{Allowed: true}, nil }}, nil
	}}
	for _, tc := range []struct {
		desc string
		l    api.Limit
		want bool
	}{
		{"token bucket", api.Limit{ID: "a", Algorithm: api.TokenBucket, Rate: 10}, false},
		{"concurrency", api.Limit{ID: "a", Algorithm: api.Concurrency, Rate: 10}, false},
		{"leaky bucket without delay", api.Limit{ID: "a", Algorithm: api.LeakyBucket, Rate: 10}, false},
		{"leaky bucket with delay", api.Limit{ID: "a", Algorithm: api.LeakyBucket, Rate: 10, MaxDelay: api.Duration(time.Second)}, true},
		{"cluster scope", api.Limit{ID: "a", Algorithm: api.TokenBucket, Rate: 10, Scope: api.ScopeCluster}, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := mustCompile(t, limitsOf(tc.l, api.Limit{ID: "other", Algorithm: api.FixedWindow, Rate: 5}), nil, newClock().opts(store))
			if got := s.Chain("r").MayWait(); got != tc.want {
				t.Fatalf("MayWait = %v, want %v", got, tc.want)
			}
		})
	}
	if (*Chain)(nil).MayWait() {
		t.Fatal("a nil chain may wait")
	}
}
