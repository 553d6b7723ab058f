package sdk

import (
	"context"
	"testing"
)

// BenchmarkDo measures Guard.Do on an admitted call, fn doing nothing, on
// the real clock: "bucket+breaker" through one local token bucket keyed on
// sdk:user and a breaker (issue 31's target: at most 1.2× snapshot's
// BenchmarkDecide/decide+headers, 0 allocs); "unnamed" a resource no rule
// names (target: at most 50 ns).
func BenchmarkDo(b *testing.B) {
	g, err := New(context.Background(), Config{Namespace: "orders-svc", Logger: discard(), RulesFile: writeRules(b, header+`limits:
  - {id: per-user, resources: [orders.Create], key: [sdk:user], algorithm: token_bucket, rate: 1000000000, period: 1s}
breakers:
  - {id: brk, resources: [orders.Create], window: 10s, minRequests: 100, errorRatio: 0.5, openFor: 5s}
`)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	ctx := context.Background()
	keys := Keys{"user": "alice"}
	for _, tc := range []struct{ name, resource string }{{"bucket+breaker", "orders.Create"}, {"unnamed", "orders.List"}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := g.Do(ctx, tc.resource, keys, ok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
