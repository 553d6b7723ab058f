package limit

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/metrics"
)

func TestHistogramBuckets(t *testing.T) {
	t.Parallel()
	for _, v := range []int64{1, 7, 8, 9, 15, 16, 1000, 12345, int64(time.Millisecond), int64(time.Second), int64(time.Hour)} {
		i := histIndex(v)
		if i < 0 || i >= histBuckets {
			t.Fatalf("histIndex(%d) = %d out of range", v, i)
		}
		got := histValue(i)
		if rel := math.Abs(got-float64(v)) / float64(v); rel > 0.07 {
			t.Errorf("histValue(histIndex(%d)) = %v, %.1f%% off", v, got, 100*rel)
		}
		if i > 0 && histIndex(v) < histIndex(v-1) {
			t.Errorf("histIndex not monotonic at %d", v)
		}
	}
}

// TestAdaptiveUnderOverload runs the scenario on the simulated
// queueing upstream, 5× its capacity: with the adaptive limit the upstream's
// p99 stays within 2× its unloaded p99 and goodput at 80% of capacity or
// more; without a limit p99 explodes and goodput collapses (clients time out).
func TestAdaptiveUnderOverload(t *testing.T) {
	t.Parallel()
	unloaded := overloadConfig(1)
	unloaded.rate = simCap / 10
	base := simulate(unloaded, nil)
	for _, seed := range []uint64{1, 2, 3} {
		cfg := overloadConfig(seed)
		with := simulate(cfg, newLocalSim(simAdaptiveSettings))
		without := simulate(cfg, nil)
		t.Logf("seed %d: unloaded p99 %v; adaptive p99 %v goodput %.0f/s (capacity %.0f/s); no limit p99 %v goodput %.0f/s",
			seed, base.p99, with.p99, with.goodput, simCap, without.p99, without.goodput)
		if with.p99 > 2*base.p99 {
			t.Errorf("seed %d: adaptive p99 %v above 2× the unloaded p99 %v", seed, with.p99, base.p99)
		}
		if with.goodput < 0.8*simCap {
			t.Errorf("seed %d: adaptive goodput %.0f/s below 80%% of capacity %.0f/s", seed, with.goodput, simCap)
		}
		if without.p99 < 10*base.p99 || without.goodput > 0.5*simCap {
			t.Errorf("seed %d: without a limit p99 %v goodput %.0f/s: the scenario does not overload", seed, without.p99, without.goodput)
		}
	}
}

// TestAdaptiveRecovers drops the upstream to 3 workers for 10s and brings
// it back: the limit follows it down and, once the upstream is fast again,
// is back to 90% of where it was within 10s.
func TestAdaptiveRecovers(t *testing.T) {
	t.Parallel()
	const slowFrom, slowTo = 15 * time.Second, 25 * time.Second
	cfg := overloadConfig(4)
	cfg.dur = int64(45 * time.Second)
	cfg.workers = func(t int64) int {
		if t >= int64(slowFrom) && t < int64(slowTo) {
			return 3
		}
		return simWorkers
	}
	var before, during []int64
	recovered := time.Duration(-1)
	var settled float64
	cfg.sample = int64(100 * time.Millisecond)
	cfg.onTick = func(at, lim int64) {
		switch d := time.Duration(at); {
		case d >= 10*time.Second && d < slowFrom:
			before = append(before, lim)
		case d >= slowTo-3*time.Second && d < slowTo:
			during = append(during, lim)
		case d >= slowTo && recovered < 0:
			if settled == 0 {
				settled = mean(before)
			}
			if float64(lim) >= 0.9*settled {
				recovered = d - slowTo
			}
		}
	}
	simulate(cfg, newLocalSim(simAdaptiveSettings))
	t.Logf("limit before %.1f, while slow %.1f, recovered to 90%% after %v", mean(before), mean(during), recovered)
	if mean(during) > 0.6*mean(before) {
		t.Errorf("limit while the upstream had 3 of 10 workers: %.1f, before %.1f: it did not follow", mean(during), mean(before))
	}
	if recovered < 0 || recovered > 10*time.Second {
		t.Errorf("limit took %v to recover (want within 10s)", recovered)
	}
}

func mean(xs []int64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += float64(x)
	}
	return s / float64(len(xs))
}

// feed gives the controller n samples of rtt spread over one window
// starting at *now, with peak requests in flight, and moves *now past it.
// The window's first sample closes the previous window (its own sample
// counts there); feed returns the limit in force after it, the one the rest
// of the window runs with, and whether the window is a probe.
func feed(c *adaptive, now *int64, n int, rtt time.Duration, peak int64) (limit int64, probing bool) {
	step := c.window / int64(n)
	for i := range n {
		c.admitted(peak)
		c.observe(int64(rtt), *now)
		if i == 0 {
			c.mu.Lock()
			limit, probing = c.current(), c.probing
			c.mu.Unlock()
		}
		*now += step
	}
	return limit, probing
}

