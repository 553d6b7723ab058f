package limit

import (
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/sluicegw/sluice/api"
)

// maxTau bounds a bucket's tolerance (capacity × emission interval) so that
// TAT arithmetic never overflows: 2^61 ns is about 73 years.
const maxTau = int64(1) << 61

// sec is one second in nanoseconds.
const sec = int64(time.Second)

// concurrencyRetryAfter is the Retry-After of a rejected concurrency limit:
// when a slot frees up depends on requests in flight, not on a clock.
const concurrencyRetryAfter = time.Second

// algKind is an algorithm api declares, as a small integer: the hot path
// switches on it instead of comparing api.Algorithm strings. Its zero value
// is no algorithm. newParams makes params only of a kind listed in kinds, so
// every switch on a kind has a case for every kind and its default is
// unreachable: it panics with unhandled rather than silently behave as one
// of the others (a test runs every operation of every algorithm api.Algorithms
// lists).
type algKind uint8

const (
	kTokenBucket algKind = iota + 1
	kLeakyBucket
	kFixedWindow
	kSlidingWindow
	kAdaptive // a concurrency limit whose capacity follows latency (adaptive.go)
	kConcurrency
)

// kinds maps every algorithm api declares to its kind.
var kinds = map[api.Algorithm]algKind{
	api.TokenBucket: kTokenBucket, api.LeakyBucket: kLeakyBucket, api.FixedWindow: kFixedWindow,
	api.SlidingWindow: kSlidingWindow, api.Concurrency: kConcurrency, api.Adaptive: kAdaptive,
	// A quota counts exactly in Redis (package redislimit); in memory (a
	// cluster limit's local fallback, tests) it is a fixed window of its
	// period.
	api.Quota: kFixedWindow,
}

// inFlight reports whether kind k counts requests in flight (concurrency,
// adaptive) rather than units over time.
func (k algKind) inFlight() bool { return k == kConcurrency || k == kAdaptive }

// unhandled is the panic of a switch that misses kind k: a programming
// error, since newParams admits only the kinds in kinds.
func unhandled(op string, k algKind) string {
	return fmt.Sprintf("limit: %s has no case for algorithm kind %d", op, k)
}

// class is where a limit runs in a route's chain (see Chain): rate limits
// first, then concurrency limits, then leaky buckets, so that a leaky-bucket
// wait starts only once every other limit has passed.
type class uint8

const (
	classRate class = iota
	classConcurrency
	classLeaky
)

// class returns the chain position of kind k.
func (k algKind) class() class {
	switch k {
	case kTokenBucket, kFixedWindow, kSlidingWindow:
		return classRate
	case kConcurrency, kAdaptive:
		return classConcurrency
	case kLeakyBucket:
		return classLeaky
	}
	panic(unhandled("class", k))
}

// params are one limit's settings in the units the algorithms compute in.
type params struct {
	alg      algKind
	rate     int64 // units per period; concurrency: in flight at once
	period   int64 // ns; 0 for concurrency
	burst    int64 // token_bucket capacity, leaky_bucket queue length
	maxDelay int64 // leaky_bucket, ns
	t        int64 // token/leaky bucket emission interval, ns (≥ 1)
	tau      int64 // token/leaky bucket tolerance: burst × t, ≤ maxTau
	invT     float64
	ad       *adaptive // adaptive: the controller whose limit applies (rate is maxLimit)
	resv     *reserve  // concurrency, adaptive: the reserved pools; nil for none
}

// inFlightLimit is the current capacity of a concurrency or adaptive limit.
func (p *params) inFlightLimit() int64 {
	if p.ad != nil {
		return p.ad.current()
	}
	return p.rate
}

// perT returns floor(x/t) for 0 ≤ x ≤ tau without a hardware division (which
// costs about as much as the rest of a token-bucket decision): the quotient is
// at most burst ≤ 2^30, so the float64 product x·(1/t), good to a few parts in
// 2^53, is off by at most one, and one correction step makes it exact.
func (p *params) perT(x int64) int64 {
	q := int64(float64(x) * p.invT)
	if q*p.t > x {
		q--
	} else if (q+1)*p.t <= x {
		q++
	}
	return q
}

