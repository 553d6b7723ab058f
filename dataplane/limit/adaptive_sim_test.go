package limit

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/sluicegw/sluice/api"
)

// simLimiter is what the queueing simulation asks of a concurrency limiter:
// admit a request at now, and learn that one finished at now after rtt.
type simLimiter interface {
	acquire(now int64) bool
	release(now, rtt int64)
	limit() int64
}

// simConfig describes a simulated upstream and its load. The upstream is a
// pool of workers (its capacity in requests at once) with a FIFO queue in
// front: a request's latency is its wait for a worker plus its service time,
// so latency grows with concurrency once the workers are busy. Load is open
// loop (a Poisson stream of arrivals at rate per second); a client gives up
// after timeout, but the upstream, unaware, still serves the request.
type simConfig struct {
	workers func(t int64) int // capacity at time t (ns since start)
	service int64             // mean service time, ns
	rate    float64           // arrivals per second
	dur     int64             // simulated ns
	timeout int64             // client timeout, ns
	from    int64             // measure completions from this time on
	seed    uint64
	sample  int64                    // every sample ns, record the limit
	onTick  func(t int64, lim int64) // called every sample ns
}

// simResult is what one run measured over [from, dur).
type simResult struct {
	goodput            float64 // answers within the timeout, per second
	p50                time.Duration
	p99                time.Duration // upstream latency (queue + service) of requests served
	admitted, rejected int
}

type simDone struct {
	at, arrived int64
}

type simHeap []simDone

