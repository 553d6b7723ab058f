package report

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicegw/sluice/dataplane/metrics"
)

// BenchmarkServeReporting measures the request path in process (a limit's
// 429, answered by the gateway itself, so that nothing but the request path
// is timed) without a reporter, with one at the default interval (5s), and
// with one collecting every millisecond (5,000 times as often, to make any
// interference visible). The reporter adds no work to the request path: it
// reads counters the path keeps anyway, so the three should be equal within
// noise, with the same allocations per request (B/op counts the whole
// process, so the reporter's own few bytes per request show there).
func BenchmarkServeReporting(b *testing.B) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
	}{{"without", 0}, {"with-5s", DefaultInterval}, {"with-1ms", time.Millisecond}} {
		b.Run(tc.name, func(b *testing.B) {
			m := metrics.New()
			s := mustSnapshot(b, m, `namespace: bench
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
`)
			if tc.interval > 0 {
				r := mustReporter(b, Settings{Client: nopPutter{}, Namespace: "bench", NodeID: "gw-1", Metrics: m,
					Interval: tc.interval, State: func() State { return State{Version: s.Version, Rules: s.Rules} }})
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { r.Run(ctx); close(done) }()
				b.Cleanup(func() { cancel(); <-done })
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				r := httptest.NewRequest(http.MethodGet, "/api/x", nil)
				w := &discard{h: http.Header{}}
				for pb.Next() {
					clear(w.h)
					s.ServeHTTP(w, r)
				}
			})
		})
	}
}

// discard is a ResponseWriter that keeps nothing but its header map, so
// that the recorder's allocations do not hide the request path's.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}