// newParams converts a normalized limit to params.
func newParams(l api.Limit) (params, error) {
	p := params{alg: kinds[l.Algorithm], rate: l.Rate, period: int64(l.NominalPeriod()), burst: l.Burst, maxDelay: int64(l.MaxDelay)}
	if p.alg == kAdaptive {
		// The controller is attached by the caller (newAdaptive); until
		// then the limit is the initial one, at most maxLimit.
		s := adaptiveSettings(l.Adaptive)
		p.rate, p.period = s.MaxLimit, 0
		return p, nil
	}
	if p.rate <= 0 {
		return p, fmt.Errorf("rate %d: must be > 0", p.rate)
	}
	switch p.alg {
	case kConcurrency:
		p.period = 0
		return p, nil
	case kTokenBucket, kLeakyBucket:
		if p.burst == 0 {
			p.burst = p.rate
		}
		if p.burst < 0 {
			return p, fmt.Errorf("burst %d: must be >= 0", p.burst)
		}
	case kSlidingWindow, kFixedWindow:
		if p.rate > math.MaxUint32 {
			return p, fmt.Errorf("rate %d: must be at most %d for %s", p.rate, uint32(math.MaxUint32), l.Algorithm)
		}
	default:
		return p, fmt.Errorf("unknown algorithm %q", l.Algorithm)
	}
	if p.period <= 0 {
		p.period = int64(api.DefaultPeriod)
	}
	if p.maxDelay < 0 {
		p.maxDelay = 0
	}
	// Emission interval rounded to the nearest nanosecond, at least 1.
	p.t = max(1, (p.period+p.rate/2)/p.rate)
	p.invT = 1 / float64(p.t)
	hi, lo := bits.Mul64(uint64(p.burst), uint64(p.t))
	if hi != 0 || lo > uint64(maxTau) {
		p.tau = maxTau
	} else {
		p.tau = int64(lo)
	}
	return p, nil
}

// capacity is the most units one key can hold: the bucket or queue size, the
// window's rate, or the concurrency limit.
func (p *params) capacity() int64 {
	switch p.alg {
	case kTokenBucket, kLeakyBucket:
		return p.burst
	case kFixedWindow, kSlidingWindow, kConcurrency, kAdaptive:
		return p.rate
	}
	panic(unhandled("capacity", p.alg))
}

// never is the decision for a cost above capacity, which can never be
// admitted: the key's current remaining and reset, and as RetryAfter the time
// the key takes to refill completely (a client that honours it at least does
// not hammer), never zero.
func (p *params) never(a, b, now int64) Decision {
	_, _, d := p.take(a, b, now, 0)
	d.Allowed, d.Delay = false, 0
	switch p.alg {
	case kTokenBucket, kLeakyBucket:
		d.RetryAfter = time.Duration(p.tau)
	case kConcurrency, kAdaptive:
		d.RetryAfter = concurrencyRetryAfter
	case kFixedWindow, kSlidingWindow:
		d.RetryAfter = time.Duration(p.period)
	default:
		panic(unhandled("never", p.alg))
	}
	return d
}

// window returns the index of the fixed window holding now and the time
// elapsed in it. Windows are aligned on multiples of the period on the
// limiter clock's scale.
func (p *params) window(now int64) (idx, elapsed int64) {
	idx = now / p.period
	elapsed = now - idx*p.period
	if elapsed < 0 {
		idx--
		elapsed += p.period
	}
	return idx, elapsed
}

