package sdk

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestClusterLimitSharedThroughRedis: two instances of one service with
// Config.Redis share a scope: cluster limit's budget per key (the machine's
// Redis, a key prefix of the test's own): what one spends, the other cannot.
func TestClusterLimitSharedThroughRedis(t *testing.T) {
	t.Parallel()
	doc := header + `limits:
  - {id: per-user, resources: [orders.Create], key: [sdk:user], algorithm: token_bucket, rate: 2, period: 1h, scope: cluster, onStoreError: deny}
`
	prefix := fmt.Sprintf("sluicetest:sdk:%d:", time.Now().UnixNano())
	var gs []*Guard
	for range 2 {
		g, err := New(context.Background(), Config{Namespace: "orders-svc", RulesFile: writeRules(t, doc), Logger: discard(),
			Redis: "redis://127.0.0.1:6379", RedisPrefix: prefix})
		if err != nil {
			t.Fatalf("New (this test needs Redis at 127.0.0.1:6379): %v", err)
		}
		t.Cleanup(func() { g.Close() })
		gs = append(gs, g)
	}
	ctx := context.Background()
	alice := Keys{"user": "alice"}
	if err := gs[0].Do(ctx, "orders.Create", alice, ok); err != nil {
		t.Fatal(err)
	}
	if err := gs[1].Do(ctx, "orders.Create", alice, ok); err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		if rej := rejected(t, g.Do(ctx, "orders.Create", alice, ok)); rej.Rule != "per-user" {
			t.Fatalf("%+v", rej)
		}
	}
	if err := gs[1].Do(ctx, "orders.Create", Keys{"user": "bob"}, ok); err != nil {
		t.Fatalf("another user: %v", err)
	}
	// Without Redis such a rule set is refused, naming why.
	if _, err := New(ctx, Config{Namespace: "orders-svc", RulesFile: writeRules(t, doc), Logger: discard()}); err == nil || !strings.Contains(err.Error(), "redis") {
		t.Fatalf("a cluster limit without Config.Redis: %v", err)
	}
}
