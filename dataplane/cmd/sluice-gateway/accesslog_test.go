package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/replay"
)

// TestAccessLogReplays is the round trip of --access-log: a real gateway
// serves traffic under a per-key limit and logs it; the log, replayed by
// package replay (sluicectl simulate's code) through the same rules, parses
// in full and rejects exactly the requests the gateway rejected, by key. The
// Authorization header, which no rule keys on, is not in the log.
func TestAccessLogReplays(t *testing.T) {
	t.Parallel()
	up := upstream(t)
	rules := fmt.Sprintf(`namespace: e2e
routes:
  - id: api
    match: {pathPrefix: /api}
    upstream: {targets: [{url: "%s"}], timeout: 5s}
limits:
  - id: per-key
    routes: [api]
    key: [header:X-Api-Key]
    algorithm: token_bucket
    rate: 1
    period: 1h
    burst: 5
`, up.URL)
	logPath := filepath.Join(t.TempDir(), "access.jsonl")
	g := startGateway(t, rules, "--access-log", logPath)
	sent, rejected := map[string]int{}, map[string]int{}
	for i := range 30 {
		key := []string{"k1", "k1", "k2"}[i%3] // k1: 20 requests, k2: 10
		req, _ := http.NewRequest("GET", fmt.Sprintf("http://%s/api/orders/%d?x=%d", g.addr, i, i), nil)
		req.Header.Set("X-Api-Key", key)
		req.Header.Set("Authorization", "Bearer top-secret")
		req.Header.Set("User-Agent", "roundtrip/1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		sent[key]++
		if resp.StatusCode == http.StatusTooManyRequests {
			rejected[key]++
		} else if resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
	}
	if rejected["k1"] != 15 || rejected["k2"] != 5 {
		t.Fatalf("gateway rejected %v, want k1 15, k2 5", rejected)
	}
	// Stop the gateway: Close writes out the queue.
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-g.done:
		g.done <- err // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("gateway did not stop")
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "top-secret") {
		t.Fatalf("the log holds the Authorization header no rule keys on:\n%s", b)
	}
	rs, err := api.Decode([]byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	v, err := api.Validated(rs)
	if err != nil {
		t.Fatal(err)
	}
	sim, err := replay.New(v, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	lr, err := replay.NewReader(strings.NewReader(string(b)), replay.FormatJSON)
	if err != nil {
		t.Fatal(err)
	}
	st, err := replay.Run(context.Background(), lr, sim)
	if err != nil {
		t.Fatal(err)
	}
	if st.Unparseable != 0 || st.Replayed != 30 {
		t.Fatalf("replay stats %+v, want 30 lines replayed, none unparseable:\n%s", st, b)
	}
	res, err := sim.Result()
	if err != nil {
		t.Fatal(err)
	}
	r := res.Rules[0]
	if r.Requests != 30 || r.Rejected != 20 {
		t.Fatalf("replay of per-key: %+v, want 30 requests, 20 rejected as the gateway did", r)
	}
	// Keys are hashed alike in the gateway's decision log and the
	// replay: k1's hash is the one rejected 15 times in both.
	log := g.stderr.String()
	for key, n := range rejected {
		found := false
		for _, k := range r.TopKeys {
			if k.Rejected == int64(n) && strings.Count(log, `"key":"`+k.Key+`"`) == n {
				found = true
			}
		}
		if !found {
			t.Fatalf("replay top keys %+v: none rejected %d times, as the gateway rejected %s", r.TopKeys, n, key)
		}
	}
}
