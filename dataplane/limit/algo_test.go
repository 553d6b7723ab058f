package limit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
)

// t0 is an arbitrary origin for injected clocks, not a window boundary.
const t0 = 1000*sec + 123

// mustLocal returns a Local for l, normalized; tb may be nil (benchmark
// fixtures), in which case an error panics.
func mustLocal(tb testing.TB, l api.Limit) *Local {
	if tb != nil {
		tb.Helper()
	}
	if l.Algorithm == api.Adaptive && l.Adaptive == nil {
		// The generic tests give every algorithm a rate: an adaptive limit
		// pinned at it (minLimit = maxLimit) decides as a concurrency one.
		l.Adaptive = &api.AdaptiveSettings{MinLimit: l.Rate, MaxLimit: l.Rate, InitialLimit: l.Rate}
		l.Rate = 0
	}
	rs := (&api.RuleSet{Limits: []api.Limit{l}}).Normalize()
	lo, err := NewLocal(rs.Limits[0], 0)
	if err != nil {
		if tb == nil {
			panic(err)
		}
		tb.Fatal(err)
	}
	return lo
}

// step is one Take at t0+at with cost, and what it must decide.
type step struct {
	at        time.Duration
	cost      int64
	key       string
	allowed   bool
	remaining int64         // checked when >= 0
	retry     time.Duration // checked when > 0
	delay     time.Duration
}

func runSteps(t *testing.T, lo *Local, steps []step) {
	t.Helper()
	for i, s := range steps {
		cost := s.cost
		if cost == 0 {
			cost = 1
		}
		d, err := lo.Take(context.Background(), s.key, cost, t0+int64(s.at))
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != s.allowed {
			t.Fatalf("step %d (at %v, cost %d): allowed = %v, want %v (%+v)", i, s.at, cost, d.Allowed, s.allowed, d)
		}
		if s.remaining >= 0 && d.Remaining != s.remaining {
			t.Fatalf("step %d (at %v): remaining = %d, want %d (%+v)", i, s.at, d.Remaining, s.remaining, d)
		}
		if s.retry > 0 && d.RetryAfter != s.retry {
			t.Fatalf("step %d (at %v): retryAfter = %v, want %v", i, s.at, d.RetryAfter, s.retry)
		}
		if d.Delay != s.delay {
			t.Fatalf("step %d (at %v): delay = %v, want %v", i, s.at, d.Delay, s.delay)
		}
		if d.Allowed && d.RetryAfter != 0 {
			t.Fatalf("step %d: allowed with retryAfter %v", i, d.RetryAfter)
		}
		if !d.Allowed && d.RetryAfter <= 0 {
			t.Fatalf("step %d: rejected with retryAfter %v", i, d.RetryAfter)
		}
	}
}

func ok(at time.Duration, remaining int64) step {
	return step{at: at, allowed: true, remaining: remaining}
}
func no(at time.Duration, retry time.Duration) step {
	return step{at: at, allowed: false, remaining: -1, retry: retry}
}

