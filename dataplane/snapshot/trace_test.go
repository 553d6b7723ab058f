package snapshot

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/sluicegw/sluice/dataplane/reqview"
	"github.com/sluicegw/sluice/dataplane/tracing"
	"github.com/sluicegw/sluice/dataplane/tracing/tracingtest"
)

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

func tracedSnapshot(tb testing.TB, ratio float64) *Snapshot {
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

func decideView(path, traceparent string) (*nopExchange, reqview.View) {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.Header.Set("X-User", "alice")
	if traceparent != "" {
		r.Header.Set("Traceparent", traceparent)
	}
	v := reqview.FromRequest(r)
	v.RequestID = "bench-1"
	v.ClientIP = netip.MustParseAddr("192.0.2.1")
	return &nopExchange{h: http.Header{}}, v
}

// TestUnsampledRequestsDoNotAllocate: with tracing on, a request that is
// not sampled (the caller's traceparent says so, or the ratio leaves out
// the trace the gateway starts) costs no allocation on the request path.
func TestUnsampledRequestsDoNotAllocate(t *testing.T) {
	s := tracedSnapshot(t, 0)
	x, base := decideView("/free/x", "")
	var buf reqview.TraceBuf
	for _, tc := range []struct {
		name   string
		parent string
	}{{"caller unsampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"}, {"started, ratio 0", ""}} {
		n := 0
		if tc.parent == "" {
			n = 0
		} else {
			n = 1
		}
		allocs := testing.AllocsPerRun(200, func() {
			v := base
			v.Trace = reqview.TraceOf(tc.parent, n, &buf)
			clear(x.h)
			s.Serve(x, &v)
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per request, want 0", tc.name, allocs)
		}
	}
}

// BenchmarkDecideTraced is BenchmarkDecide's "decide" request, each one a
// trace the gateway starts (so the ratio decides), with tracing off, at 1%
// and at 100% (the span built, queued and exported to an in-process OTLP
// receiver; spans the queue cannot take are dropped and counted).
func BenchmarkDecideTraced(b *testing.B) {
	for _, tc := range []struct {
		name  string
		ratio float64
	}{{"off", -1}, {"1pct", 0.01}, {"100pct", 1}} {
		b.Run(tc.name, func(b *testing.B) {
			s := tracedSnapshot(b, tc.ratio)
			x, base := decideView("/free/x?page=1", "")
			var buf reqview.TraceBuf
			b.ReportAllocs()
			for b.Loop() {
				v := base
				v.Trace = reqview.TraceOf("", 0, &buf)
				clear(x.h)
				s.Serve(x, &v)
			}
		})
	}
}
