package limit

import (
	"fmt"
	"maps"
	"slices"

	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/dataplane/reqview/classify"
)

// maxReservedClasses is how many classes one limit may reserve capacity for:
// their in-flight counts share one int64 of the key's state, 16 bits each.
const maxReservedClasses = 4

// reservedPoolMax is the largest reserved pool (16 bits).
const reservedPoolMax = 1<<16 - 1

// reserve is a concurrency or adaptive limit's reserved pools: slot[class]
// is the pool of class index class (−1: none), share[j] the share of the
// capacity pool j holds. A key's state is then a = requests in flight in
// the unreserved (shared) pool, b = the reserved pools' counts, 16 bits
// each. Immutable.
type reserve struct {
	slot  []int8
	share []float64
	ids   []string // class id of each pool
}

// newReserve compiles a limit's reserve against the rule set's classes.
func newReserve(res map[string]float64, classes *classify.Classes) (*reserve, error) {
	if len(res) == 0 {
		return nil, nil
	}
	if len(res) > maxReservedClasses {
		return nil, fmt.Errorf("reserve: %d classes; a limit may reserve capacity for at most %d", len(res), maxReservedClasses)
	}
	rv := &reserve{slot: make([]int8, len(classes.IDs()))}
	for i := range rv.slot {
		rv.slot[i] = -1
	}
	for _, id := range slices.Sorted(maps.Keys(res)) {
		i := classes.Index(id)
		if i < 0 {
			return nil, fmt.Errorf("reserve: class %q is not declared", id)
		}
		rv.slot[i] = int8(len(rv.share))
		rv.share = append(rv.share, res[id])
		rv.ids = append(rv.ids, id)
	}
	return rv, nil
}

// sameLayout reports whether two reserves keep a key's state alike, so that
// requests admitted under one can be released under the other.
func (rv *reserve) sameLayout(o *reserve) bool {
	if rv == nil || o == nil {
		return rv == nil && o == nil
	}
	return slices.Equal(rv.slot, o.slot)
}

// pools returns the reserved pool sizes for capacity c and the unreserved
// remainder.
func (rv *reserve) pools(c int64) (res [maxReservedClasses]int64, shared int64) {
	shared = c
	for j, s := range rv.share {
		res[j] = min(reservedPoolMax, int64(s*float64(c)))
		shared -= res[j]
	}
	return res, max(shared, 0)
}

// takeReserved is take for a concurrency or adaptive limit with reserved
// pools: a request of a class with a pool takes from it while it has room,
// then from the shared pool; any other request only from the shared pool.
// In flight, every pool stays within its size, so the key never holds more
// than the capacity. d.pool records where the units went (0 shared, j+1
// reserved pool j) for refundReserved.
func (p *params) takeReserved(a, b, cost int64, class int) (na, nb int64, d Decision) {
	rv := p.resv
	c := p.inFlightLimit()
	res, shared := rv.pools(c)
	d = Decision{Limit: c}
	j := int8(-1)
	if class >= 0 && class < len(rv.slot) {
		j = rv.slot[class]
	}
	room := max(0, shared-a)
	if j >= 0 {
		used := b >> (16 * j) & reservedPoolMax
		if free := res[j] - used; free >= cost {
			d.Allowed, d.pool = true, j+1
			d.Remaining = room + free - cost
			return a, b + cost<<(16*j), d
		} else if free > 0 {
			room += free
		}
	}
	if a+cost <= shared {
		d.Allowed = true
		d.Remaining = room - cost
		return a + cost, b, d
	}
	d.Remaining = room
	d.RetryAfter = concurrencyRetryAfter
	return a, b, d
}

// refundReserved gives back cost units to the pool they came from.
func refundReserved(a, b, cost int64, pool int8) (int64, int64) {
	if pool == 0 {
		return max(0, a-cost), b
	}
	j := pool - 1
	used := b >> (16 * j) & reservedPoolMax
	return a, b - min(used, cost)<<(16*j)
}

// takeClass is store.take for a limit with reserved pools.
func (s *store) takeClass(p *params, h uint64, now, cost int64, class int) Decision {
	sh := s.shard(h)
	sh.mu.Lock()
	i := sh.find(h)
	if i < 0 {
		if i = sh.insert(s, p, h, now); i < 0 {
			sh.mu.Unlock()
			return p.never(0, 0, now)
		}
	}
	sl := &sh.slots[i]
	sl.h |= refBit
	var d Decision
	sl.a, sl.b, d = p.takeReserved(sl.a, sl.b, cost, class)
	sh.mu.Unlock()
	return d
}

// refundPool is store.refund for a limit with reserved pools.
func (s *store) refundPool(h uint64, cost int64, pool int8) {
	sh := s.shard(h)
	sh.mu.Lock()
	if i := sh.find(h); i >= 0 {
		sl := &sh.slots[i]
		sl.a, sl.b = refundReserved(sl.a, sl.b, cost, pool)
	}
	sh.mu.Unlock()
}

// TakeHashClass is TakeHash for a request of class index class (see
// Classes): a concurrency or adaptive limit with reserved pools admits it
// from its class's pool, then from the unreserved one. For any other limit
// it is TakeHash. Release what it took with RefundHashPool and the
// decision's Pool.
func (l *Local) TakeHashClass(h uint64, cost, now int64, class int) Decision {
	if l.p.resv == nil {
		return l.TakeHash(h, cost, now)
	}
	if cost < 1 {
		cost = 1
	}
	d := l.st.takeClass(&l.p, keyHash(h), now, cost, class)
	if l.p.ad != nil && d.Allowed {
		l.p.ad.admitted(d.Limit - d.Remaining)
	}
	return d
}

// RefundHashPool gives back what TakeHashClass took, to the pool (d.Pool())
// it came from.
func (l *Local) RefundHashPool(h uint64, cost, now int64, pool int8) {
	if l.p.resv == nil {
		l.RefundHash(h, cost, now)
		return
	}
	if cost < 1 {
		cost = 1
	}
	l.st.refundPool(keyHash(h), cost, pool)
}

// Pool is where an admitted request of a limit with reserved pools took its
// units: 0 the unreserved pool, j+1 reserved pool j.
func (d Decision) Pool() int8 { return d.pool }

func newDecCounters(m *metrics.Metrics, rule, class, variant, tier string) decCounters {
	return decCounters{
		allow:    m.LimitDecision(rule, metrics.DecisionAllow, class, variant, tier),
		reject:   m.LimitDecision(rule, metrics.DecisionReject, class, variant, tier),
		shadow:   m.LimitDecision(rule, metrics.DecisionShadowDeny, class, variant, tier),
		exempt:   m.LimitDecision(rule, metrics.DecisionExempt, class, variant, tier),
		storeErr: m.LimitDecision(rule, metrics.DecisionStoreError, class, variant, tier),
	}
}

// counters returns the decision counters of class index class: the class's
// own for a limit with a reserve, else the rule's.
func (ru *rule) counters(class int) *decCounters {
	if class >= 0 && class < len(ru.byClass) {
		return &ru.byClass[class]
	}
	return &ru.dc
}