func TestAdaptiveController(t *testing.T) {
	t.Parallel()
	settings := api.AdaptiveSettings{MinLimit: 5, MaxLimit: 100, InitialLimit: 20, Percentile: 0.9, Buffer: 0.1,
		Window: api.Duration(time.Second), ProbeInterval: api.Duration(time.Hour)}
	tests := []struct {
		desc  string
		steps func(c *adaptive, now *int64)
		check func(t *testing.T, c *adaptive)
	}{
		{"latency at the minimum grows the limit by about √limit per window", func(c *adaptive, now *int64) {
			for range 5 {
				feed(c, now, 50, 10*time.Millisecond, 100)
			}
		}, func(t *testing.T, c *adaptive) {
			// The first window is the initial probe, 3 more are judged:
			// 20 → 22.2 → 24.6 → 27.1 with a smoothing of 0.5.
			if l := c.current(); l < 26 || l > 28 {
				t.Errorf("limit %d after 3 windows judged at minRTT from 20, want 26-28", l)
			}
		}},
		{"doubled latency shrinks the limit, not below minLimit", func(c *adaptive, now *int64) {
			feed(c, now, 50, 10*time.Millisecond, 100) // minRTT 10ms
			for range 20 {
				feed(c, now, 50, 40*time.Millisecond, 100)
			}
		}, func(t *testing.T, c *adaptive) {
			if l := c.current(); l != 5 {
				t.Errorf("limit %d, want minLimit 5", l)
			}
		}},
		{"never above maxLimit", func(c *adaptive, now *int64) {
			for range 100 {
				feed(c, now, 50, 10*time.Millisecond, 1000)
			}
		}, func(t *testing.T, c *adaptive) {
			if l := c.current(); l != 100 {
				t.Errorf("limit %d, want maxLimit 100", l)
			}
		}},
		{"an unused limit does not creep up", func(c *adaptive, now *int64) {
			for range 20 {
				feed(c, now, 50, 10*time.Millisecond, 3) // 3 in flight of 20
			}
		}, func(t *testing.T, c *adaptive) {
			if l := c.current(); l != 20 {
				t.Errorf("limit %d, want the initial 20 held", l)
			}
		}},
		{"a window with too few samples is extended, not judged", func(c *adaptive, now *int64) {
			feed(c, now, 50, 10*time.Millisecond, 100)
			c.observe(int64(10*time.Millisecond), *now) // closes that window
			l := c.current()
			for range 5 {
				c.observe(int64(50*time.Millisecond), *now) // 5 samples over 5 windows
				*now += c.window
			}
			if c.current() != l {
				panic("judged on fewer than adaptiveMinSamples samples")
			}
		}, func(t *testing.T, c *adaptive) {}},
		{"latency within the buffer holds the gradient at 1", func(c *adaptive, now *int64) {
			feed(c, now, 50, 10*time.Millisecond, 100)
			l0 := c.current()
			feed(c, now, 50, 10500*time.Microsecond, 100) // +5%, buffer 10%
			if c.current() <= l0 {
				panic("latency within the buffer shrank the limit")
			}
		}, func(t *testing.T, c *adaptive) {}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			now := t0
			c := newAdaptive(&settings, now, 1)
			tc.steps(c, &now)
			tc.check(t, c)
		})
	}
}

// TestAdaptiveProbe checks the minimum-RTT probe: it runs every
// probeInterval (±25%) for one window at half the limit (never below
// minLimit, so it refuses no more than a limit pinned at minLimit would),
// re-measures the minimum there, restores the limit, and so lets a limit
// recover after the upstream became slower for good.
func TestAdaptiveProbe(t *testing.T) {
	t.Parallel()
	settings := api.AdaptiveSettings{MinLimit: 5, MaxLimit: 1000, InitialLimit: 50, Percentile: 0.9, Buffer: 0.1,
		Window: api.Duration(time.Second), ProbeInterval: api.Duration(10 * time.Second)}
	now := t0
	c := newAdaptive(&settings, now, 99)
	feed(c, &now, 50, 10*time.Millisecond, 1000) // minRTT 10ms
	// The upstream is now slower for good: 30ms at any load. Without a
	// probe the limit would stay at minLimit forever.
	type window struct {
		limit   int64
		probing bool
	}
	var ws []window
	for range 40 {
		l, p := feed(c, &now, 50, 30*time.Millisecond, 1000)
		ws = append(ws, window{l, p})
	}
	probes := 0
	for k := 1; k+1 < len(ws); k++ {
		if !ws[k].probing {
			continue
		}
		probes++
		if want := max(5, ws[k-1].limit/2); ws[k].limit < want-1 || ws[k].limit > want+1 {
			t.Errorf("window %d: probe at limit %d, want half of %d (at least minLimit 5)", k, ws[k].limit, ws[k-1].limit)
		}
		if ws[k+1].limit != ws[k-1].limit {
			t.Errorf("window %d: limit %d after the probe, %d before it", k, ws[k+1].limit, ws[k-1].limit)
		}
	}
	if probes < 2 || probes > 6 {
		t.Fatalf("%d probes in 40s with a 10s ±25%% interval", probes)
	}
	if st := c.status(); st.MinRTT < 25*time.Millisecond {
		t.Errorf("minRTT %v after the probes; the upstream's is 30ms", st.MinRTT)
	}
	if c.current() < 40 {
		t.Errorf("limit %d: did not grow from minLimit 5 after the minimum was re-measured", c.current())
	}
}

