package sluicehttp

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicegw/sluice/dataplane/sdk"
)

// BenchmarkMiddleware measures a trivial handler in process (no socket)
// alone ("handler") and behind Middleware with one per-IP token bucket on
// its route ("guarded"); issue 31's target is at most 1.3× the handler's CPU
// per request under wrk (scripts/bench-sdk.sh), where the server's own work
// is included. The writer is the least a net/http server does per request
// (a fresh header map, cloned at the first write when the handler asked for
// it, as net/http's response does), not httptest.ResponseRecorder, whose
// own cost (it clones and snapshots the header at every write) would hide
// the middleware's: guarded minus handler is the middleware's cost.
func BenchmarkMiddleware(b *testing.B) {
	p := filepath.Join(b.TempDir(), "rules.yaml")
	if err := os.WriteFile(p, []byte(`namespace: orders-svc
kind: service
routes:
  - id: orders
    match: {pathPrefix: /api/orders}
limits:
  - {id: per-ip, routes: [orders], key: [ip], algorithm: token_bucket, rate: 1000000000, period: 1s}
`), 0o600); err != nil {
		b.Fatal(err)
	}
	g, err := sdk.New(context.Background(), sdk.Config{Namespace: "orders-svc", RulesFile: p, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	body := []byte("ok")
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body) })
	for _, tc := range []struct {
		name    string
		h       http.Handler
		headers int // response header fields the writer must have been given
	}{{"handler", h, 0}, {"guarded", Middleware(g, h), 5}} {
		b.Run(tc.name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodGet, "/api/orders/1", nil)
			w := &serverWriter{}
			b.ReportAllocs()
			for b.Loop() {
				*w = serverWriter{handler: make(http.Header)}
				tc.h.ServeHTTP(w, r)
				if w.status != http.StatusOK || len(w.sent) != tc.headers {
					b.Fatal(w.status, w.sent)
				}
			}
		})
	}
}

// serverWriter is a response writer doing what net/http's does with the
// header: the handler's map, cloned when the answer's header is written if
// the handler asked for it (net/http's response.WriteHeader).
type serverWriter struct {
	handler, sent http.Header
	asked         bool
	status        int
}

func (w *serverWriter) Header() http.Header { w.asked = true; return w.handler }

func (w *serverWriter) WriteHeader(code int) {
	if w.status != 0 {
		return
	}
	w.status = code
	if w.asked {
		w.sent = w.handler.Clone()
	}
}

func (w *serverWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(b), nil
}
