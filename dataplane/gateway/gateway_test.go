package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/dataplane/source"
)

// MustStart runs a node on loopback ports with rules applied, stopping it when
// the test ends. It returns the node and its traffic and admin base URLs.
func MustStart(tb testing.TB, rules string) (*Node, string, string) {
	tb.Helper()
	return MustStartConfig(tb, rules, Config{})
}

// MustStartConfig is MustStart with settings; listen addresses and shutdown
// timeout are the test's, and so is the logger unless cfg has one.
func MustStartConfig(tb testing.TB, rules string, cfg Config) (*Node, string, string) {
	tb.Helper()
	n, ls := MustStartListeners(tb, rules, cfg)
	return n, "http://" + ls.Traffic.Addr().String(), "http://" + ls.Admin.Addr().String()
}

// MustStartListeners is MustStartConfig returning the node's Listeners (for
// the TLS address, see Listeners.TLSAddr).
func MustStartListeners(tb testing.TB, rules string, cfg Config) (*Node, *Listeners) {
	tb.Helper()
	cfg.Listen, cfg.Admin, cfg.ShutdownTimeout = "127.0.0.1:0", "127.0.0.1:0", 5*time.Second
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	n := New(cfg)
	if err := n.Apply(context.Background(), source.Update{Data: []byte(rules), Version: 1, Source: "test"}); err != nil {
		tb.Fatalf("applying rules: %v", err)
	}
	ls, err := n.Listen()
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Serve(ctx, ls) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			var buf strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
			tb.Errorf("Serve: %v\ngoroutines:\n%s", err, buf.String())
		}
	})
	return n, ls
}

func okUpstream(tb testing.TB) *httptest.Server {
	tb.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	tb.Cleanup(s.Close)
	return s
}

// reloadRules has three limits: "keep" never changes, "scaled" changes its
// burst (10 ↔ 20), "churn" changes on every version.
func reloadRules(upstream string, version int) string {
	scaled := 10
	if version%2 == 1 {
		scaled = 20
	}
	return fmt.Sprintf(`namespace: reload
routes:
  - id: api
    match: {pathPrefix: /api}
    upstream: {targets: [{url: %q}]}
  - id: scaled
    match: {pathPrefix: /scaled}
    upstream: {targets: [{url: %q}]}
limits:
  - id: keep
    routes: [api]
    key: ["header:X-User"]
    algorithm: token_bucket
    rate: 5
    period: 1h
  - id: churn
    routes: [api]
    algorithm: token_bucket
    rate: 1000000
    burst: %d
  - id: scaled
    routes: [scaled]
    key: ["header:X-User"]
    algorithm: token_bucket
    rate: 1
    period: 1h
    burst: %d
`, upstream, upstream, 1000000+version, scaled)
}

func get(tb testing.TB, c *http.Client, url, user string) int {
	tb.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("X-User", user)
	resp, err := c.Do(req)
	if err != nil {
		tb.Errorf("GET %s: %v", url, err)
		return -1
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestHotReloadUnderLoad: 50 swaps while clients send requests: not one
// request fails, the unchanged limit keeps its state, and the changed one
// carries its fill over scaled to the new capacity.
func TestHotReloadUnderLoad(t *testing.T) {
	up := okUpstream(t)
	n, base, _ := MustStart(t, reloadRules(up.URL, 0))
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}

	// Exhaust "keep" for user "spent".
	for i := 0; i < 5; i++ {
		if code := get(t, c, base+"/api/x", "spent"); code != 200 {
			t.Fatalf("request %d for spent: %d", i, code)
		}
	}
	if code := get(t, c, base+"/api/x", "spent"); code != 429 {
		t.Fatalf("6th request for spent: %d, want 429", code)
	}
	// Take 5 of "scaled"'s 10 for user "half".
	for i := 0; i < 5; i++ {
		if code := get(t, c, base+"/scaled", "half"); code != 200 {
			t.Fatalf("scaled request %d: %d", i, code)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var ok, failed atomic.Int64
	var seq atomic.Int64
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				user := "u" + strconv.FormatInt(seq.Add(1), 10)
				if code := get(t, c, base+"/api/load", user); code == 200 {
					ok.Add(1)
				} else {
					failed.Add(1)
					t.Errorf("request during swaps: status %d", code)
				}
			}
		}()
	}
	for v := 1; v <= 50; v++ {
		if err := n.Apply(ctx, source.Update{Data: []byte(reloadRules(up.URL, v+1)), Version: int64(v + 1), Source: "test"}); err != nil {
			t.Fatalf("swap %d: %v", v, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	t.Logf("%d requests during 50 swaps, %d failed", ok.Load(), failed.Load())
	if ok.Load() == 0 || failed.Load() != 0 {
		t.Fatalf("%d ok, %d failed", ok.Load(), failed.Load())
	}
	if got := n.Current().Version; got != 51 {
		t.Fatalf("applied version %d, want 51", got)
	}
	// "keep" kept its state through 50 swaps.
	if code := get(t, c, base+"/api/x", "spent"); code != 429 {
		t.Fatalf("after swaps, spent got %d: the unchanged limit lost its state", code)
	}
	// Version 51 has scaled burst 20: half full (5 of 10 left) becomes 10 of 20.
	admitted := 0
	for i := 0; i < 30; i++ {
		if get(t, c, base+"/scaled", "half") == 200 {
			admitted++
		}
	}
	if admitted != 10 {
		t.Fatalf("after scaling 10→20 with half the bucket left, %d admitted, want 10", admitted)
	}
}

// TestForwardedFor: X-Forwarded-For from an untrusted peer does not change the
// client a limit keys on; from a trusted proxy it does.
func TestForwardedFor(t *testing.T) {
	up := okUpstream(t)
	rules := fmt.Sprintf(`namespace: xff
routes:
  - id: api
    match: {pathPrefix: /}
    upstream: {targets: [{url: %q}]}
limits:
  - id: per-ip
    key: [ip]
    algorithm: token_bucket
    rate: 1
    period: 1h
`, up.URL)
	send := func(base, xff string) int {
		req, _ := http.NewRequest("GET", base+"/x", nil)
		req.Header.Set("X-Forwarded-For", xff)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	tests := []struct {
		desc    string
		trusted []netip.Prefix
		want    []int
	}{
		{desc: "untrusted peer: spoofed headers share the peer's bucket", want: []int{200, 429, 429}},
		{desc: "trusted proxy: each forwarded client has its own bucket", trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, want: []int{200, 200, 429}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, base, _ := MustStartConfig(t, rules, Config{TrustedProxies: tc.trusted})
			got := []int{send(base, "192.0.2.1"), send(base, "192.0.2.2"), send(base, "192.0.2.1")}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("statuses %v, want %v", got, tc.want)
			}
		})
	}
}
