package snapshot

import "github.com/sluicegw/sluice/dataplane/proxy"

// A route whose limits may wait (a scope: cluster limit's call to its
// store, a leaky bucket's delay) is served on the event loop too, without
// the loop ever waiting: ServeLoop matches the request on the loop, then
// has the engine run the decision (serveMatch, the one request path: the
// identity, the key check, degrade, the limits, the breaker) on a goroutine
// (LoopConn.Offload), while the loop reads no more of that connection and
// serves its others. What the decision does that belongs to the loop waits
// for Decided, which the engine runs on the loop once the decision is made:
// the forward the decision chose is started there (the exchange's Forward
// only notes it meanwhile), or the answer the gateway wrote itself (a 429,
// a 503) is handed to the engine to write. A route whose limits never wait
// is decided on the loop, as before: nothing here is on its path but one
// test of a flag.

// LoopWork is a request's decision that an event-loop engine runs off its
// loop (LoopConn.Offload): Decide on a goroutine, where it may block, then
// Decided on the connection's loop.
type LoopWork interface {
	// Decide decides on the request: an answer the gateway writes itself
	// is put in the request's ctx.Response; a forward is chosen, not
	// started.
	Decide()
	// Decided starts the forward Decide chose (LoopConn.Forward), or hands
	// the engine the answer (LoopConn.Answered).
	Decided()
	// DecidedFunc is Decided as a func value, made once (not one for each
	// request), for the loop's task queue (evloop.Loop.Post).
	DecidedFunc() func()
}

// loopOffload is an offloaded decision's part of a fastExchange: what
// Decide serves, and the forward it chose (u and fr, once Forward noted
// them). s is nil for a request decided on the loop.
type loopOffload struct {
	s     *Snapshot
	m     proxy.Match
	start int64
	u     *proxy.Upstream
	fr    proxy.FastRequest
}

// offload has the engine decide x's request, matched (m) at start, off the
// loop; ServeLoop then returns LoopDeciding.
func (s *Snapshot) offload(x *fastExchange, m proxy.Match, start int64) {
	x.off = loopOffload{s: s, m: m, start: start}
	// The calls the decision makes (a store's, a leaky bucket's wait) get
	// no context of the request's: a loop's request context never ends
	// (the engine finds a client gone by its socket), and as a parent it
	// would cost each call a goroutine that reads the context after the
	// engine has reused it.
	x.view.Ctx = nil
	x.loop.Offload(x)
}

// Decide is serveMatch on the offloaded request (LoopWork), and the
// preview's look at it, as ServeLoop runs them on the loop for a route
// whose limits never wait.
func (x *fastExchange) Decide() {
	s := x.off.s
	s.serveMatch(x, &x.view, x.off.m, x.off.start)
	s.observePreview(&x.view)
	if !x.forwarding && x.done != nil {
		// The limits admitted and the gateway answered (the breaker
		// refused): their hold ends here, off the loop.
		x.done()
		x.done = nil
	}
}

// DecidedFunc is x.Decided, bound once (LoopWork).
func (x *fastExchange) DecidedFunc() func() { return x.decided }

// Decided, on the loop (LoopWork), starts the forward Decide chose, which
// ends as any other on the loop (LoopDone, then LoopConn.Answered), or
// hands the engine the gateway's answer.
func (x *fastExchange) Decided() {
	lc := x.loop
	if x.forwarding {
		lc.Forward(x.off.u, x, x.ctx, x.off.fr, x.off.m)
		return // x may be free already (a forward that failed at once)
	}
	x.reset()
	fastExchanges.Put(x)
	lc.Answered()
}
