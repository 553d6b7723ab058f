package snapshot

// A route whose limits may wait (a scope: cluster limit's call to its
// store, a leaky bucket's delay) is served on the event loop too, without
// the loop ever waiting: ServeLoop matches the request on the loop and
// answers LoopDecide; the engine then runs the decision (LoopRequest.Decide:
// decide, the one request path: the identity, the key check, degrade, the
// limits, the breaker) on a goroutine, while the loop reads no more of that
// connection and serves its others. The decision leaves either the
// gateway's own answer (a 429, a 503) in the request's response or a
// planned forward; back on the loop, LoopRequest.Decided says which, and
// the engine writes the answer or starts the forward, as for a request
// decided on the loop. A route whose limits never wait is decided on the
// loop: nothing here is on its path but one test of a flag.
