package snapshot

import (
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/sluicegw/sluice/dataplane/proxy"
)

// LoopResult is what ServeLoop (or LoopRequest.Decided) did with a
// request.
type LoopResult int

const (
	// LoopAnswered: the answer is in ctx.Response, for the engine to
	// write now; the request path is done with the request.
	LoopAnswered LoopResult = iota
	// LoopForward: the request path planned a forward, which the engine
	// starts on the connection's loop (proxy.Upstream.ForwardLoop, with
	// the LoopRequest's Upstream, Request and Match, and the LoopRequest
	// as the writer of the gateway's own 502 and 504) and reports the
	// outcome of with LoopRequest.End.
	LoopForward
	// LoopDeclined: the request's route cannot be served on an event loop
	// (its targets are not cleartext HTTP/1.1): nothing was decided,
	// counted or written; the engine serves it off the loop (ServeFast).
	LoopDeclined
	// LoopDecide: the request's route has limits that may wait (a store's
	// call, a leaky bucket's delay), so its decision runs off the loop:
	// the engine runs LoopRequest.Decide on a goroutine (it may block),
	// then LoopRequest.Decided on the loop, which says what became of the
	// request (LoopAnswered or LoopForward). The engine reads no more of
	// the connection meanwhile, as while a forward is in flight.
	LoopDecide
)

// LoopRequest is an event loop's request that ServeLoop did not finish:
// one to decide off the loop (LoopDecide) or to forward (LoopForward). The
// request path never calls the engine: the engine drives the request on
// with these methods, and tells it the forward's outcome (End). It is
// also the http.ResponseWriter of the answers the forward writes itself
// (502, 504). The zero LoopRequest is none.
type LoopRequest struct{ x *fastExchange }

// ServeLoop serves one request of an event-loop engine on the loop's
// goroutine, which must not block: ServeFast's request path, decided
// (decide) on the loop for a route whose limits never wait. A request
// whose targets need the net/http transports is declined before anything
// decides on it; one whose route's limits may wait is decided off the loop
// (LoopDecide); a forward is planned, not made (LoopForward): the engine
// starts it, and its outcome is recorded, and the limits' hold released,
// when the engine reports it (LoopRequest.End), or when a streamed body
// ends.
func (s *Snapshot) ServeLoop(ctx *fasthttp.RequestCtx, ids *RequestIDs) (LoopResult, LoopRequest) {
	x := fastExchanges.Get().(*fastExchange)
	x.ctx, x.noUpgrade = ctx, true
	x.tls = ctx.IsTLS() // a TLS connection on a loop (gateway/looptls_linux.go)
	v := x.fill(ctx, ids)
	v.ClientIP, v.TrustedPeer = s.fastClientIP(ctx, v)
	start := s.now()
	m := s.router.MatchView(v)
	if m.Route != nil && m.Invalid == "" {
		rt := s.routes[m.Route.ID]
		if !rt.loopCapable {
			x.free()
			return LoopDeclined, LoopRequest{}
		}
		if rt.loopWaits {
			// The calls the decision makes (a store's, a leaky bucket's
			// wait) get no context of the request's: a loop's request
			// context never ends (the engine finds a client gone by its
			// socket), and as a parent it would cost each call a goroutine
			// that reads the context after the engine has reused it.
			v.Ctx = nil
			x.snap, x.off, x.offAt = s, m, start
			return LoopDecide, LoopRequest{x}
		}
	}
	if s.decideAt(x, v, m, start, &x.plan) {
		return LoopForward, LoopRequest{x}
	}
	x.free()
	return LoopAnswered, LoopRequest{}
}

// free resets x and puts it back in its pool.
func (x *fastExchange) free() {
	x.reset()
	fastExchanges.Put(x)
}

// Decide decides on a LoopDecide request, off the loop (it may block on a
// limit's store or delay): the request path of ServeLoop, which leaves an
// answer the gateway writes itself in the request's ctx.Response, or plans
// a forward. Decided, on the loop, says which.
func (r LoopRequest) Decide() {
	x := r.x
	x.snap.decideAt(x, &x.view, x.off, x.offAt, &x.plan) // sets x.plan when it plans a forward
}

// Decided, on the loop after Decide, is what became of the request:
// LoopForward (r is to be forwarded, as ServeLoop's), or LoopAnswered (the
// answer is in ctx.Response, and r is done with).
func (r LoopRequest) Decided() LoopResult {
	if r.x.plan.rt != nil {
		return LoopForward
	}
	r.x.free()
	return LoopAnswered
}

// Upstream is where a LoopForward request goes.
func (r LoopRequest) Upstream() *proxy.Upstream { return r.x.plan.rt.upstream }

// Match is a LoopForward request's match (the path it goes on).
func (r LoopRequest) Match() proxy.Match { return r.x.plan.m }

// Request is what ForwardLoop needs of a LoopForward request beside its
// context (proxy.FastRequest).
func (r LoopRequest) Request() proxy.FastRequest { return r.x.fastRequest() }

// Header, Write and WriteHeader write the gateway's own answer to a
// LoopForward request (a 502 or 504 of the forward's), with the gateway's
// fields (http.ResponseWriter).
func (r LoopRequest) Header() http.Header         { return r.x.Header() }
func (r LoopRequest) Write(b []byte) (int, error) { return r.x.Write(b) }
func (r LoopRequest) WriteHeader(code int)        { r.x.WriteHeader(code) }

// End reports the outcome of a LoopForward request's forward, once its
// answer is in ctx.Response: the gateway's fields join the answer, and the
// outcome is recorded and the limits' hold ended, now, or once a body the
// engine streams afterwards has been written. r is done with.
func (r LoopRequest) End(o proxy.Outcome) {
	r.x.answered(o)
	r.x.free()
}
