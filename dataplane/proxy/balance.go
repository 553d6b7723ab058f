package proxy

import (
	"sync"
	"sync/atomic"
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
type balancer struct {
	n        int
	schedule []uint16
	pos      atomic.Uint64

	mu      sync.Mutex
	weights []int
	current []int
	total   int
}

func newBalancer(weights []int) *balancer {
	b := &balancer{n: len(weights)}
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
