package snapshot

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/dataplane/reqview"
)

func compileService(tb testing.TB, doc string, opts Options) (*Service, error) {
	tb.Helper()
	rs, err := api.Decode([]byte(doc))
	if err != nil {
		tb.Fatal(err)
	}
	v, err := api.Validated(rs)
	if err != nil {
		tb.Fatal(err)
	}
	opts.Metrics, opts.Logger = metrics.New(), slog.New(slog.NewJSONHandler(io.Discard, nil))
	s, err := CompileService(context.Background(), v, Meta{Version: 1}, nil, opts)
	if err == nil {
		tb.Cleanup(func() { s.Retire(nil) })
	}
	return s, err
}

// TestCompileServiceScopes: a rule naming a resource guards that resource
// and no route, a rule naming a route guards that route and no resource, and
// a resource no rule names has no guard.
func TestCompileServiceScopes(t *testing.T) {
	t.Parallel()
	s, err := compileService(t, `namespace: svc
kind: service
routes:
  - {id: orders, match: {pathPrefix: /orders}}
  - {id: free, match: {pathPrefix: /free}}
limits:
  - {id: res, resources: [orders], algorithm: token_bucket, rate: 1}
  - {id: http, routes: [orders], algorithm: token_bucket, rate: 1}
breakers:
  - {id: b, resources: [db], window: 10s, consecutiveFailures: 1, openFor: 1s}
`, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The resource "orders" and the route "orders" are apart.
	if g := s.Resource("orders"); g == nil || g.limits == nil || len(g.limits.IDs()) != 1 || g.limits.IDs()[0] != "res" || g.breaker != nil {
		t.Fatalf("resource orders: %+v", g)
	}
	if g := s.Resource("db"); g == nil || g.limits != nil || g.breaker == nil {
		t.Fatalf("resource db: %+v", g)
	}
	if g := s.Resource("elsewhere"); g != nil {
		t.Fatalf("a resource no rule names: %+v", g)
	}
	v := reqview.FromRequest(httptest.NewRequest("GET", "/orders/1", nil))
	if g := s.Match(&v); g == nil || g.limits == nil || len(g.limits.IDs()) != 1 || g.limits.IDs()[0] != "http" || v.RouteID != "orders" {
		t.Fatalf("route orders: %+v", g)
	}
	v = reqview.FromRequest(httptest.NewRequest("GET", "/free", nil))
	if g := s.Match(&v); g == nil || g.limits != nil || g.breaker != nil || g.degrade != nil {
		t.Fatalf("route free, which no rule names: %+v", g)
	}
	v = reqview.FromRequest(httptest.NewRequest("GET", "/nowhere", nil))
	if g := s.Match(&v); g != nil {
		t.Fatalf("no route: %+v", g)
	}
}

// TestCompileServiceRefusals: a gateway document is refused, and so is a
// cluster limit without a store, releasing what it took.
func TestCompileServiceRefusals(t *testing.T) {
	t.Parallel()
	_, err := compileService(t, "namespace: gw\nroutes:\n  - {id: a, match: {pathPrefix: /}, upstream: {targets: [{url: 'http://127.0.0.1:1'}]}}\n", Options{})
	if err == nil || !strings.Contains(err.Error(), "kind: service") {
		t.Fatalf("a gateway document: %v", err)
	}
	_, err = compileService(t, "namespace: svc\nkind: service\nlimits:\n  - {id: c, resources: [x], algorithm: token_bucket, rate: 1, scope: cluster}\n", Options{})
	if err == nil || !strings.Contains(err.Error(), "limits") {
		t.Fatalf("a cluster limit without a store: %v", err)
	}
}

// TestServiceVariantLatency: a guarded call that a limit with variants let
// through is observed, from Enter to End, in its variant's
// sluice_limit_variant_request_duration_seconds; a refused one is not.
func TestServiceVariantLatency(t *testing.T) {
	t.Parallel()
	rs, err := api.Decode([]byte(`namespace: svc
kind: service
limits:
  - id: per-user
    resources: [orders]
    key: ["sdk:user"]
    algorithm: fixed_window
    rate: 1
    period: 1h
    variants:
      - {id: loose, weight: 50, rate: 1000}
`))
	if err != nil {
		t.Fatal(err)
	}
	v, err := api.Validated(rs)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	var clock atomic.Int64
	clock.Store(1e12)
	s, err := CompileService(context.Background(), v, Meta{Version: 1}, nil, Options{Metrics: m, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Now: clock.Load})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Retire(nil) })
	g := s.Resource("orders")
	for u := range 20 {
		for range 2 {
			call := reqview.View{RouteID: "orders", Keys: map[string]string{"user": fmt.Sprintf("user-%d", u)}, Ctx: context.Background()}
			p, ok := s.Enter(httptest.NewRecorder(), g, &call)
			if ok {
				p.End(clock.Load()+30e6, false, false) // 30ms
			}
		}
	}
	for _, variant := range []string{api.BaseVariant, "loose"} {
		allowed := testutil.ToFloat64(m.LimitDecision("per-user", metrics.DecisionAllow, "", variant, ""))
		h := &dto.Metric{}
		if err := m.VariantDuration.WithLabelValues("per-user", variant).(prometheus.Histogram).Write(h); err != nil {
			t.Fatal(err)
		}
		n, sum := float64(h.GetHistogram().GetSampleCount()), h.GetHistogram().GetSampleSum()
		if allowed == 0 || n != allowed || math.Abs(sum-0.03*n) > 1e-9 {
			t.Errorf("variant %s: %g calls of %gs observed, %g allowed, want each allowed call once at 30ms", variant, n, sum, allowed)
		}
	}
	if rej := testutil.ToFloat64(m.LimitDecision("per-user", metrics.DecisionReject, "", api.BaseVariant, "")); rej == 0 {
		t.Error("base rejected nothing: the test does not tell a refused call from an admitted one")
	}
}
