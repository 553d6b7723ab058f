package sluicehttp

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/dataplane/sdk"
)

const rules = `namespace: orders-svc
kind: service
routes:
  - id: create
    match: {pathPrefix: /api/orders, methods: [POST]}
  - id: report
    match: {path: /api/report}
limits:
  - id: per-ip
    routes: [create]
    key: [ip]
    algorithm: token_bucket
    rate: 1
    period: 1m
breakers:
  - {id: report, routes: [report], window: 10s, consecutiveFailures: 2, openFor: 5s}
`

// start serves handler behind Middleware with rules, trusting 127.0.0.0/8
// as a proxy, on an injected clock.
func start(t *testing.T, handler http.Handler) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	return startWith(t, handler, nil)
}

// startWith is start with the Guard's metrics m (nil: its own).
func startWith(t *testing.T, handler http.Handler, m *metrics.Metrics) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(p, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	var clock atomic.Int64
	clock.Store(int64(time.Hour))
	g, err := sdk.New(context.Background(), sdk.Config{Namespace: "orders-svc", RulesFile: p, Now: clock.Load, Metrics: m,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	srv := httptest.NewServer(Middleware(g, handler))
	t.Cleanup(srv.Close)
	return srv, &clock
}

func do(t *testing.T, method, url, xff string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	req.Header.Set("X-Request-Id", "req-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestMiddlewareLimit: a route's limit keys on the X-Forwarded-For client of
// a trusted proxy, answers the gateway's 429 (Retry-After, RateLimit
// headers, problem+json naming the rule) without calling the handler, and a
// request no route matches goes through unguarded.
func TestMiddlewareLimit(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	srv, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }))
	if resp := do(t, "POST", srv.URL+"/api/orders", "203.0.113.1"); resp.StatusCode != 200 || resp.Header.Get("RateLimit-Policy") == "" {
		t.Fatalf("first: %d %v", resp.StatusCode, resp.Header)
	}
	resp := do(t, "POST", srv.URL+"/api/orders", "203.0.113.1")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || resp.Header.Get("RateLimit") == "" ||
		resp.Header.Get("X-RateLimit-Limit") != "1" || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("second: %d %v", resp.StatusCode, resp.Header)
	}
	var prob struct {
		Rule, RequestID string
		Status          int
	}
	if err := json.NewDecoder(resp.Body).Decode(&prob); err != nil || prob.Rule != "per-ip" || prob.Status != 429 || prob.RequestID != "req-1" {
		t.Fatalf("body %+v %v", prob, err)
	}
	if resp := do(t, "POST", srv.URL+"/api/orders", "203.0.113.2"); resp.StatusCode != 200 {
		t.Fatalf("another client: %d", resp.StatusCode)
	}
	if resp := do(t, "GET", srv.URL+"/api/orders", "203.0.113.1"); resp.StatusCode != 200 {
		t.Fatalf("a request no route matches: %d", resp.StatusCode)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("handler ran %d times; want 3", n)
	}
}

// TestMiddlewareCounts: the requests the middleware guards are counted for
// the node's reports (metrics.Served: every request and the refused ones,
// and sluice_requests_total by status), the refusal it writes itself
// included; a request no route matches is not guarded and not counted.
func TestMiddlewareCounts(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	srv, _ := startWith(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), m)
	for i, want := range []int{200, 429, 429} {
		if resp := do(t, "POST", srv.URL+"/api/orders", "203.0.113.9"); resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
	if resp := do(t, "GET", srv.URL+"/unrouted", ""); resp.StatusCode != 200 {
		t.Fatalf("unrouted: %d", resp.StatusCode)
	}
	if tot := m.Served.Totals(); tot.Total != 3 || tot.Rejected != 2 || tot.Cumulative[len(tot.Cumulative)-1] != 1 {
		t.Fatalf("served totals %+v; want 3 requests, 2 rejected, 1 with a duration", tot)
	}
	if n := testutil.ToFloat64(m.Requests.WithLabelValues("", "429")); n != 2 {
		t.Fatalf("sluice_requests_total{code=429} = %v, want 2", n)
	}
	if n := testutil.ToFloat64(m.Requests.WithLabelValues("", "200")); n != 1 {
		t.Fatalf("sluice_requests_total{code=200} = %v, want 1", n)
	}
}

// TestMiddlewareBreaker: the handler's 5xx answers trip the route's
// breaker, which then answers 503 with Retry-After and problem+json; after
// openFor a successful probe closes it.
func TestMiddlewareBreaker(t *testing.T) {
	t.Parallel()
	var failing atomic.Bool
	failing.Store(true)
	srv, clock := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	for range 2 {
		if resp := do(t, "GET", srv.URL+"/api/report", ""); resp.StatusCode != 500 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	resp := do(t, "GET", srv.URL+"/api/report", "")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "5" || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("open: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	failing.Store(false)
	clock.Add(int64(5 * time.Second))
	for range 2 {
		if resp := do(t, "GET", srv.URL+"/api/report", ""); resp.StatusCode != 200 {
			t.Fatalf("after openFor: %d", resp.StatusCode)
		}
	}
}

// TestMiddlewareHandlerPanic: a handler's panic is a failure for the
// breaker (two trip it) and still reaches net/http.
func TestMiddlewareHandlerPanic(t *testing.T) {
	t.Parallel()
	srv, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic(http.ErrAbortHandler) }))
	for range 2 {
		req, _ := http.NewRequest("GET", srv.URL+"/api/report", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			t.Fatal("the panic did not abort the response")
		}
	}
	if resp := do(t, "GET", srv.URL+"/api/report", ""); resp.StatusCode != 503 {
		t.Fatalf("after two panics: %d; want the breaker open", resp.StatusCode)
	}
}

// TestMiddlewareWriterReuse: the status writers are pooled; one reused
// after a 500 answer records the next request's own status, so answers
// alternating 500 and 200 never make the two consecutive failures that
// open the route's breaker.
func TestMiddlewareWriterReuse(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	srv, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 1 {
			w.WriteHeader(http.StatusInternalServerError)
		} // else nothing written: 200
	}))
	for i := range 20 {
		want := 500
		if i%2 == 1 {
			want = 200
		}
		if resp := do(t, "GET", srv.URL+"/api/report", ""); resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d (a reused writer kept an earlier status?)", i, resp.StatusCode, want)
		}
	}
}
