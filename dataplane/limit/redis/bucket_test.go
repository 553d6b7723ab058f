package redislimit

import (
	"context"
	"testing"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/limit"
)

// TestSharedBucket: limits of different namespaces and ids that name one
// bucket with the same parameters spend one budget per key; the same limits
// without a bucket, or naming it with other parameters, keep their own.
func TestSharedBucket(t *testing.T) {
	t.Parallel()
	st := mustStore(t, Settings{URL: mustSharedRedis(t), Prefix: freshPrefix(t)})
	compile := func(ns, id, bucket string, rate int64) limit.Limiter {
		t.Helper()
		lim, err := st.Cluster(ns)(api.Limit{ID: id, Algorithm: api.TokenBucket, Rate: rate, Period: api.Duration(3600e9),
			Scope: api.ScopeCluster, OnStoreError: api.OnStoreErrorDeny, Bucket: bucket})
		if err != nil {
			t.Fatal(err)
		}
		return lim
	}
	ctx := context.Background()
	spend := func(lim limit.Limiter, key string) (n int) {
		t.Helper()
		for range 10 {
			d, err := lim.Take(ctx, key, 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				n++
			}
		}
		return n
	}
	gw, svc := compile("shop", "per-user", "orders", 3), compile("orders-svc", "create-per-user", "orders", 3)
	if n := spend(gw, "#alice"); n != 3 {
		t.Fatalf("gateway admitted %d of its bucket's 3", n)
	}
	if n := spend(svc, "#alice"); n != 0 {
		t.Fatalf("the service admitted %d from the bucket the gateway spent", n)
	}
	if n := spend(svc, "#bob"); n != 3 {
		t.Fatalf("another key admitted %d, want 3", n)
	}
	// Without a bucket: each limit its own budget.
	if n := spend(compile("orders-svc", "create-per-user", "", 3), "#alice"); n != 3 {
		t.Fatalf("an unbucketed limit admitted %d, want its own 3", n)
	}
	// Other parameters: apart budgets, never one rescaled back and forth.
	if n := spend(compile("orders-svc", "create-per-user", "orders", 5), "#alice"); n != 5 {
		t.Fatalf("the bucket named with rate 5 admitted %d, want its own 5", n)
	}
}
