// Package sluicehttp guards a service's HTTP handlers with its Sluice rule
// set (package dataplane/sdk): Middleware matches each request on the
// routes of the service's kind: service document (routes without upstream:
// the service's own handlers answer them), by the gateway's router, and
// runs the gateway's decisions on it — degrade → limits → breaker →
// handler → record — answering refusals exactly as a gateway does: 429 or
// 503 with Retry-After, the RateLimit and X-RateLimit headers, and an
// application/problem+json body naming the rule (or the rule's own body; a
// gRPC status to a gRPC request), written by the same code. The client
// address limits key on is the peer, or the X-Forwarded-For client when the
// peer is one of Config.TrustedProxies (api.ClientIP, the gateway's rule).
//
// A handler's 5xx answers (the breaker's failureStatuses) and panics are
// failures for the route's breaker and degrade plan; a client that went
// away is no outcome. A request no route matches, and every request before
// the first rule set arrives, goes to the handler unguarded.
package sluicehttp

import (
	"net/http"
	"sync"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/answer"
	"github.com/sluicegw/sluice/dataplane/reqview"
	"github.com/sluicegw/sluice/dataplane/sdk"
)

// Middleware returns next guarded by g's rules for the service's routes.
func Middleware(g *sdk.Guard, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := g.Service()
		if s == nil {
			next.ServeHTTP(w, r)
			return
		}
		v := reqview.FromRequest(r)
		gd := s.Match(&v)
		if g.Drained() {
			w.Header().Set(api.HeaderRetryAfter, "1")
			answer.WriteProblemID(w, r.Header, r.Header.Get(api.HeaderRequestID), http.StatusServiceUnavailable,
				"Service Unavailable", "this instance is drained by an operator")
			g.Record(http.StatusServiceUnavailable, -1)
			return
		}
		if gd == nil {
			next.ServeHTTP(w, r)
			return
		}
		v.ClientIP, v.TrustedPeer = s.ClientIP(r)
		if id := r.Header[api.HeaderRequestID]; len(id) > 0 { // r.Header.Get without the key's canonical check
			v.RequestID = id[0]
		}
		sw := writers.Get().(*statusWriter)
		sw.ResponseWriter = w
		p, ok := s.Enter(sw, gd, &v) // a refusal is written as the gateway writes it
		if !ok {
			g.Record(sw.answered(), -1)
			sw.release()
			return
		}
		finished := false
		defer func() {
			if !finished { // the handler panicked: a failure; the panic goes on
				now := s.Now()
				p.End(now, true, false)
				g.Record(http.StatusInternalServerError, time.Duration(now-p.Start()))
			}
		}()
		next.ServeHTTP(sw, r)
		finished = true
		status := sw.answered()
		sw.release()
		now := s.Now()
		p.End(now, gd.Failed(status), r.Context().Err() != nil)
		g.Record(status, time.Duration(now-p.Start()))
	})
}

// writers holds statusWriters between requests, so that an admitted request
// allocates none. A handler must not use its ResponseWriter once it has
// returned (net/http's rule), so a writer is reused only after next
// returns; one whose handler panicked is left to the collector.
var writers = sync.Pool{New: func() any { return new(statusWriter) }}

// release returns w to writers.
func (w *statusWriter) release() {
	*w = statusWriter{}
	writers.Put(w)
}

// answered is the status written (200 when none was).
func (w *statusWriter) answered() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// statusWriter records the status the handler answers with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the server's writer (Flush,
// deadlines, Hijack).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