func TestAlgorithms(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tests := []struct {
		desc  string
		limit api.Limit
		steps []step
	}{
		{"token bucket burst then refill", api.Limit{Algorithm: api.TokenBucket, Rate: 10, Burst: 3}, []step{
			ok(0, 2), ok(0, 1), ok(0, 0), no(0, 100*ms), no(99*ms, ms), ok(100*ms, 0), no(150*ms, 50*ms),
		}},
		{"token bucket refill after idle is capped at burst", api.Limit{Algorithm: api.TokenBucket, Rate: 10, Burst: 3}, []step{
			ok(0, 2), ok(0, 1), ok(0, 0), ok(time.Hour, 2), ok(time.Hour, 1), ok(time.Hour, 0), no(time.Hour, 100*ms),
		}},
		{"token bucket fractional rate 1 per 10s", api.Limit{Algorithm: api.TokenBucket, Rate: 1, Period: api.Duration(10 * time.Second)}, []step{
			ok(0, 0), no(time.Second, 9*time.Second), no(10*time.Second-1, 1), ok(10*time.Second, 0), no(19*time.Second, time.Second),
		}},
		{"token bucket cost larger than burst never passes", api.Limit{Algorithm: api.TokenBucket, Rate: 10, Burst: 5}, []step{
			{at: 0, cost: 6, remaining: -1, retry: 500 * ms}, {at: time.Hour, cost: 6, remaining: -1, retry: 500 * ms}, ok(time.Hour, 4),
		}},
		{"token bucket cost takes several tokens", api.Limit{Algorithm: api.TokenBucket, Rate: 10, Burst: 5}, []step{
			{at: 0, cost: 5, allowed: true, remaining: 0}, {at: 200 * ms, cost: 3, remaining: -1, retry: 100 * ms}, {at: 300 * ms, cost: 3, allowed: true, remaining: 0},
		}},
		{"fixed window edges", api.Limit{Algorithm: api.FixedWindow, Rate: 2}, []step{
			// t0 is 123ns into a window; the window ends at 1s-123ns.
			ok(0, 1), ok(0, 0), no(0, time.Second-123), no(time.Second-124, 1), ok(time.Second-123, 1), ok(time.Second-123, 0), no(2*time.Second-124, 1),
		}},
		{"fixed window cost larger than rate", api.Limit{Algorithm: api.FixedWindow, Rate: 2}, []step{
			{at: 0, cost: 3, remaining: -1, retry: time.Second}, ok(0, 1),
		}},
		{"fixed window fractional 1 per 10s", api.Limit{Algorithm: api.FixedWindow, Rate: 1, Period: api.Duration(10 * time.Second)}, []step{
			ok(0, 0), no(9*time.Second, 0), ok(10*time.Second-123, 0),
		}},
		{"sliding window weighs the previous window", api.Limit{Algorithm: api.SlidingWindow, Rate: 4}, []step{
			// Window k starts at t0-123ns. Fill it with 4.
			ok(0, 3), ok(0, 2), ok(0, 1), ok(0, 0), no(500*ms, 0),
			// 250ms into window k+1 the previous counts 4·0.75 = 3: one fits.
			ok(time.Second-123+250*ms, 0), no(time.Second-123+250*ms, 250*ms),
			// at 500ms: 4·0.5 + 1 = 3 → one fits.
			ok(time.Second-123+500*ms, 0),
			// two windows later both counts are gone.
			ok(3*time.Second, 3),
		}},
		{"sliding window cost larger than rate", api.Limit{Algorithm: api.SlidingWindow, Rate: 4}, []step{
			{at: 0, cost: 5, remaining: -1, retry: time.Second}, ok(0, 3),
		}},
		{"sliding window fractional 1 per 10s", api.Limit{Algorithm: api.SlidingWindow, Rate: 1, Period: api.Duration(10 * time.Second)}, []step{
			ok(0, 0), no(9*time.Second, 0), no(10*time.Second, 0), ok(20*time.Second-123, 0),
		}},
		{"leaky bucket delays up to maxDelay", api.Limit{Algorithm: api.LeakyBucket, Rate: 10, Burst: 5, MaxDelay: api.Duration(250 * ms)}, []step{
			{at: 0, allowed: true, remaining: 4},
			{at: 0, allowed: true, remaining: 3, delay: 100 * ms},
			{at: 0, allowed: true, remaining: 2, delay: 200 * ms},
			{at: 0, remaining: -1, retry: 50 * ms}, // would wait 300ms
			{at: 50 * ms, allowed: true, remaining: 1, delay: 250 * ms},
		}},
		{"leaky bucket queue length is burst", api.Limit{Algorithm: api.LeakyBucket, Rate: 10, Burst: 2, MaxDelay: api.Duration(time.Second)}, []step{
			{at: 0, allowed: true, remaining: 1}, {at: 0, allowed: true, remaining: 0, delay: 100 * ms}, {at: 0, remaining: -1, retry: 100 * ms},
		}},
		{"leaky bucket without maxDelay absorbs burst at once (nodelay)", api.Limit{Algorithm: api.LeakyBucket, Rate: 10, Burst: 2}, []step{
			{at: 0, allowed: true, remaining: 1}, {at: 0, allowed: true, remaining: 0}, {at: 0, remaining: -1, retry: 100 * ms},
			{at: 50 * ms, remaining: -1, retry: 50 * ms}, {at: 100 * ms, allowed: true, remaining: 0},
		}},
		{"leaky bucket fractional 1 per 10s", api.Limit{Algorithm: api.LeakyBucket, Rate: 1, Period: api.Duration(10 * time.Second)}, []step{
			{at: 0, allowed: true, remaining: 0}, {at: 5 * time.Second, remaining: -1, retry: 5 * time.Second}, {at: 10 * time.Second, allowed: true, remaining: 0},
		}},
		{"concurrency", api.Limit{Algorithm: api.Concurrency, Rate: 2}, []step{
			ok(0, 1), ok(0, 0), no(time.Hour, time.Second),
		}},
		{"keys are independent", api.Limit{Algorithm: api.TokenBucket, Rate: 1, Key: []string{"ip"}}, []step{
			{key: "a", allowed: true, remaining: 0}, {key: "b", allowed: true, remaining: 0}, {key: "a", remaining: -1, retry: time.Second},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			runSteps(t, mustLocal(t, tt.limit), tt.steps)
			if tt.limit.Algorithm != api.Concurrency && len(tt.limit.Key) == 0 {
				// The same steps through the keyed table decide the same.
				l := tt.limit
				l.Key = []string{"header:X-K"}
				runSteps(t, mustLocal(t, l), tt.steps)
			}
		})
	}
}