func (h simHeap) Len() int           { return len(h) }
func (h simHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h simHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *simHeap) Push(x any)        { *h = append(*h, x.(simDone)) }
func (h *simHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// simulate runs cfg against lim (nil: no limit) with a clock of its own.
// Time starts at t0 on the limiter's scale.
func simulate(cfg simConfig, lim simLimiter) simResult {
	rng := rand.New(rand.NewPCG(cfg.seed, 7))
	var busy simHeap
	var queue []int64 // arrival times waiting for a worker
	var lat []int64
	var res simResult
	good := 0
	next := int64(0)
	tick := int64(0)
	serve := func(arrived, now int64) {
		// Service time: the mean ±20%, uniform.
		s := cfg.service + int64((rng.Float64()*0.4-0.2)*float64(cfg.service))
		heap.Push(&busy, simDone{at: now + s, arrived: arrived})
	}
	for {
		// The next event: an arrival or a completion, whichever is first.
		nextDone := int64(math.MaxInt64)
		if len(busy) > 0 {
			nextDone = busy[0].at
		}
		now := min(next, nextDone)
		if now >= cfg.dur {
			break
		}
		for cfg.onTick != nil && tick <= now {
			cfg.onTick(tick, limitOf(lim))
			tick += cfg.sample
		}
		if nextDone <= next {
			d := heap.Pop(&busy).(simDone)
			rtt := d.at - d.arrived
			if lim != nil {
				lim.release(t0+d.at, rtt)
			}
			if d.at >= cfg.from {
				lat = append(lat, rtt)
				if rtt <= cfg.timeout {
					good++
				}
			}
			// The freed worker takes the next queued request, if the
			// capacity (which may have shrunk) allows.
			for len(queue) > 0 && len(busy) < cfg.workers(now) {
				serve(queue[0], now)
				queue = queue[1:]
			}
			continue
		}
		// An arrival.
		next = now + int64(rng.ExpFloat64()/cfg.rate*float64(time.Second))
		if lim != nil && !lim.acquire(t0+now) {
			if now >= cfg.from {
				res.rejected++
			}
			continue
		}
		if now >= cfg.from {
			res.admitted++
		}
		if len(busy) < cfg.workers(now) && len(queue) == 0 {
			serve(now, now)
		} else {
			queue = append(queue, now)
		}
	}
	span := float64(cfg.dur-cfg.from) / float64(time.Second)
	res.goodput = float64(good) / span
	if len(lat) > 0 {
		slices.Sort(lat)
		res.p50 = time.Duration(lat[len(lat)/2])
		res.p99 = time.Duration(lat[min(len(lat)-1, len(lat)*99/100)])
	}
	return res
}

func limitOf(l simLimiter) int64 {
	if l == nil {
		return 0
	}
	return l.limit()
}

// localSim drives an adaptive Local as Set does: TakeHash on admission,
// Observe and RefundHash when the request finishes.
type localSim struct{ lo *Local }

func newLocalSim(s api.AdaptiveSettings) *localSim {
	p, err := newParams(api.Limit{ID: "sim", Algorithm: api.Adaptive, Adaptive: &s})
	if err != nil {
		panic(err)
	}
	p.ad = newAdaptive(&s, t0, 42)
	return &localSim{lo: newLocal(p, true, 1)}
}

func (l *localSim) acquire(now int64) bool { return l.lo.TakeHash(0, 1, now).Allowed }
func (l *localSim) release(now, rtt int64) {
	l.lo.Observe(time.Duration(rtt), now)
	l.lo.RefundHash(0, 1, now)
}
func (l *localSim) limit() int64 { return l.lo.AdaptiveLimit() }

// fixedSim is a plain concurrency limit of n.
type fixedSim struct {
	n, inFlight int64
}

func (f *fixedSim) acquire(int64) bool {
	if f.inFlight >= f.n {
		return false
	}
	f.inFlight++
	return true
}
func (f *fixedSim) release(int64, int64) { f.inFlight-- }
func (f *fixedSim) limit() int64         { return f.n }

// gradient2Sim is Netflix concurrency-limits' Gradient2 as its
// documentation describes it, the peer the adaptive limit is compared with:
// the short-term RTT is the window's mean, the long-term RTT an exponential
// average of it over 600 windows (drained by 5% when more than twice the
// short one); the gradient is clamp(tolerance·long/short, 0.5, 1) with
// tolerance 1.5; the new limit is limit·gradient + 4 (the queue), smoothed by
// 0.2, not raised while less than half of it is in use. The Go port
// (github.com/platinummonkey/go-concurrency-limits) is not served by the
// module proxy here, so this re-implementation stands in for it.
type gradient2Sim struct {
	lim, minL, maxL float64
	inFlight        int64
	windowEnd, win  int64
	sum             int64
	n               int64
	peak            int64
	long            float64
	longN           int
}

func newGradient2Sim(initial, minL, maxL float64, window time.Duration) *gradient2Sim {
	return &gradient2Sim{lim: initial, minL: minL, maxL: maxL, win: int64(window)}
}

func (g *gradient2Sim) acquire(now int64) bool {
	if g.inFlight >= int64(g.lim) {
		return false
	}
	g.inFlight++
	g.peak = max(g.peak, g.inFlight)
	return true
}

func (g *gradient2Sim) release(now, rtt int64) {
	g.inFlight--
	g.sum += rtt
	g.n++
	if g.windowEnd == 0 {
		g.windowEnd = now + g.win
	}
	if now < g.windowEnd || g.n < adaptiveMinSamples {
		return
	}
	short := float64(g.sum) / float64(g.n)
	peak := g.peak
	g.sum, g.n, g.peak, g.windowEnd = 0, 0, 0, now+g.win
	const longWindow, warmup = 600, 10
	if g.longN < warmup {
		g.longN++
		g.long += (short - g.long) / float64(g.longN)
	} else {
		g.long += (short - g.long) * 2 / (longWindow + 1)
	}
	if g.long/short > 2 {
		g.long *= 0.95
	}
	if float64(peak) < g.lim/2 {
		return
	}
	gradient := max(0.5, min(1.0, 1.5*g.long/short))
	next := g.lim*gradient + 4
	next = g.lim*0.8 + next*0.2
	g.lim = max(g.minL, min(g.maxL, next))
}

func (g *gradient2Sim) limit() int64 { return int64(g.lim) }

// The scenario of issue 15: an upstream of 10 workers serving in 50ms
// (capacity 200/s), offered 5× that.
const (
	simWorkers = 10
	simService = 50 * time.Millisecond
	simCap     = float64(simWorkers) / 0.05
)

func overloadConfig(seed uint64) simConfig {
	return simConfig{
		workers: func(int64) int { return simWorkers },
		service: int64(simService),
		rate:    5 * simCap,
		dur:     int64(40 * time.Second),
		from:    int64(10 * time.Second),
		timeout: int64(time.Second),
		seed:    seed,
	}
}

// simAdaptiveSettings are the settings the scenario's adaptive limit uses.
var simAdaptiveSettings = api.AdaptiveSettings{MinLimit: 2, MaxLimit: 500, InitialLimit: 20, Percentile: 0.9,
	Buffer: 0.1, Window: api.Duration(500 * time.Millisecond), ProbeInterval: api.Duration(20 * time.Second)}
