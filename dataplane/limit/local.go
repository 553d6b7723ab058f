package limit

import (
	"context"
	"github.com/sluicegw/sluice/dataplane/reqview/classify"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sluicegw/sluice/api"
)

// DefaultMaxKeys is the per-limit key cap when Options.MaxKeys is zero.
const DefaultMaxKeys = 1 << 20

// Local is one node-scope limit over many keys, in this process's memory.
// A limit keyed only by "global" has a single state and no key table; a token
// or leaky bucket one is then updated with one compare-and-swap, without a
// lock. Other limits keep per-key state in a sharded table bounded by
// maxKeys (see store). The zero value is not usable; call NewLocal. Safe for
// concurrent use.
type Local struct {
	p       params
	keyless bool // the key is ignored: one state for every request
	single  bool // the state lives here, not in st (keyless, not concurrency)

	tat  atomic.Int64 // global token/leaky bucket: TAT
	mu   sync.Mutex   // global window/concurrency state
	a, b int64

	st *store
}

var _ Limiter = (*Local)(nil)

// NewLocal returns a Local enforcing l (normalized: see api.RuleSet.Normalize),
// keeping at most maxKeys keys (0 means DefaultMaxKeys). It returns an error
// when l's settings are out of range. l.Scope is ignored, so that a cluster
// limiter can use a Local as its fallback with a reduced rate.
func NewLocal(l api.Limit, maxKeys int) (*Local, error) {
	p, err := newParams(l)
	if err != nil {
		return nil, err
	}
	if p.alg == kAdaptive {
		// A Local of its own learns on its own: Observe feeds it.
		p.ad = newAdaptive(l.Adaptive, Now(), VariantSeed(l.ID, "", Now()))
	}
	return newLocal(p, isGlobal(l.Key), maxKeys), nil
}

func newLocal(p params, keyless bool, maxKeys int) *Local {
	lo := &Local{p: p, keyless: keyless, single: keyless && !p.alg.inFlight()}
	switch {
	case lo.single:
	case keyless:
		lo.st = newStore(1)
	default:
		if maxKeys <= 0 {
			maxKeys = DefaultMaxKeys
		}
		lo.st = newStore(maxKeys)
	}
	return lo
}

func isGlobal(key []string) bool {
	return !slices.ContainsFunc(key, func(k string) bool { return k != "global" })
}

// HashKey returns the hash under which Local stores key: what Take(key) and
// TakeHash(HashKey(key)) share.
func HashKey(key string) uint64 { return classify.HashString(key) }

// Take implements Limiter. It never returns an error. For a global limit the
// key is ignored.
func (l *Local) Take(_ context.Context, key string, cost, now int64) (Decision, error) {
	if l.keyless {
		return l.TakeHash(0, cost, now), nil
	}
	return l.TakeHash(HashKey(key), cost, now), nil
}

// Refund implements Limiter.
func (l *Local) Refund(_ context.Context, key string, cost, now int64) {
	if l.keyless {
		l.RefundHash(0, cost, now)
		return
	}
	l.RefundHash(HashKey(key), cost, now)
}

// TakeHash is Take for a key already hashed (see HashKey); it saves building
// the key string.
func (l *Local) TakeHash(h uint64, cost, now int64) Decision {
	if cost < 1 {
		cost = 1
	}
	if !l.single {
		d := l.st.take(&l.p, keyHash(h), now, cost)
		if l.p.ad != nil && d.Allowed {
			l.p.ad.admitted(d.Limit - d.Remaining)
		}
		return d
	}
	switch l.p.alg {
	case kTokenBucket, kLeakyBucket:
		if cost > l.p.burst {
			return l.p.never(l.tat.Load(), 0, now)
		}
		for {
			tat := l.tat.Load()
			var next int64
			var d Decision
			if l.p.alg == kTokenBucket {
				next, d = l.p.tbTake(tat, now, cost)
			} else {
				next, d = l.p.lbTake(tat, now, cost)
			}
			if !d.Allowed || l.tat.CompareAndSwap(tat, next) {
				return d
			}
		}
	}
	l.mu.Lock()
	var d Decision
	l.a, l.b, d = l.p.take(l.a, l.b, now, cost)
	l.mu.Unlock()
	return d
}

// RefundHash is Refund for a key already hashed.
func (l *Local) RefundHash(h uint64, cost, now int64) {
	if cost < 1 {
		cost = 1
	}
	if !l.single {
		l.st.refund(&l.p, keyHash(h), now, cost)
		return
	}
	switch l.p.alg {
	case kTokenBucket, kLeakyBucket:
		for {
			tat := l.tat.Load()
			next, _ := l.p.refund(tat, 0, now, cost)
			if l.tat.CompareAndSwap(tat, next) {
				return
			}
		}
	}
	l.mu.Lock()
	l.a, l.b = l.p.refund(l.a, l.b, now, cost)
	l.mu.Unlock()
}

// Sweep forgets every key whose state is a fresh key's (it changes no
// decision) and returns how many it forgot. The Set's sweeper calls it
// periodically; tests call it with their own clock.
func (l *Local) Sweep(now int64) int {
	if l.single {
		return 0
	}
	return l.st.sweep(&l.p, now)
}

// Len returns the number of keys held (1 for a global limit).
func (l *Local) Len() int {
	if l.single {
		return 1
	}
	return l.st.len()
}

// state returns the global state.
func (l *Local) state() (a, b int64) {
	if l.p.alg == kTokenBucket || l.p.alg == kLeakyBucket {
		return l.tat.Load(), 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.a, l.b
}

// carried returns a Local for p whose keys hold old's states converted to
// the same fill at now (see params.carry). A concurrency limit over the same
// keys shares old's counters instead, so that requests admitted by old give
// their slots back to the new limit too.
func carried(old *Local, p params, global bool, maxKeys int, now int64) *Local {
	if old.keyless != global {
		return newLocal(p, global, maxKeys)
	}
	if p.alg.inFlight() && old.p.alg.inFlight() && p.resv.sameLayout(old.p.resv) {
		return &Local{p: p, keyless: old.keyless, st: old.st}
	}
	nl := newLocal(p, global, maxKeys)
	if old.single && nl.single {
		a, b := old.state()
		if na, nb, ok := p.carry(&old.p, a, b, now); ok {
			nl.tat.Store(na)
			nl.a, nl.b = na, nb
		}
		return nl
	}
	each := old.st.each
	if old.single {
		each = func(f func(h uint64, a, b int64)) { a, b := old.state(); f(keyHash(0), a, b) }
	}
	each(func(h uint64, a, b int64) {
		if na, nb, ok := p.carry(&old.p, a, b, now); ok {
			if nl.single {
				nl.tat.Store(na)
				nl.a, nl.b = na, nb
				return
			}
			nl.st.put(&nl.p, h, na, nb, now)
		}
	})
	return nl
}

// Carried returns a Local enforcing l (as NewLocal does) whose keys hold
// old's states converted to the same fill at now, the carry-over a
// recompiled limit gets: for a limiter whose share of a limit changes while
// it runs (the cluster limits' local fallback when the node count changes).
// It returns NewLocal's errors.
func Carried(old *Local, l api.Limit, maxKeys int, now int64) (*Local, error) {
	p, err := newParams(l)
	if err != nil {
		return nil, err
	}
	return carried(old, p, isGlobal(l.Key), maxKeys, now), nil
}