func TestRefund(t *testing.T) {
	t.Parallel()
	for _, alg := range api.Algorithms {
		t.Run(string(alg), func(t *testing.T) {
			t.Parallel()
			for _, key := range [][]string{nil, {"ip"}} {
				l := api.Limit{Algorithm: alg, Rate: 2, Key: key}
				if alg == api.LeakyBucket {
					l.MaxDelay = api.Duration(time.Second)
				}
				lo := mustLocal(t, l)
				ctx := context.Background()
				for range 2 {
					if d, _ := lo.Take(ctx, "k", 1, t0); !d.Allowed {
						t.Fatalf("take: %+v", d)
					}
				}
				if d, _ := lo.Take(ctx, "k", 1, t0); d.Allowed {
					t.Fatalf("third take allowed: %+v", d)
				}
				lo.Refund(ctx, "k", 1, t0)
				if d, _ := lo.Take(ctx, "k", 1, t0); !d.Allowed {
					t.Fatalf("take after refund rejected: %+v", d)
				}
			}
		})
	}
}

// TestSlidingWindowErrorBound checks the bound stated in the package doc
// against an exact log of admitted requests: the estimate differs from the
// true count over the last period by at most (1−f)·prev above and f·prev
// below, and no period-long interval ever admits more than 2·rate.
func TestSlidingWindowErrorBound(t *testing.T) {
	t.Parallel()
	const rate = 50
	period := sec
	p, err := newParams(api.Limit{Algorithm: api.SlidingWindow, Rate: rate, Period: api.Duration(period)})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var a, b int64
	var log []int64
	now := t0
	for range 20000 {
		now += rng.Int64N(period / 40)
		if rng.IntN(10) == 0 {
			now += rng.Int64N(period) // bursts and lulls
		}
		idx, elapsed := p.window(now)
		prev, cur := swCounts(a, b, idx)
		// Exact count over (now−period, now].
		exact := int64(0)
		for _, at := range log {
			if at > now-period {
				exact++
			}
		}
		est := float64(prev)*float64(period-elapsed)/float64(period) + float64(cur)
		f := float64(elapsed) / float64(period)
		if over := est - float64(exact); over > (1-f)*float64(prev)+1e-9 || -over > f*float64(prev)+1e-9 {
			t.Fatalf("estimate %.2f vs exact %d (prev %d, f %.3f) outside the bound", est, exact, prev, f)
		}
		if exact > 2*rate {
			t.Fatalf("%d admitted within one period; bound is %d", exact, 2*rate)
		}
		var d Decision
		a, b, d = p.take(a, b, now, 1)
		if d.Allowed {
			log = append(log, now)
		}
	}
	if len(log) < 1000 {
		t.Fatalf("only %d admitted: the test exercised little", len(log))
	}
}

// TestConcurrentCallers runs many goroutines against one limit and checks
// that exactly the capacity is admitted at a frozen instant.
func TestConcurrentCallers(t *testing.T) {
	t.Parallel()
	for _, alg := range api.Algorithms {
		for _, key := range [][]string{nil, {"ip"}} {
			t.Run(fmt.Sprintf("%s/%v", alg, key), func(t *testing.T) {
				t.Parallel()
				l := api.Limit{Algorithm: alg, Rate: 100, Key: key}
				if alg == api.LeakyBucket {
					l.MaxDelay = api.Duration(time.Minute)
				}
				lo := mustLocal(t, l)
				var admitted atomic.Int64
				var wg sync.WaitGroup
				for g := range 8 {
					wg.Go(func() {
						for range 50 {
							if d, _ := lo.Take(context.Background(), "k", 1, t0); d.Allowed {
								admitted.Add(1)
							}
						}
						_ = g
					})
				}
				wg.Wait()
				if got := admitted.Load(); got != 100 {
					t.Fatalf("admitted %d, want 100", got)
				}
			})
		}
	}
}

