package snapshot

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

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
