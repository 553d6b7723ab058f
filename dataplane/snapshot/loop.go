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
	// Answered is called when a request ServeLoop left forwarding or
	// deciding has its answer in ctx.Response (a whole one, or one with a
	// body stream the engine writes from a goroutine, which ends the
	// request when done).
	Answered()
	// Offload runs w.Decide off the loop, on a goroutine the engine waits
	// for before it stops (Decide may block), and then w.Decided on the
	// connection's loop; if the loop has ended by then, w.Decided runs on
	// that goroutine instead, the connection closed (Forward and Answered
	// then only end the request).
	Offload(w LoopWork)
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
	// (its targets are not cleartext HTTP/1.1): nothing was decided,
	// counted or written; the engine hands the connection to a stack that
	// serves it (the fasthttp engine).
	LoopDeclined
	// LoopDeciding: the request's route has limits that may wait (a
	// store's call, a leaky bucket's delay), and its decision runs off the
	// loop (LoopConn.Offload); the engine reads no more of the connection
	// meanwhile, as while a forward is in flight, and hears
	// LoopConn.Answered when the answer is in ctx.Response.
	LoopDeciding
)

// ServeLoop serves one request of an event-loop engine: ServeFast's
// request path, on the loop's goroutine, which must not block. So a request
// whose targets need net/http's transports is declined before anything
// decides on it (see LoopResult); one whose route's limits may wait has its
// decision run off the loop (offload, loopwait.go); and the forward is
// started (lc.Forward) rather than awaited: its outcome is recorded, and
// the limits' hold released, when it ends (LoopDone), or when a streamed
// body ends.
func (s *Snapshot) ServeLoop(ctx *fasthttp.RequestCtx, ids *RequestIDs, lc LoopConn) LoopResult {
	x := fastExchanges.Get().(*fastExchange)
	x.ctx, x.noUpgrade, x.loop = ctx, true, lc
	x.tls = ctx.IsTLS() // a TLS connection on a loop (gateway/looptls_linux.go)
	v := x.fill(ctx, ids)
	v.ClientIP, v.TrustedPeer = s.fastClientIP(ctx, v)
	start := s.now()
	m := s.router.MatchView(v)
	var waits bool
	if m.Route != nil && m.Invalid == "" {
		rt := s.routes[m.Route.ID]
		if !rt.loopCapable {
			x.reset()
			fastExchanges.Put(x)
			return LoopDeclined
		}
		waits = rt.loopWaits
	}
	if s.access != nil {
		s.access.Record(v, s.wall())
	}
	if waits {
		s.offload(x, m, start)
		return LoopDeciding
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
