package snapshot

import (
	"github.com/valyala/fasthttp"

	"github.com/sluicegw/sluice/dataplane/proxy"
)

// LoopConn is an event-loop engine's client connection, as ServeLoop
// drives it. Its methods are called on the connection's loop.
type LoopConn interface {
	// Forward starts the exchange with u on the connection's loop
	// (proxy.Upstream.ForwardLoop); x.LoopDone ends it.
	Forward(u *proxy.Upstream, x proxy.LoopExchange, ctx *fasthttp.RequestCtx, fr proxy.FastRequest, m proxy.Match)
	// Answered is called when a request ServeLoop left forwarding has its
	// answer in ctx.Response (a whole one, or one with a body stream the
	// engine writes from a goroutine, which ends the request when done).
	Answered()
}

// LoopResult is what ServeLoop did with a request.
type LoopResult int

const (
	// LoopAnswered: the answer is in ctx.Response, for the engine to
	// write now.
	LoopAnswered LoopResult = iota
	// LoopForwarding: the request is being forwarded; the engine hears
	// LoopConn.Answered when its answer is in ctx.Response.
	LoopForwarding
	// LoopDeclined: the request's route cannot be served on an event loop
	// (its targets are not cleartext HTTP/1.1, or its limits may wait):
	// nothing was decided, counted or written; the engine hands the
	// connection to a stack that serves it (the fasthttp engine).
	LoopDeclined
)

// ServeLoop serves one request of an event-loop engine: ServeFast's
// request path, on the loop's goroutine, which must not block. So a request
// whose route's rules may wait, or whose targets need net/http's
// transports, is declined before anything decides on it (see LoopResult),
// and the forward is started (lc.Forward) rather than awaited: its outcome
// is recorded, and the limits' hold released, when it ends (LoopDone), or
// when a streamed body ends.
func (s *Snapshot) ServeLoop(ctx *fasthttp.RequestCtx, ids *RequestIDs, lc LoopConn) LoopResult {
	x := fastExchanges.Get().(*fastExchange)
	x.ctx, x.noUpgrade, x.loop = ctx, true, lc
	x.tls = ctx.IsTLS() // a TLS connection on a loop (gateway/looptls_linux.go)
	v := x.fill(ctx, ids)
	v.ClientIP, v.TrustedPeer = s.fastClientIP(ctx, v)
	start := s.now()
	m := s.router.MatchView(v)
	if m.Route != nil && m.Invalid == "" {
		if rt := s.routes[m.Route.ID]; !rt.loopSafe {
			x.reset()
			fastExchanges.Put(x)
			return LoopDeclined
		}
	}
	if s.access != nil {
		s.access.Record(v, s.wall())
	}
	x.serving = true
	s.serveMatch(x, v, m, start)
	s.observePreview(v)
	x.serving = false
	if !x.forwarding || x.early != nil {
		if x.forwarding {
			x.loopEnd(*x.early) // the forward ended before Serve returned
		} else {
			if x.done != nil {
				x.done()
			}
			x.reset()
			fastExchanges.Put(x)
		}
		return LoopAnswered
	}
	return LoopForwarding
}

// LoopDone ends the event loop's forward (proxy.LoopExchange): the
// gateway's fields join the answer, and the outcome replaces the
// placeholder Forward returned.
func (x *fastExchange) LoopDone(o proxy.Outcome) {
	if x.serving {
		x.earlyOut = o
		x.early = &x.earlyOut
		return
	}
	lc := x.loop
	x.loopEnd(o)
	lc.Answered()
}

// loopEnd is LoopDone's work, once Serve has returned: the report Serve
// held takes the outcome and, unless the body streams (its end reports),
// runs with the limits' release; then x is free.
func (x *fastExchange) loopEnd(o proxy.Outcome) {
	if x.status == 0 {
		x.flush() // the upstream's answer is in the engine's response
		x.status = o.Status
	}
	e := x.end
	if e.report != nil {
		e.report.out = o
	}
	if !x.ctx.Response.IsBodyStream() {
		e.fn(nil)
	}
	x.reset()
	fastExchanges.Put(x)
}
