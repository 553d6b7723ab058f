package limit

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicegw/sluice/api"
)

// The adaptive controller's fixed tuning (the rule's settings are in
// api.AdaptiveSettings).
const (
	// adaptiveSmoothing is the weight of a window's new limit against the
	// current one: limit ← limit·(1−s) + new·s.
	adaptiveSmoothing = 0.5
	// adaptiveMinGradient bounds one window's decrease: the gradient is
	// clamped into [adaptiveMinGradient, 1].
	adaptiveMinGradient = 0.5
	// adaptiveMinSamples is the number of latency samples a window needs
	// before it is judged; a window with fewer is extended.
	adaptiveMinSamples = 10
	// adaptiveReprobeWindows is how many windows after a probe that found
	// the minimum RTT well below the one it replaced the next probe runs.
	adaptiveReprobeWindows = 4
	// adaptiveProbeJitter is the relative jitter of the probe interval.
	adaptiveProbeJitter = 0.25
	// histBuckets is the latency histogram's size: 8 linear sub-buckets
	// per power of two of nanoseconds, about 9% wide each.
	histSub     = 8
	histBuckets = 64 * histSub
)

// adaptive is the gradient controller of one adaptive limit (see the package
// doc, "Adaptive limits"). Its hot path (current, observe) takes no lock and
// allocates nothing; the window's update runs once per window, under mu, in
// the goroutine of the request whose sample closes the window. Time is the
// now argument, on Now's scale. Safe for concurrent use.
type adaptive struct {
	minLimit, maxLimit float64
	pct, buffer        float64
	window, probe      int64 // ns

	limit  atomic.Int64 // the limit in force, integer
	peak   atomic.Int64 // most requests in flight seen this window
	winEnd atomic.Int64 // when the current window closes; 0 before the first sample
	winMin atomic.Int64 // smallest RTT this window (ns); MaxInt64 when none
	hist   [histBuckets]atomic.Uint32

	mu        sync.Mutex
	exact     float64 // the limit, unrounded
	minRTT    int64   // ns; 0 until measured
	probeAt   int64   // when the next probe window starts
	probing   bool    // the current window re-measures minRTT
	rng       uint64  // xorshift state for the probe jitter
	lastRTT   int64   // the last window's sampled percentile, ns (for status)
	onChange  func(limit int64)
	probeSeen int64 // probes run (for tests and status)
}

// adaptiveSettings returns s with api's defaults applied (Normalize writes
// them out; this is for limits built by hand).
func adaptiveSettings(s *api.AdaptiveSettings) api.AdaptiveSettings {
	var a api.AdaptiveSettings
	if s != nil {
		a = *s
	}
	if a.MinLimit <= 0 {
		a.MinLimit = api.DefaultAdaptiveMinLimit
	}
	if a.MaxLimit <= 0 {
		a.MaxLimit = max(api.DefaultAdaptiveMaxLimit, a.MinLimit)
	}
	a.MaxLimit = max(a.MaxLimit, a.MinLimit)
	if a.InitialLimit <= 0 {
		a.InitialLimit = api.DefaultAdaptiveInitialLimit
	}
	a.InitialLimit = min(max(a.InitialLimit, a.MinLimit), a.MaxLimit)
	if a.Percentile <= 0 || a.Percentile > 1 {
		a.Percentile = api.DefaultAdaptivePercentile
	}
	if a.Buffer <= 0 {
		a.Buffer = api.DefaultAdaptiveBuffer
	}
	if a.Window <= 0 {
		a.Window = api.Duration(api.DefaultAdaptiveWindow)
	}
	if a.ProbeInterval <= 0 {
		a.ProbeInterval = api.Duration(api.DefaultAdaptiveProbeInterval)
	}
	return a
}

// newAdaptive returns a controller for s starting at s.InitialLimit, whose
// first probe is one probe interval (jittered) after now. seed varies the
// jitter between limits (and nodes); any value works.
func newAdaptive(s *api.AdaptiveSettings, now int64, seed uint64) *adaptive {
	a := adaptiveSettings(s)
	c := &adaptive{
		minLimit: float64(a.MinLimit), maxLimit: float64(a.MaxLimit),
		pct: a.Percentile, buffer: a.Buffer,
		window: int64(a.Window), probe: int64(a.ProbeInterval),
		exact: float64(a.InitialLimit), rng: seed | 1,
	}
	c.limit.Store(a.InitialLimit)
	c.winMin.Store(math.MaxInt64)
	// The first window is a probe: the minimum is then measured at half the
	// initial limit rather than at whatever load the limit starts under.
	c.probing = true
	c.probeAt = now + c.jitter(c.probe)
	c.limit.Store(max(a.MinLimit, a.InitialLimit/2))
	return c
}