func TestPerTIsExactDivision(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		l := api.Limit{Algorithm: api.TokenBucket, Rate: 1 + rng.Int64N(1_000_000_000), Period: api.Duration(time.Millisecond + time.Duration(rng.Int64N(int64(24*time.Hour)))), Burst: 1 + rng.Int64N(1_000_000_000)}
		p, err := newParams(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range []int64{0, 1, p.t - 1, p.t, p.t + 1, p.tau, p.tau - 1, rng.Int64N(p.tau + 1), (p.tau / p.t) * p.t, (p.tau/p.t)*p.t - 1} {
			if x < 0 || x > p.tau {
				continue
			}
			if got, want := p.perT(x), x/p.t; got != want {
				t.Fatalf("perT(%d) with t=%d = %d, want %d", x, p.t, got, want)
			}
		}
	}
}

// TestEveryAlgorithmHasEveryOperation runs every operation of the
// algorithms on every algorithm api declares (and carries between every
// pair), so that a new algorithm that one switch misses fails here instead
// of silently behaving as another one in that operation.
func TestEveryAlgorithmHasEveryOperation(t *testing.T) {
	t.Parallel()
	if len(kinds) != len(api.Algorithms) {
		t.Fatalf("kinds has %d algorithms, api declares %d", len(kinds), len(api.Algorithms))
	}
	limitOf := func(a api.Algorithm) api.Limit {
		l := api.Limit{ID: "x", Algorithm: a, Rate: 10, Period: api.Duration(time.Second)}
		if a == api.LeakyBucket {
			l.MaxDelay = api.Duration(time.Second)
		}
		return l
	}
	const now = int64(1000 * time.Second)
	for _, a := range api.Algorithms {
		t.Run(string(a), func(t *testing.T) {
			t.Parallel()
			p, err := newParams(limitOf(a))
			if err != nil {
				t.Fatal(err)
			}
			if kinds[a] == 0 || p.alg != kinds[a] {
				t.Fatalf("kind %d, want kinds[%q] = %d", p.alg, a, kinds[a])
			}
			_ = p.alg.class()
			if p.capacity() <= 0 {
				t.Fatalf("capacity %d", p.capacity())
			}
			na, nb, d := p.take(0, 0, now, 1)
			if !d.Allowed {
				t.Fatalf("a fresh key refused one unit: %+v", d)
			}
			if p.idle(na, nb, now) {
				t.Fatal("a key just taken from is idle")
			}
			ra, rb := p.refund(na, nb, now, 1)
			if !p.idle(ra, rb, now) {
				t.Fatalf("refunding the only unit left state (%d, %d)", ra, rb)
			}
			if d := p.never(na, nb, now); d.Allowed || d.RetryAfter <= 0 {
				t.Fatalf("never = %+v", d)
			}
			if _, _, d := p.take(na, nb, now, p.capacity()+1); d.Allowed {
				t.Fatal("cost above capacity admitted")
			}
			for _, from := range api.Algorithms {
				old, err := newParams(limitOf(from))
				if err != nil {
					t.Fatal(err)
				}
				oa, ob, _ := old.take(0, 0, now, 5)
				p.carry(&old, oa, ob, now)
			}
		})
	}
}

// TestUnknownKindIsUnreachable checks that no algorithm outside api's list
// makes params, and that an operation on a kind no switch handles panics
// instead of acting as a concurrency limit (what the default branches did).
func TestUnknownKindIsUnreachable(t *testing.T) {
	t.Parallel()
	if _, err := newParams(api.Limit{ID: "x", Algorithm: "gcra", Rate: 1}); err == nil {
		t.Fatal("newParams accepted an algorithm api does not declare")
	}
	bogus := params{alg: kConcurrency + 1, rate: 10, period: sec, t: 1, burst: 10}
	tests := []struct {
		desc string
		op   func()
	}{
		{"take", func() { bogus.take(0, 0, 0, 1) }},
		{"idle", func() { bogus.idle(0, 0, 0) }},
		{"refund", func() { bogus.refund(0, 0, 0, 1) }},
		{"capacity", func() { bogus.capacity() }},
		{"class", func() { bogus.alg.class() }},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			defer func() {
				if recover() == nil {
					t.Fatalf("%s of an unknown kind did not panic", tc.desc)
				}
			}()
			tc.op()
		})
	}
}
