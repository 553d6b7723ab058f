package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/dataplane/sdk"
)

// TestSharedBucketServicesAndGateway: two SDK instances (separate Guards,
// each its own state) and one sluice-gateway process spend one Redis budget
// on one key through a cluster limit naming the same bucket — the gateway
// keys on header:X-User, the services on sdk:user, in two namespaces — and
// together admit R·t + burst within ±1 % while all three drive traffic at
// once (the machine's Redis, a key prefix of the test's own).
//
// SLUICE_LOAD=1 runs it for 30 s instead of 6 s.
func TestSharedBucketServicesAndGateway(t *testing.T) {
	t.Parallel()
	const rate, burst = 300, 300 // per second; burst: a 1 s stall of every source loses nothing
	run := 6 * time.Second
	if os.Getenv("SLUICE_LOAD") == "1" {
		run = 30 * time.Second
	}
	bucket := fmt.Sprintf("bucket: e2e-orders, algorithm: token_bucket, rate: %d, period: 1s, burst: %d, scope: cluster, onStoreError: deny", rate, burst)
	prefix := fmt.Sprintf("sluicetest:e2e-bucket:%d:", time.Now().UnixNano())

	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	t.Cleanup(upstream.Close)
	gw := startStandalone(t, fmt.Sprintf(`namespace: shop
routes:
  - {id: orders, match: {pathPrefix: /orders}, upstream: {targets: [{url: %q}]}}
limits:
  - {id: per-user, routes: [orders], key: [header:X-User], %s}
`, upstream.URL, bucket), "--redis", "redis://127.0.0.1:6379", "--redis-prefix", prefix, "--redis-timeout", "1s")

	svcRules := filepath.Join(t.TempDir(), "service.yaml")
	if err := os.WriteFile(svcRules, []byte(`namespace: orders-svc
kind: service
limits:
  - {id: create-per-user, resources: [orders.Create], key: [sdk:user], `+bucket+`}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var guards []*sdk.Guard
	for i := range 2 {
		g, err := sdk.New(context.Background(), sdk.Config{Namespace: "orders-svc", NodeID: fmt.Sprintf("orders-%d", i),
			RulesFile: svcRules, Redis: "redis://127.0.0.1:6379", RedisPrefix: prefix, RedisTimeout: time.Second,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatalf("sdk.New (this test needs Redis at 127.0.0.1:6379): %v", err)
		}
		t.Cleanup(func() { g.Close() })
		guards = append(guards, g)
	}

	// Each source offers ~2,000 calls/s (four callers pacing at 2 ms):
	// together 20 times the rate, so the bucket stays empty whatever one
	// caller's stalls on a loaded machine; and the bucket holds a second of
	// refill, so that only a stall of all three sources longer than that
	// would lose units.
	const user = "alice-e2e"
	var admitted [3]atomic.Int64
	var failures atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(run)
	pace := func(src int, call func() (bool, error)) {
		defer wg.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for range tick.C {
			if time.Now().After(deadline) {
				return
			}
			ok, err := call()
			if err != nil {
				failures.Add(1)
				continue
			}
			if ok {
				admitted[src].Add(1)
			}
		}
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	for range 4 {
		wg.Add(3)
		for i, g := range guards {
			go pace(i, func() (bool, error) {
				err := g.Do(context.Background(), "orders.Create", sdk.Keys{"user": user}, func(context.Context) error { return nil })
				var rej *sdk.Rejected
				if errors.As(err, &rej) {
					if rej.Rule != "create-per-user" {
						return false, fmt.Errorf("rejected by %q", rej.Rule)
					}
					return false, nil
				}
				return err == nil, err
			})
		}
		go pace(2, func() (bool, error) {
			req, _ := http.NewRequest("GET", "http://"+gw.listen+"/orders/1", nil)
			req.Header.Set("X-User", user)
			res, err := client.Do(req)
			if err != nil {
				return false, err
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			switch res.StatusCode {
			case 200:
				return true, nil
			case 429:
				return false, nil
			}
			return false, fmt.Errorf("gateway answered %d", res.StatusCode)
		})
	}
	wg.Wait()
	total := admitted[0].Load() + admitted[1].Load() + admitted[2].Load()
	want := float64(burst) + rate*run.Seconds()
	t.Logf("admitted %d (services %d + %d, gateway %d) in %v; R·t+burst = %.0f (%+.2f %%); %d failed calls",
		total, admitted[0].Load(), admitted[1].Load(), admitted[2].Load(), run, want, 100*(float64(total)-want)/want, failures.Load())
	if f := failures.Load(); f > 0 {
		t.Errorf("%d calls failed (Redis errors or unexpected answers)", f)
	}
	if math.Abs(float64(total)-want) > 0.01*want {
		t.Errorf("admitted %d, want R·t+burst = %.0f ±1 %%", total, want)
	}
	for i := range admitted {
		if admitted[i].Load() == 0 {
			t.Errorf("source %d admitted nothing: the budget was not shared by all three", i)
		}
	}
}
