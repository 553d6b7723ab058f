package snapshot

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
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
