package proxy

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/answer"
)

// mustRoutes decodes, validates and normalizes a rule document and returns
// its routes, as the snapshot compiler will hand them over.
func mustRoutes(tb testing.TB, doc string) []api.Route {
	tb.Helper()
	rs, err := api.Decode([]byte(doc))
	if err != nil {
		tb.Fatalf("decoding rules: %v", err)
	}
	if err := rs.Validate(); err != nil {
		tb.Fatalf("validating rules: %v", err)
	}
	return rs.Normalize().Routes
}

func quietTransports() *Transport { return quietTransport(false) }

func quietTransport(decodeSlashes bool) *Transport {
	return NewTransport(Settings{DecodeSlashes: decodeSlashes, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// mustCompile compiles doc's routes with a fresh Transport and closes the
// Router when the test ends.
func mustCompile(tb testing.TB, doc string, decodeSlashes bool) *Router {
	tb.Helper()
	tr := quietTransport(decodeSlashes)
	rt, err := NewRouter(mustRoutes(tb, doc), tr)
	if err != nil {
		tb.Fatalf("compiling routes: %v", err)
	}
	tb.Cleanup(func() {
		rt.CloseIdle()
		tr.CloseIdle()
	})
	return rt
}

// gatewayHandler is the request path the integrator builds, minus the
// governance steps: route, forward, record.
func gatewayHandler(rt *Router, outcomes chan<- Outcome) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer.EnsureRequestID(w, r)
		m := rt.Match(r)
		if m.Route == nil {
			answer.WriteNoRoute(w, r)
			return
		}
		o := m.Route.Upstream.Forward(w, r, m)
		if outcomes != nil {
			outcomes <- o
		}
		if o.Aborted {
			panic(http.ErrAbortHandler)
		}
	})
}

// newGateway serves rt on a loopback test server.
func newGateway(tb testing.TB, rt *Router, outcomes chan<- Outcome) *httptest.Server {
	tb.Helper()
	srv := httptest.NewUnstartedServer(gatewayHandler(rt, outcomes))
	srv.Config.MaxHeaderBytes = MaxHeaderBytes
	srv.Config.ErrorLog = nil
	srv.Start()
	tb.Cleanup(srv.Close)
	return srv
}
