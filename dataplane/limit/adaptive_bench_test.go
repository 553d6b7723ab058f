package limit

import (
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
)

// BenchmarkInFlight measures one admission and its release (take, refund)
// of a global in-flight limit, the unit of a request's concurrency decision:
//
//   - concurrency: the plain concurrency limit, the peer;
//   - adaptive: the adaptive limit, with the latency sample the release
//     feeds its controller (windows close as the clock moves);
//   - concurrency-reserve: a concurrency limit with two reserved classes,
//     requests of a reserved class (priority acquisition);
//   - adaptive-reserve: both.
//
// Target (issue 15): adaptive and reserve at most 1.5× the plain
// concurrency limit, 0 allocs. Compare within one run (-count 5, medians).
func BenchmarkInFlight(b *testing.B) {
	cls := testClasses()
	crit := cls.Index("critical")
	pinned := &api.AdaptiveSettings{MinLimit: 1000, MaxLimit: 1 << 20, InitialLimit: 1 << 20}
	cases := []struct {
		name  string
		limit api.Limit
		class int
	}{
		{"concurrency", api.Limit{ID: "c", Algorithm: api.Concurrency, Rate: 1 << 20}, 0},
		{"adaptive", api.Limit{ID: "a", Algorithm: api.Adaptive, Adaptive: pinned}, 0},
		{"concurrency-reserve", api.Limit{ID: "c", Algorithm: api.Concurrency, Rate: 1 << 20,
			Reserve: map[string]float64{"critical": 0.3, "batch": 0.2}}, crit},
		{"adaptive-reserve", api.Limit{ID: "a", Algorithm: api.Adaptive, Adaptive: pinned,
			Reserve: map[string]float64{"critical": 0.3, "batch": 0.2}}, crit},
	}
	for _, c := range cases {
		build := func(b *testing.B) *Local {
			s, err := Compile(normalized(limitsOf(c.limit)), nil, Options{SweepInterval: -1, Classes: cls})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(s.Close)
			return s.rules[0].local
		}
		b.Run(c.name+"/serial", func(b *testing.B) {
			lo := build(b)
			b.ReportAllocs()
			now := t0
			cpuLoop(b, func() { // also reports cpu-ns/op, steadier on a shared machine
				now += 1000 // 1µs per request: windows close as they would
				d := lo.TakeHashClass(7, 1, now, c.class)
				if !d.Allowed {
					b.Fatal("refused")
				}
				lo.Observe(time.Millisecond, now)
				lo.RefundHashPool(7, 1, now, d.Pool())
			})
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			lo := build(b)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					now := Now()
					d := lo.TakeHashClass(7, 1, now, c.class)
					if !d.Allowed {
						panic("refused")
					}
					lo.Observe(time.Millisecond, now)
					lo.RefundHashPool(7, 1, now, d.Pool())
				}
			})
		})
	}
}

// BenchmarkAdaptiveScenario runs issue 15's adaptive scenario on the
// simulated queueing upstream (10 workers × 50ms: capacity 200/s, offered
// 1,000/s open loop, clients give up after 1s; 30s measured after 10s of
// warm-up) and reports goodput (answers within 1s per second) and the
// upstream's p99 (ms) for: no limit, the adaptive limit, Gradient2 (the
// documented algorithm; see gradient2Sim) and a fixed concurrency limit of
// 10, the capacity, as the hindsight optimum. Each b.N iteration is one
// whole simulated run with a new seed (each -count round too); the figures
// are those of the last.
func BenchmarkAdaptiveScenario(b *testing.B) {
	peers := []struct {
		name string
		lim  func() simLimiter
	}{
		{"none", func() simLimiter { return nil }},
		{"adaptive", func() simLimiter { return newLocalSim(simAdaptiveSettings) }},
		{"gradient2", func() simLimiter { return newGradient2Sim(20, 2, 500, 500*time.Millisecond) }},
		{"fixed-10", func() simLimiter { return &fixedSim{n: simWorkers} }},
	}
	unloaded := overloadConfig(1)
	unloaded.rate = simCap / 10
	base := simulate(unloaded, nil)
	for _, p := range peers {
		b.Run(p.name, func(b *testing.B) {
			var r simResult
			for b.Loop() {
				// Each run a new seed: the nth run of every peer has seed n.
				r = simulate(overloadConfig(scenarioRuns.next(p.name)), p.lim())
			}
			b.ReportMetric(r.goodput, "goodput/s")
			b.ReportMetric(100*r.goodput/simCap, "goodput%")
			b.ReportMetric(float64(r.p99)/1e6, "p99-ms")
			b.ReportMetric(float64(r.p99)/float64(base.p99), "p99/unloaded")
		})
	}
	b.Logf("unloaded p99 %v; capacity %.0f/s", base.p99, simCap)
}

// scenarioRuns counts each peer's simulated runs (their seeds), across
// -count rounds.
var scenarioRuns = runCounter{n: map[string]uint64{}}

type runCounter struct {
	mu sync.Mutex
	n  map[string]uint64
}

func (c *runCounter) next(name string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[name]++
	return c.n[name]
}

// BenchmarkAdmitInFlight is BenchmarkInFlight through the whole Set.Admit
// and done of one request (chain, headers, the release), per in-flight
// limit: the figure a request pays. Peer: the plain concurrency limit.
func BenchmarkAdmitInFlight(b *testing.B) {
	cls := testClasses()
	pinned := &api.AdaptiveSettings{MinLimit: 1000, MaxLimit: 1 << 20, InitialLimit: 1 << 20}
	for _, c := range []struct {
		name  string
		limit api.Limit
		class int
	}{
		{"concurrency", api.Limit{ID: "c", Algorithm: api.Concurrency, Rate: 1 << 20}, 0},
		{"adaptive", api.Limit{ID: "a", Algorithm: api.Adaptive, Adaptive: pinned}, 0},
		{"concurrency-reserve", api.Limit{ID: "c", Algorithm: api.Concurrency, Rate: 1 << 20,
			Reserve: map[string]float64{"critical": 0.3, "batch": 0.2}}, cls.Index("critical")},
	} {
		b.Run(c.name, func(b *testing.B) {
			now := t0
			s, err := Compile(normalized(limitsOf(c.limit)), nil, Options{SweepInterval: -1, Classes: cls,
				Now: func() int64 { now += 500; return now }})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ch := s.Chain("orders")
			r := get("/")
			info := ipInfo("192.0.2.1")
			info.Class = c.class
			w := httptest.NewRecorder()
			b.ReportAllocs()
			cpuLoop(b, func() {
				clear(w.Header())
				done, ok := ch.Admit(w, r, info)
				if !ok {
					b.Fatal("rejected")
				}
				done()
			})
		})
	}
}