// TestAdaptiveCompareGradient2 runs the overload scenario with the adaptive
// limit, a fixed concurrency limit sized right and Gradient2, and logs the
// figures (BenchmarkAdaptiveScenario reports them); it checks only that the
// adaptive limit is not worse than Gradient2 by more than 10% on goodput.
func TestAdaptiveCompareGradient2(t *testing.T) {
	t.Parallel()
	cfg := overloadConfig(5)
	ad := simulate(cfg, newLocalSim(simAdaptiveSettings))
	g2 := simulate(cfg, newGradient2Sim(20, 2, 500, 500*time.Millisecond))
	fx := simulate(cfg, &fixedSim{n: simWorkers})
	t.Logf("adaptive p99 %v goodput %.0f; gradient2 p99 %v goodput %.0f; fixed(10) p99 %v goodput %.0f",
		ad.p99, ad.goodput, g2.p99, g2.goodput, fx.p99, fx.goodput)
	if ad.goodput < 0.9*g2.goodput {
		t.Errorf("adaptive goodput %.0f below 90%% of Gradient2's %.0f", ad.goodput, g2.goodput)
	}
}

// TestAdaptiveThroughAdmit drives an adaptive limit through Set.Admit with
// an injected clock: done feeds the RTT (admission to done), the limit
// follows it, sluice_limit_adaptive_limit shows it, a shadow limit admits
// beyond it, and a recompiled (changed) limit starts from the learned value.
func TestAdaptiveThroughAdmit(t *testing.T) {
	t.Parallel()
	clk := newClock()
	m := metrics.New()
	l := api.Limit{ID: "ad", Algorithm: api.Adaptive, Adaptive: &api.AdaptiveSettings{MinLimit: 2, MaxLimit: 100, InitialLimit: 10,
		Window: api.Duration(100 * time.Millisecond), ProbeInterval: api.Duration(time.Hour)}}
	s := mustCompile(t, limitsOf(l), nil, clk.opts(Options{Metrics: m}))
	info := ipInfo("192.0.2.1")
	// round admits n requests at once, then finishes them after rtt.
	round := func(s *Set, n int, rtt time.Duration) (admitted int) {
		var dones []func()
		for range n {
			if _, done, ok := admit(s, get("/"), info); ok {
				dones = append(dones, done)
			}
		}
		clk.add(rtt)
		for _, d := range dones {
			d()
		}
		return len(dones)
	}
	if got := round(s, 20, 100*time.Millisecond); got != 5 {
		t.Fatalf("first window (the initial probe, at half of 10) admitted %d, want 5", got)
	}
	for range 40 { // fast and busy: the limit grows
		round(s, 200, 100*time.Millisecond)
	}
	grown := s.rules[0].ad.current()
	if grown <= 20 {
		t.Fatalf("limit %d after 40 busy windows at a steady RTT", grown)
	}
	if g := testutil.ToFloat64(m.AdaptiveLimit.WithLabelValues("ad", "")); int64(g) != grown {
		t.Errorf("sluice_limit_adaptive_limit = %v, limit %d", g, grown)
	}
	for range 40 { // the upstream slows down 4×: the limit falls
		round(s, 200, 400*time.Millisecond)
	}
	if fell := s.rules[0].ad.current(); fell >= grown/2 {
		t.Errorf("limit %d after the RTT quadrupled (was %d)", fell, grown)
	}
	// A changed limit (here: shadow) starts from what was learned.
	learned := s.rules[0].ad.current()
	l.Shadow = true
	s2 := mustCompile(t, limitsOf(l), s, clk.opts(Options{Metrics: m}))
	if got := s2.rules[0].ad.current(); got != learned {
		t.Errorf("recompiled limit starts at %d, learned %d", got, learned)
	}
	// Shadow: everything is admitted, the would-be rejections counted.
	if got := round(s2, 300, 400*time.Millisecond); got != 300 {
		t.Errorf("shadow adaptive limit admitted %d of 300", got)
	}
	if n := testutil.ToFloat64(m.LimitDecision("ad", metrics.DecisionShadowDeny, "", "", "")); n == 0 {
		t.Error("no shadow rejection counted")
	}
}