// take applies one Take of cost units to a key's state (a, b) at now and
// returns the new state and the decision. The zero state is a fresh key's.
//
// State per algorithm:
//
//	token_bucket, leaky_bucket: a = TAT (ns), b unused
//	fixed_window:               a = window index + 1, b = count
//	sliding_window:             a = window index + 1, b = previous<<32 | current count
//	concurrency:                a = in flight, b unused
func (p *params) take(a, b, now, cost int64) (na, nb int64, d Decision) {
	if cost > p.capacity() {
		return a, b, p.never(a, b, now)
	}
	switch p.alg {
	case kTokenBucket:
		na, d = p.tbTake(a, now, cost)
		return na, b, d
	case kLeakyBucket:
		na, d = p.lbTake(a, now, cost)
		return na, b, d
	case kFixedWindow:
		return p.fwTake(a, b, now, cost)
	case kSlidingWindow:
		return p.swTake(a, b, now, cost)
	case kConcurrency, kAdaptive:
		lim := p.inFlightLimit()
		d = Decision{Limit: lim}
		if a+cost > lim {
			d.Remaining = max(0, lim-a)
			d.RetryAfter = concurrencyRetryAfter
			return a, b, d
		}
		d.Allowed = true
		d.Remaining = lim - a - cost
		return a + cost, b, d
	}
	panic(unhandled("take", p.alg))
}

// tbTake is the token bucket as GCRA virtual scheduling. The bucket holds
// burst tokens and gains one every t ns. Its state is the theoretical arrival
// time TAT, the instant the bucket will be full again: the bucket holds
// burst - (TAT-now)/t tokens, and exactly burst when TAT ≤ now. Taking n
// tokens moves TAT to max(TAT, now) + n·t and is allowed iff the result is at
// most tau = burst·t ahead of now, i.e. iff at least n tokens are there.
func (p *params) tbTake(tat, now, cost int64) (int64, Decision) {
	d := Decision{Limit: p.rate}
	if tat < now {
		tat = now
	}
	next := tat + cost*p.t
	if next-now > p.tau {
		d.Remaining = p.perT(p.tau - (tat - now))
		d.Reset = time.Duration(tat - now)
		d.RetryAfter = time.Duration(next - p.tau - now)
		return tat, d
	}
	d.Allowed = true
	d.Remaining = p.perT(p.tau - (next - now))
	d.Reset = time.Duration(next - now)
	return next, d
}

// lbTake is the leaky bucket as a queue of burst units draining one every t
// ns, nginx limit_req burst= semantics. A request joins the queue iff the
// queue with its own units holds at most burst units (next−now ≤ tau).
//
// With maxDelay 0 (nginx's nodelay) an admitted request goes at once: the
// queue absorbs a burst of up to burst units above the rate and then drains at
// the rate, so under any load the limit admits burst + rate·elapsed units,
// exactly what a token bucket of capacity burst does. With maxDelay > 0 (nginx
// without nodelay) an admitted request waits until the units ahead of it have
// left (Delay = TAT−now), and a request whose wait would exceed maxDelay is
// refused: the queue is then at most min(burst, maxDelay/t + 1) deep.
func (p *params) lbTake(tat, now, cost int64) (int64, Decision) {
	d := Decision{Limit: p.rate}
	if tat < now {
		tat = now
	}
	wait := tat - now
	next := tat + cost*p.t
	if next-now > p.tau || (p.maxDelay > 0 && wait > p.maxDelay) {
		d.Remaining = max(0, (p.tau-wait)/p.t)
		d.Reset = time.Duration(wait)
		retry := next - p.tau - now
		if p.maxDelay > 0 {
			retry = max(retry, wait-p.maxDelay)
		}
		d.RetryAfter = time.Duration(max(retry, 1))
		return tat, d
	}
	d.Allowed = true
	if p.maxDelay > 0 {
		d.Delay = time.Duration(wait)
	}
	d.Remaining = (p.tau - (next - now)) / p.t
	d.Reset = time.Duration(next - now)
	return next, d
}

func (p *params) fwTake(a, b, now, cost int64) (int64, int64, Decision) {
	idx, elapsed := p.window(now)
	d := Decision{Limit: p.rate, Reset: time.Duration(p.period - elapsed)}
	count := b
	if a != idx+1 {
		count = 0
	}
	if count+cost > p.rate {
		d.Remaining = max(0, p.rate-count)
		d.RetryAfter = d.Reset
		return a, b, d
	}
	d.Allowed = true
	d.Remaining = p.rate - count - cost
	return idx + 1, count + cost, d
}