// current returns the limit in force.
func (c *adaptive) current() int64 { return c.limit.Load() }

// admitted notes that a request was admitted with inFlight requests now in
// flight for its key, so that a window in which the limit was never
// approached does not raise it (see update).
func (c *adaptive) admitted(inFlight int64) {
	for {
		p := c.peak.Load()
		if inFlight <= p || c.peak.CompareAndSwap(p, inFlight) {
			return
		}
	}
}

// observe records the round-trip time of one finished request at now and,
// when the sample closes the window, updates the limit.
func (c *adaptive) observe(rtt, now int64) {
	if rtt < 1 {
		rtt = 1
	}
	c.hist[histIndex(rtt)].Add(1)
	for {
		m := c.winMin.Load()
		if rtt >= m || c.winMin.CompareAndSwap(m, rtt) {
			break
		}
	}
	end := c.winEnd.Load()
	if end == 0 {
		c.winEnd.CompareAndSwap(0, now+c.window)
		return
	}
	if now < end {
		return
	}
	if !c.winEnd.CompareAndSwap(end, now+c.window) {
		return // another sample closes this window
	}
	c.update(now)
}

// histIndex maps an RTT in ns (≥ 1) to its histogram bucket.
func histIndex(rtt int64) int {
	o := bits.Len64(uint64(rtt)) - 1 // 2^o ≤ rtt < 2^(o+1)
	if o < 3 {
		return int(rtt) // exact below 8 ns
	}
	sub := int(uint64(rtt)>>(o-3)) & (histSub - 1)
	return o*histSub + sub
}

// histValue is the middle of bucket i, in ns.
func histValue(i int) float64 {
	if i < histSub {
		return float64(i)
	}
	o, sub := i/histSub, i%histSub
	lo := float64(uint64(histSub+sub) << (o - 3))
	return lo + float64(uint64(1)<<(o-3))/2
}

// update closes a window at now: it reads and clears the window's samples
// and applies the gradient. The gradient is minRTT·(1+buffer)/sample,
// clamped into [adaptiveMinGradient, 1]; the new limit is
// limit·gradient + √limit, smoothed, and never raised above what the window
// used (peak in flight ×2) so that an idle limit does not creep up.
func (c *adaptive) update(now int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var total uint64
	for i := range c.hist {
		total += uint64(c.hist[i].Load())
	}
	if total < adaptiveMinSamples {
		return // too few samples to judge: the window goes on (it was extended)
	}
	var counts [histBuckets]uint32
	total = 0
	for i := range c.hist {
		counts[i] = c.hist[i].Swap(0)
		total += uint64(counts[i])
	}
	wmin := c.winMin.Swap(math.MaxInt64) // the sample is at least the window's fastest
	peak := c.peak.Swap(0)
	want := uint64(math.Ceil(c.pct * float64(total)))
	var cum uint64
	sample := 0.0
	for i, n := range counts {
		cum += uint64(n)
		if cum >= want {
			sample = histValue(i)
			break
		}
	}
	sample = max(sample, float64(wmin))
	c.lastRTT = int64(sample)

	if c.probing {
		// The probe window ran at half the limit. A lower latency than the
		// minimum is the new minimum. A higher one replaces it only when
		// the probe ran at minLimit (the limit had nowhere lower to go):
		// then it is the upstream's own latency at the least load the
		// limit allows, an upstream that became slower for good, and
		// judging it against a latency it can no longer reach would pin
		// the limit at minLimit forever. Above minLimit a higher probe
		// latency may be queueing (the upstream still drains a backlog,
		// or half the limit still exceeds its capacity); taking it would
		// let the limit ratchet up from probe to probe.
		probeRan := int64(max(c.minLimit, c.exact/2))
		switch {
		case c.minRTT == 0 || int64(sample) < c.minRTT:
			if c.minRTT > 0 && sample < 0.9*float64(c.minRTT) {
				// The minimum was well above what the upstream can do
				// (first measured under load): probe again soon, until
				// it settles, rather than a whole interval later.
				c.probeAt = now + adaptiveReprobeWindows*c.window
			}
			c.minRTT = int64(sample)
		case probeRan <= int64(c.minLimit):
			c.minRTT = int64(sample)
		}
		c.probing = false
		c.probeSeen++
		c.set(int64(c.exact))
		return
	}
	if c.minRTT == 0 || int64(sample) < c.minRTT {
		c.minRTT = int64(sample)
	}
	if now >= c.probeAt {
		// The next window is a probe: at half the limit (never below
		// minLimit), so that the latency measured is one of an upstream
		// with room to spare.
		c.probing = true
		c.probeAt = now + c.jitter(c.probe)
		c.set(int64(max(c.minLimit, c.exact/2)))
		return
	}
	gradient := min(1, max(adaptiveMinGradient, float64(c.minRTT)*(1+c.buffer)/sample))
	next := c.exact*gradient + math.Sqrt(c.exact)
	if next > c.exact && float64(peak)*2 < c.exact {
		next = c.exact // the window never came near the limit: hold it
	}
	next = c.exact*(1-adaptiveSmoothing) + next*adaptiveSmoothing
	c.exact = min(c.maxLimit, max(c.minLimit, next))
	c.set(int64(c.exact))
}

