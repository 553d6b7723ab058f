//go:build linux

package gateway

import "github.com/sluicegw/sluice/dataplane/snapshot"

// Offload runs w's decision off the loop (snapshot.LoopConn): a request of
// a route whose limits may wait (a scope: cluster limit's Redis call, a
// leaky bucket's delay) is decided on a goroutine of its own, so that the
// loop's other connections are never held up by it. The connection is busy
// meanwhile (ServeLoop said LoopDeciding): the loop reads none of it, so
// pipelined requests wait their turn, and a client that closes is found
// out once the answer is written or the next read sees the end. The
// decision reports back with Decided on the loop (evloop.Loop.Post), which
// starts the forward or writes the answer; a loop that ended meanwhile has
// closed the connection, and Decided then only ends the request, on this
// goroutine. The engine's stop waits for these goroutines (stopLoops), and
// its drain for their connections, as for any busy connection.
func (cl *loopClient) Offload(w snapshot.LoopWork) {
	e, l := cl.ls.e, cl.ls.l
	e.deciding.Add(1)
	l.Away()
	go func() {
		defer e.deciding.Done()
		w.Decide()
		if !l.Post(w.Decided) {
			w.Decided()
		}
		l.Back()
	}()
	// Most decisions do not wait (a batched limit spends its lease): run
	// them before the loop sleeps, on its thread, rather than wake another.
	l.Yield()
}
