//go:build linux

package gateway

import (
	"sync/atomic"
	"time"

	"github.com/sluicegw/sluice/dataplane/snapshot"
)

// offload runs the decision of req off the loop (ServeLoop said
// LoopDecide): a request of a route whose limits may wait (a scope:
// cluster limit's Redis call, a leaky bucket's delay) is decided on another
// goroutine, so that the loop's other connections are never held up by
// it. The connection is busy meanwhile: the loop reads none of it, so
// pipelined requests wait their turn, and a client that closes is found
// out once the answer is written or the next read sees the end. The
// decision reports back on the loop (evloop.Loop.Post: decided), which
// starts the forward or writes the answer; a loop that ended meanwhile has
// closed the connection, and decided then only ends the request, on that
// goroutine. The engine's stop waits for these goroutines (stopLoops), and
// its drain for their connections, as for any busy connection.
//
// The goroutines are kept (deciders): an idle one takes the next decision
// of any loop, and one is started only when none is idle; one idle for
// deciderIdle ends. A goroutine started per decision grew its stack for
// each (the decision's calls are deeper than a new goroutine's stack):
// 9.6 % of the CPU of a route with a batched cluster limit.
func (cl *loopClient) offload(req snapshot.LoopRequest) {
	e, l := cl.ls.e, cl.ls.l
	cl.req = req
	if cl.decidedFn == nil {
		cl.decidedFn = cl.decided
	}
	e.deciding.Add(1)
	l.Away()
	if !e.handOff(cl) {
		e.deciders.Add(1)
		go e.decider(cl)
	}
	// Most decisions do not wait (a batched limit spends its lease): run
	// them before the loop sleeps, on its thread, rather than wake another.
	l.Yield()
}

// handOff gives cl's decision to an idle decider, if there is one: it
// claims one (idle) and hands it over, waiting at most until that decider
// is back at the jobs (it counted itself idle before it reported its last
// decision, so that the loop hearing that report finds it; it is on its way
// and waits for nothing else). False: none idle, or the engine stopped.
func (e *loopEngine) handOff(cl *loopClient) bool {
	if !claim(&e.idle) {
		return false
	}
	select {
	case e.jobs <- cl:
		return true
	case <-e.quit:
		return false
	}
}

// claim takes one from n, unless it is 0.
func claim(n *atomic.Int64) bool {
	for {
		v := n.Load()
		if v <= 0 {
			return false
		}
		if n.CompareAndSwap(v, v-1) {
			return true
		}
	}
}

// decided goes on with the request whose decision was made off the loop:
// its forward is started, or its answer written.
func (cl *loopClient) decided() {
	req := cl.req
	if req.Decided() == snapshot.LoopForward {
		cl.forward(req)
		return
	}
	cl.req = snapshot.LoopRequest{}
	cl.answered()
}

// deciderIdle is how long a decider waits for another decision, at
// least: one that took none in a whole period of it ends (between one and
// two periods after its last).
const deciderIdle = 10 * time.Second

// decider decides cl's request, then those handed to it (jobs), until it has
// been idle for deciderIdle or the engine stops. The idle timer is set
// once a period, not once a decision (jobs counts those of the period).
func (e *loopEngine) decider(cl *loopClient) {
	defer e.deciders.Done()
	idle := time.NewTimer(deciderIdle)
	defer idle.Stop()
	jobs := 0
	for {
		e.decide(cl)
		jobs++
	wait:
		select {
		case cl = <-e.jobs: // claimed (handOff)
		case <-idle.C:
			// Leave, unless every idle decider is claimed: then one of
			// the claims is this one's to take.
			if jobs == 0 && claim(&e.idle) {
				return
			}
			jobs = 0
			idle.Reset(deciderIdle)
			goto wait
		case <-e.quit:
			return
		}
	}
}

// decide runs the decision of cl's request and reports it back on cl's
// loop (or here, the loop ended).
func (e *loopEngine) decide(cl *loopClient) {
	defer e.deciding.Done()
	l := cl.ls.l
	cl.req.Decide()
	// Idle from here, before the loop hears the report: the connection's
	// next decision, which can follow at once, finds this decider (handOff).
	e.idle.Add(1)
	if !l.Post(cl.decidedFn) {
		cl.decided()
	}
	l.Back()
}