// set puts lim in force and reports a change. c.mu must be held.
func (c *adaptive) set(lim int64) {
	if lim != c.limit.Swap(lim) && c.onChange != nil {
		c.onChange(lim)
	}
}

// jitter returns d ± adaptiveProbeJitter·d, uniformly.
func (c *adaptive) jitter(d int64) int64 {
	c.rng ^= c.rng << 13
	c.rng ^= c.rng >> 7
	c.rng ^= c.rng << 17
	f := float64(c.rng>>11)/(1<<53)*2 - 1 // [-1, 1)
	return d + int64(f*adaptiveProbeJitter*float64(d))
}

// AdaptiveStatus is the state of one adaptive limit's controller.
type AdaptiveStatus struct {
	Limit     int64         `json:"limit"`
	MinRTT    time.Duration `json:"minRtt"`
	SampleRTT time.Duration `json:"sampleRtt"`
	Probes    int64         `json:"probes"`
}

func (c *adaptive) status() AdaptiveStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return AdaptiveStatus{Limit: c.limit.Load(), MinRTT: time.Duration(c.minRTT), SampleRTT: time.Duration(c.lastRTT), Probes: c.probeSeen}
}

// compileAdaptive returns the controller of adaptive limit l. An unchanged
// limit keeps its rule (and controller) through package carry; a changed one
// gets a new controller that starts from prev's current limit (clamped into
// the new bounds) rather than from initialLimit, so that a rule edit does
// not throw away what was learned.
func compileAdaptive(l api.Limit, prev *rule, opts Options, now int64, variant string) *adaptive {
	c := newAdaptive(l.Adaptive, now, VariantSeed(l.ID, variant, now))
	if prev != nil && prev.ad != nil {
		c.mu.Lock()
		c.exact = min(c.maxLimit, max(c.minLimit, prev.ad.exactLimit()))
		c.minRTT = prev.ad.minRTTNow()
		c.limit.Store(int64(c.exact))
		c.mu.Unlock()
	}
	if m := opts.Metrics; m != nil {
		g := m.AdaptiveLimit.WithLabelValues(l.ID, variant)
		g.Set(float64(c.current()))
		c.onChange = func(lim int64) { g.Set(float64(lim)) }
	}
	return c
}

func (c *adaptive) exactLimit() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.exact
}

func (c *adaptive) minRTTNow() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.minRTT
}

// VariantSeed is the probe-jitter seed of a controller: different limits and
// nodes (through now) probe at different moments.
func VariantSeed(rule, variant string, now int64) uint64 {
	return uint64(VariantBucket(rule, variant))*0x9e3779b97f4a7c15 ^ uint64(now)
}

// AdaptiveRule is the state of one adaptive limit (or variant of one) for a
// node's status.
type AdaptiveRule struct {
	Rule    string `json:"rule"`
	Variant string `json:"variant,omitempty"`
	AdaptiveStatus
}

// Adaptive returns the state of every adaptive limit of s, variants included,
// in rule order.
func (s *Set) Adaptive() []AdaptiveRule {
	var out []AdaptiveRule
	for _, ru := range s.rules {
		for _, r := range append([]*rule{ru}, ru.variants...) {
			if r.ad != nil {
				out = append(out, AdaptiveRule{Rule: r.l.ID, Variant: r.variant, AdaptiveStatus: r.ad.status()})
			}
		}
	}
	return out
}

// Observe feeds an adaptive Local the round-trip time of a request it
// admitted, which finished at now (Set does this itself, from Admit to
// done). It does nothing for other algorithms.
func (l *Local) Observe(rtt time.Duration, now int64) {
	if l.p.ad != nil {
		l.p.ad.observe(int64(rtt), now)
	}
}

// AdaptiveLimit returns an adaptive Local's current limit, or 0 for other
// algorithms.
func (l *Local) AdaptiveLimit() int64 {
	if l.p.ad == nil {
		return 0
	}
	return l.p.ad.current()
}
