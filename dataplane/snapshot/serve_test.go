package snapshot

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/breaker"
	"github.com/sluicegw/sluice/dataplane/metrics"
)

// MustCompile compiles rules (YAML) with the clock now.
func MustCompile(tb testing.TB, rules string, now func() int64) *Snapshot {
	tb.Helper()
	return MustCompileOptions(tb, rules, Options{Now: now})
}

// MustCompileOptions compiles rules (YAML) with opts, whose Metrics and
// Logger it fills.
func MustCompileOptions(tb testing.TB, rules string, opts Options) *Snapshot {
	tb.Helper()
	rs, err := api.Decode([]byte(rules))
	if err != nil {
		tb.Fatal(err)
	}
	v, err := api.Validated(rs)
	if err != nil {
		tb.Fatal(err)
	}
	opts.Metrics, opts.Logger = metrics.New(), slog.New(slog.NewJSONHandler(io.Discard, nil))
	s, err := Compile(context.Background(), v, Meta{Version: 1}, nil, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Retire(nil) })
	return s
}

// TestBreakerProbeClientGone: a half-open probe whose client goes away before
// the upstream answers says nothing about the upstream; it must neither close
// the breaker nor keep its probe slot.
func TestBreakerProbeClientGone(t *testing.T) {
	var mode atomic.Int32 // 0 fail, 1 hang until the request is cancelled
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if mode.Load() == 0 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		<-r.Context().Done()
	}))
	defer up.Close()
	var clock atomic.Int64
	clock.Store(int64(time.Hour))
	s := MustCompile(t, fmt.Sprintf(`namespace: t
routes:
  - id: api
    match: {pathPrefix: /api}
    upstream: {targets: [{url: %q}], timeout: 10s}
breakers:
  - id: b
    routes: [api]
    window: 10s
    consecutiveFailures: 1
    openFor: 1s
    halfOpenProbes: 1
`, up.URL), clock.Load)
	b := s.Breakers().ForRoute("api")

	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/api/x", nil))
	if w.Code != http.StatusInternalServerError || b.State() != breaker.Open {
		t.Fatalf("after one failure: status %d, breaker %s; want 500, open", w.Code, b.State())
	}
	clock.Add(int64(2 * time.Second))
	mode.Store(1)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/api/x", nil).WithContext(ctx))
	if st := b.State(); st != breaker.HalfOpen {
		t.Fatalf("after a probe whose client went away: breaker %s; want half-open", st)
	}
	if _, err := b.Allow(clock.Load()); err != nil {
		t.Fatalf("the abandoned probe kept its slot: %v", err)
	}
}