// swCounts returns the previous and current window counts of a sliding-window
// state as seen from window idx.
func swCounts(a, b, idx int64) (prev, cur int64) {
	switch a {
	case idx + 1:
		return int64(uint64(b) >> 32), b & math.MaxUint32
	case idx:
		return b & math.MaxUint32, 0
	}
	return 0, 0
}

// swFits reports whether prev·(P−elapsed) + cur·P ≤ rate·P, in 128 bits.
func (p *params) swFits(prev, cur, elapsed int64) bool {
	h1, l1 := bits.Mul64(uint64(prev), uint64(p.period-elapsed))
	h2, l2 := bits.Mul64(uint64(cur), uint64(p.period))
	l, c := bits.Add64(l1, l2, 0)
	h, _ := bits.Add64(h1, h2, c)
	hr, lr := bits.Mul64(uint64(p.rate), uint64(p.period))
	return h < hr || (h == hr && l <= lr)
}

// swPrevWeight returns ceil(prev·(P−elapsed)/P): the previous window's
// contribution to the estimate, rounded up.
func (p *params) swPrevWeight(prev, elapsed int64) int64 {
	hi, lo := bits.Mul64(uint64(prev), uint64(p.period-elapsed))
	lo, c := bits.Add64(lo, uint64(p.period-1), 0)
	hi += c
	q, _ := bits.Div64(hi, lo, uint64(p.period))
	return int64(q)
}

// swTake is the sliding-window counter: the count over the last period is
// estimated as prev·(P−elapsed)/P + cur, the previous fixed window's count
// weighted by the share of it the sliding window still covers (see the
// package doc for the error bound).
func (p *params) swTake(a, b, now, cost int64) (int64, int64, Decision) {
	idx, elapsed := p.window(now)
	prev, cur := swCounts(a, b, idx)
	d := Decision{Limit: p.rate, Reset: time.Duration(p.period - elapsed)}
	if !p.swFits(prev, cur+cost, elapsed) {
		d.Remaining = max(0, p.rate-cur-p.swPrevWeight(prev, elapsed))
		d.RetryAfter = p.swRetry(prev, cur, cost, elapsed)
		return a, b, d
	}
	cur += cost
	d.Allowed = true
	d.Remaining = max(0, p.rate-cur-p.swPrevWeight(prev, elapsed))
	return idx + 1, prev<<32 | cur, d
}

// swRetry returns how long until cost units fit, assuming no other traffic.
func (p *params) swRetry(prev, cur, cost, elapsed int64) time.Duration {
	// Within this window: need prev·(P−e) ≤ (rate−cur−cost)·P.
	if room := p.rate - cur - cost; room >= 0 && prev > 0 {
		e := p.period - mulDiv(room, p.period, prev) // smallest e that fits
		return time.Duration(max(1, e-elapsed))
	}
	// In the next window cur becomes prev: need cur·(P−e) ≤ (rate−cost)·P.
	wait := p.period - elapsed
	if cur > 0 {
		wait += max(0, p.period-mulDiv(p.rate-cost, p.period, cur))
	}
	return time.Duration(max(1, wait))
}

// mulDiv returns floor(x·y/z) for non-negative x, y and positive z, saturating
// at MaxInt64.
func mulDiv(x, y, z int64) int64 {
	hi, lo := bits.Mul64(uint64(x), uint64(y))
	if hi >= uint64(z) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(z))
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// refund gives cost units back to a key's state.
func (p *params) refund(a, b, now, cost int64) (int64, int64) {
	switch p.alg {
	case kTokenBucket, kLeakyBucket:
		// Moving TAT back is exactly putting n tokens back (or freeing n
		// queue places); below now the bucket is full either way.
		return max(a-cost*p.t, min(a, now)), b
	case kFixedWindow:
		idx, _ := p.window(now)
		if a == idx+1 {
			return a, max(0, b-cost)
		}
		return a, b // an earlier window: nothing to give back
	case kSlidingWindow:
		idx, _ := p.window(now)
		if a == idx+1 || a == idx {
			cur := max(0, (b&math.MaxUint32)-cost)
			return a, b&^math.MaxUint32 | cur
		}
		return a, b
	case kConcurrency, kAdaptive:
		return max(0, a-cost), b
	}
	panic(unhandled("refund", p.alg))
}

