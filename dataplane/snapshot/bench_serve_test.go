package snapshot

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/sluicegw/sluice/dataplane/proxy"
	"github.com/sluicegw/sluice/dataplane/reqview"
	"github.com/sluicegw/sluice/dataplane/tracing"
	"github.com/sluicegw/sluice/dataplane/tracing/tracingtest"
)

// BenchmarkServeRejected measures the request path in process, without a
// socket, on answers the gateway writes itself, so that the record step
// (finish: the route's series and the node's totals) is a visible share of
// the cost: a limit's 429 and an unrouted 404. The peer is the same path
// with the limit allowing, stopped before forwarding (not measurable here):
// compare the same sub-benchmark across versions of the code.
func BenchmarkServeRejected(b *testing.B) {
	s := MustCompile(b, `namespace: bench
routes:
  - id: api
    match: {pathPrefix: /api}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
limits:
  - id: none
    routes: [api]
    algorithm: token_bucket
    rate: 1
    period: 1h
`, func() int64 { return time.Now().UnixNano() })
	for _, tc := range []struct{ name, path string }{{"429", "/api/x"}, {"404", "/elsewhere"}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				r := httptest.NewRequest(http.MethodGet, tc.path, nil)
				for pb.Next() {
					w := httptest.NewRecorder()
					s.ServeHTTP(w, r)
				}
			})
		})
	}
}

// nopExchange is an Exchange whose upstream answers 200 at once, so that
// BenchmarkDecide measures the request path's own work.
type nopExchange struct{ h http.Header }

func (x *nopExchange) Header() http.Header         { return x.h }
func (x *nopExchange) Write(b []byte) (int, error) { return len(b), nil }
func (x *nopExchange) WriteHeader(int)             {}
func (x *nopExchange) Routed(*proxy.Upstream)      {}
func (x *nopExchange) Status() int                 { return 0 }
func (x *nopExchange) Forward(*proxy.Upstream, proxy.Match) proxy.Outcome {
	return proxy.Outcome{Status: http.StatusOK}
}

// BenchmarkDecide measures the engine-neutral request path (Serve) on a
// request view, the upstream exchange left out: route matching, the key
// check, a degrade plan at level 0, a non-rejecting per-IP token bucket
// keyed on ip and a header, the breaker, and the record step. "decide" is
// the decisions alone (no limit, so no RateLimit headers are written);
// "decide+headers" adds the limit's allowed decision and its RateLimit
// headers. The peer is the same request through ServeHTTP with a
// recorder (view building, request id and trace context included).
func BenchmarkDecide(b *testing.B) {
	s := decideSnapshot(b, -1)
	for _, tc := range []struct{ name, path string }{{"decide", "/free/x?page=1"}, {"decide+headers", "/api/x?page=1"}} {
		b.Run(tc.name, func(b *testing.B) {
			x, base := decideView(tc.path, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
			base.Trace = reqview.EnsureTrace(base.Header())
			b.ReportAllocs()
			for b.Loop() {
				v := base
				clear(x.h)
				serve(s, x, &v)
			}
		})
	}
}

// decideRules are BenchmarkDecide's rules: /api has a per-IP and header
// token bucket that never rejects, /free none; both have a breaker and a
// degrade plan at level 0.
const decideRules = `namespace: bench
routes:
  - id: api
    match: {pathPrefix: /api}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
  - id: free
    match: {pathPrefix: /free}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
limits:
  - id: per-ip
    routes: [api]
    key: [ip, header:X-User]
    algorithm: token_bucket
    rate: 1000000000
    period: 1s
breakers:
  - {id: brk, routes: [api, free], window: 10s, minRequests: 100, errorRatio: 0.5, openFor: 5s, maxOpenFor: 60s, halfOpenProbes: 1, fallback: {status: 503}}
degrades:
  - {id: dg, routes: [api, free], mode: manual, level: 0}
`

// decideSnapshot compiles decideRules, with tracing to an in-process OTLP
// receiver at ratio (tracing off for a negative ratio).
func decideSnapshot(tb testing.TB, ratio float64) *Snapshot {
	tb.Helper()
	opts := Options{Now: func() int64 { return time.Now().UnixNano() }}
	if ratio >= 0 {
		recv := tracingtest.Start(tb)
		tp, err := tracing.New(tracing.Config{Endpoint: recv.URL, SampleRatio: ratio, Service: "bench",
			Dropped: tracing.GatewayDropped()})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { // before the receiver closes: what is queued goes out
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = tp.Shutdown(ctx)
		})
		opts.Tracer = tp
	}
	return MustCompileOptions(tb, decideRules, opts)
}

// decideView is a GET of path from 192.0.2.1 with X-User and X-Request-Id
// (and traceparent, when not ""), as BenchmarkDecide serves it, and an
// exchange to serve it on; the view's Trace is the caller's to set.
func decideView(path, traceparent string) (*nopExchange, reqview.View) {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.Header.Set("X-User", "alice")
	r.Header.Set("X-Request-Id", "bench-1")
	if traceparent != "" {
		r.Header.Set("Traceparent", traceparent)
	}
	v := reqview.FromRequest(r)
	v.RequestID = "bench-1"
	v.ClientIP = netip.MustParseAddr("192.0.2.1")
	return &nopExchange{h: http.Header{}}, v
}
