package proxy

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/sluicegw/sluice/dataplane/internal/clock"
)

// scheduleLimit is the largest total weight (after dividing by the weights'
// greatest common divisor) for which the balancer precomputes its sequence.
// A variable so that tests can reach the locked path.
var scheduleLimit = 4096

// balancer picks targets by smooth weighted round-robin (as nginx does):
// over every run of total-weight picks each target is chosen exactly its
// weight times, and picks of one target are spread out rather than bunched.
//
// When the total weight is small the whole sequence is computed once and
// walked with an atomic counter, so picking takes no lock; otherwise the
// classic algorithm runs under a mutex.
//
// pick (health.go) builds on it: the round-robin candidate, skipping
// targets that outlier detection ejected or active health checks failed,
// against a second one drawn at random, the one with fewer requests
// outstanding per unit of weight going (power of two choices; a tie keeps
// the round-robin one, so an idle upstream sees the exact weighted
// sequence).
type balancer struct {
	n        int
	schedule []uint16
	pos      atomic.Uint64

	mu      sync.Mutex
	weights []int
	current []int
	total   int

	w      []int64       // each target's weight, as configured
	ts     []targetState // per target: outstanding requests and health
	health *healthPolicy // nil: no outlier detection and no health checks
}

func newBalancer(weights []int) *balancer {
	b := &balancer{n: len(weights), ts: make([]targetState, len(weights))}
	for _, w := range weights {
		b.w = append(b.w, int64(max(w, 1)))
	}
	if b.n <= 1 {
		return b
	}
	g := 0
	for _, w := range weights {
		g = gcd(g, w)
	}
	b.weights = make([]int, len(weights))
	for i, w := range weights {
		b.weights[i] = w / g
		b.total += w / g
	}
	b.current = make([]int, len(weights))
	if b.total <= scheduleLimit {
		b.schedule = make([]uint16, b.total)
		for i := range b.schedule {
			b.schedule[i] = uint16(b.step())
		}
	}
	return b
}

// next returns the index of the target to use.
func (b *balancer) next() int {
	switch {
	case b.n <= 1:
		return 0
	case b.schedule != nil:
		return int(b.schedule[(b.pos.Add(1)-1)%uint64(len(b.schedule))])
	}
	b.mu.Lock()
	i := b.step()
	b.mu.Unlock()
	return i
}

// pick returns the index of the target for one request and counts it
// outstanding; the caller reports the outcome with done(i, ...).
func (b *balancer) pick() int {
	if b.n <= 1 {
		return 0
	}
	var now int64
	if b.health != nil {
		now = clock.Now()
	}
	c1 := b.next()
	if b.health != nil && !b.usable(c1, now) {
		found := false
		for range b.n {
			if c1 = b.next(); b.usable(c1, now) {
				found = true
				break
			}
		}
		if !found {
			// Every target is out: use them all rather than none (Envoy's
			// panic threshold at 100%), round-robin.
			b.ts[c1].inflight.Add(1)
			return c1
		}
	}
	c2 := rand.IntN(b.n - 1)
	if c2 >= c1 {
		c2++
	}
	// c2 wins if it has fewer outstanding per unit of weight:
	// in2/w2 < in1/w1.
	if in1, in2 := b.ts[c1].inflight.Load(), b.ts[c2].inflight.Load(); in2*b.w[c1] < in1*b.w[c2] &&
		(b.health == nil || b.usable(c2, now)) {
		c1 = c2
	}
	b.ts[c1].inflight.Add(1)
	return c1
}

// step is one round of smooth weighted round-robin: every target gains its
// weight, the richest is chosen and pays the total.
func (b *balancer) step() int {
	best := 0
	for i, w := range b.weights {
		b.current[i] += w
		if b.current[i] > b.current[best] {
			best = i
		}
	}
	b.current[best] -= b.total
	return best
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