// idle reports whether a key's state is a fresh key's as far as every future
// decision is concerned, so that the key may be forgotten.
func (p *params) idle(a, b, now int64) bool {
	switch p.alg {
	case kTokenBucket, kLeakyBucket:
		return a <= now
	case kFixedWindow:
		idx, _ := p.window(now)
		return a != idx+1 || b == 0
	case kSlidingWindow:
		idx, _ := p.window(now)
		return (a != idx+1 && a != idx) || b == 0 || (a == idx && b&math.MaxUint32 == 0)
	case kConcurrency, kAdaptive:
		return a == 0 && b == 0 // b: requests in reserved pools
	}
	panic(unhandled("idle", p.alg))
}

// carry converts a key's state under old settings to the state under p with
// the same fill, as of now. The fill is the share of the key's capacity in use:
//
//	token_bucket:   (TAT−now)/tau, the share of tokens missing
//	leaky_bucket:   (TAT−now)/tau, the share of the queue occupied
//	fixed_window:   count/rate in the current window
//	sliding_window: each window's count/rate (same period), or the estimate/rate
//	concurrency:    the number in flight, carried unscaled: those requests are
//	                real and will give their slots back
//
// A fill cannot be carried between concurrency and a rate algorithm; such a
// key starts fresh. ok is false when the result is a fresh key's state.
func (p *params) carry(old *params, a, b, now int64) (na, nb int64, ok bool) {
	if old.idle(a, b, now) {
		return 0, 0, false
	}
	if p.alg.inFlight() != old.alg.inFlight() {
		return 0, 0, false
	}
	if p.alg.inFlight() {
		if !p.resv.sameLayout(old.resv) {
			return 0, 0, false
		}
		return a, b, true
	}
	// Same windowed algorithm and period: scale each count.
	if p.alg == old.alg && p.period == old.period && (p.alg == kFixedWindow || p.alg == kSlidingWindow) {
		if p.alg == kFixedWindow {
			return a, scaleRound(b, p.rate, old.rate), true
		}
		prev := scaleRound(int64(uint64(b)>>32), p.rate, old.rate)
		cur := scaleRound(b&math.MaxUint32, p.rate, old.rate)
		return a, prev<<32 | cur, true
	}
	// Otherwise through the fill as a fraction used/capacity, in 128 bits.
	var used, capOld int64
	switch old.alg {
	case kTokenBucket, kLeakyBucket:
		used, capOld = a-now, old.tau
	case kFixedWindow:
		if idx, _ := old.window(now); a == idx+1 {
			used = b
		}
		capOld = old.rate
	case kSlidingWindow:
		idx, elapsed := old.window(now)
		prev, cur := swCounts(a, b, idx)
		used, capOld = cur+old.swPrevWeight(prev, elapsed), old.rate
	default: // concurrency returned above
		panic(unhandled("carry from", old.alg))
	}
	used = min(max(used, 0), capOld)
	switch p.alg {
	case kTokenBucket, kLeakyBucket:
		return now + scaleRound(used, p.tau, capOld), 0, true
	case kFixedWindow, kSlidingWindow:
		idx, _ := p.window(now)
		return idx + 1, scaleRound(used, p.rate, capOld), true
	}
	panic(unhandled("carry to", p.alg)) // concurrency returned above
}

// scaleRound returns x·num/den rounded to the nearest integer, for
// 0 ≤ x ≤ den.
func scaleRound(x, num, den int64) int64 {
	hi, lo := bits.Mul64(uint64(x), uint64(num))
	lo, c := bits.Add64(lo, uint64(den/2), 0)
	hi += c
	q, _ := bits.Div64(hi, lo, uint64(den))
	return int64(q)
}
