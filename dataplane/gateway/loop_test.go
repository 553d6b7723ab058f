package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/dataplane/source"
)

func oneRouteRules(target string) string {
	return fmt.Sprintf(`namespace: loop
routes:
  - id: api
    match: {pathPrefix: /}
    upstream: {targets: [{url: %q}], timeout: 5s}
`, target)
}

func apply(tb testing.TB, n *Node, version int64, rules string) error {
	tb.Helper()
	return n.Apply(context.Background(), source.Update{Data: []byte(rules), Version: version, Source: "test"})
}

// TestRouteToItselfRefused: a version whose route targets the node's own
// traffic or admin listener is refused with an error naming the listener,
// and the node keeps its rules.
func TestRouteToItselfRefused(t *testing.T) {
	up := okUpstream(t)
	n, base, admin := MustStart(t, oneRouteRules(up.URL))
	for i, target := range []string{base, admin, strings.Replace(base, "127.0.0.1", "localhost", 1) + "/api"} {
		err := apply(t, n, int64(2+i), oneRouteRules(target))
		if err == nil || !strings.Contains(err.Error(), "own listener") {
			t.Errorf("route to %s: Apply = %v, want the own-listener error", target, err)
		}
		if v := n.Status().Version; v != 1 {
			t.Errorf("version %d applied", v)
		}
	}
}

// relay accepts TCP connections and pipes each to target: something in front
// of a gateway the compile-time check cannot see through.
func relay(tb testing.TB, target string) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c) }()
				_, _ = io.Copy(c, u)
			}()
		}
	}()
	return l.Addr().String()
}

// TestLoopsStopped: a route that reaches its own gateway through a relay,
// and two gateways whose routes point at each other, answer 508
// problem+json at once, and the goroutine count stays bounded (before the
// Via check one request nested thousands of times).
func TestLoopsStopped(t *testing.T) {
	up := okUpstream(t)
	a, baseA, _ := MustStartConfig(t, oneRouteRules(up.URL), Config{NodeID: "gw-a"})
	b, baseB, _ := MustStartConfig(t, oneRouteRules(up.URL), Config{NodeID: "gw-b"})
	c, baseC, _ := MustStartConfig(t, oneRouteRules(up.URL), Config{NodeID: "gw-c"})
	if err := apply(t, a, 2, oneRouteRules(baseB)); err != nil {
		t.Fatal(err)
	}
	if err := apply(t, b, 2, oneRouteRules(baseA)); err != nil {
		t.Fatal(err)
	}
	if err := apply(t, c, 2, oneRouteRules("http://"+relay(t, strings.TrimPrefix(baseC, "http://")))); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	before := runtime.NumGoroutine()
	for _, tc := range []struct{ desc, url string }{
		{"A and B point at each other, via A", baseA + "/x"},
		{"A and B point at each other, via B", baseB + "/x"},
		{"C points at itself through a relay", baseC + "/x"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			for range 20 {
				start := time.Now()
				resp, err := client.Get(tc.url)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusLoopDetected || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") ||
					!strings.Contains(string(body), "Loop detected") {
					t.Fatalf("GET %s = %d %s %s, want 508 problem+json", tc.url, resp.StatusCode, resp.Header.Get("Content-Type"), body)
				}
				if d := time.Since(start); d > 2*time.Second {
					t.Fatalf("508 took %v", d)
				}
			}
		})
	}
	if g := runtime.NumGoroutine(); g > before+100 {
		t.Errorf("goroutines went from %d to %d after 60 looping requests", before, g)
	}
	t.Logf("goroutines: %d before, %d after 60 looping requests", before, runtime.NumGoroutine())
}

// TestHopLimit: a request arriving with DefaultMaxHops Via entries is refused
// with 508 before it costs anything; one fewer is forwarded.
func TestHopLimit(t *testing.T) {
	up := okUpstream(t)
	_, base, _ := MustStartConfig(t, oneRouteRules(up.URL), Config{NodeID: "gw-h"})
	for _, tc := range []struct {
		hops int
		want int
	}{{9, 200}, {10, 508}} {
		req, _ := http.NewRequest("GET", base+"/x", nil)
		var via []string
		for i := range tc.hops {
			via = append(via, fmt.Sprintf("1.1 p%d", i))
		}
		req.Header.Set("Via", strings.Join(via, ", "))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%d Via entries: %d, want %d", tc.hops, resp.StatusCode, tc.want)
		}
	}
}
