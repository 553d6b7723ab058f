// Package degrade holds the gateway's three-level degrade controllers: one
// Controller per degrade rule, shared by the rule's routes. Level 0 serves
// normally, level 1 sheds level1ShedRatio of the clients, level 2 sheds every
// request; a shed request receives the rule's fallback.
//
// # Where degrade sits on the request path
//
// The gateway runs: match route → degrade → limits → breaker → proxy → record.
//
//   - Degrade comes first because shedding is the cheapest answer and exists to
//     protect everything behind it: a shed request consumes no rate-limit
//     tokens (so degrade does not eat the quota of the clients it keeps), takes
//     no concurrency slot, and never reaches a failing upstream.
//   - Limits come before the breaker so that a request a limit rejects is
//     never counted as a breaker probe or call: the breaker only sees requests
//     that will really be forwarded.
//   - The breaker comes last, right before the proxy, so that its Allow/Done
//     pair brackets exactly the upstream exchange: a half-open probe slot is
//     taken only by a request that goes out, and its outcome is the upstream's.
//   - Record (degrade's success rate) and Breaker.Done are both fed with the
//     upstream outcome of forwarded requests only.
//
// # Levels
//
// In manual mode the level is the rule's level. In auto mode the controller
// measures, per window of the rule's routes, the arrival rate (QPS: every
// request Admit sees, shed or not, so that shedding does not hide demand) and
// the success rate of the requests forwarded upstream (Record; a window with
// fewer than MinSuccessSamples recorded requests has no success rate and
// cannot fire a successRateBelow trigger — this is what lets a controller at
// level 2, which forwards nothing, come back down). At the end of each window:
//
//   - the target is 2 if the level2 trigger fires, else 1 if level1 fires,
//     else 0 (a trigger fires when any of its set conditions holds: qps >
//     qpsAbove, success rate < successRateBelow); level 2 wins;
//   - a target above the level steps up to it at once;
//   - a target below the level is a healthy window; after recoverAfter healthy
//     windows in a row the level steps down by one (and the count restarts,
//     so 2 → 0 takes 2 × recoverAfter healthy windows); a window whose target
//     equals the level restarts the count.
//
// Flapping: a step up within recoverAfter windows of the last step down is a
// flap and doubles the effective recoverAfter, up to MaxRecoverFactor times the
// rule's value. It relaxes by halving (never below the rule's value) after
// every 2 × recoverAfter (effective) consecutive windows at level 0 in which no
// trigger fired.
//
// Windows are advanced lazily by Admit and Record from the caller's clock;
// idle windows count as healthy. There are no goroutines.
//
// # Overrides
//
// An override (SetOverride, the admin endpoint's POST /degrade, later etcd
// node overrides) forces a level until a deadline, in either mode; it expires
// by itself. Overrides are kept per rule id across hot swaps, whether or not
// the rule changed, and dropped when the rule is removed. While an override is
// active, auto mode keeps measuring and stepping underneath it.
//
// # Consistent shedding
//
// Level 1 sheds a client when h < level1ShedRatio, where h is the client key's
// 64-bit hash (KeyHash or HashKey over the rule's key, default [ip]) mixed
// with a per-rule seed (a hash of the rule id) and mapped to [0,1). A client
// is therefore either always shed or never shed at level 1, the same on every
// node and across hot swaps; different rules shed different clients.
//
// # Fallback
//
// A shed request gets the rule's fallback status (503 by default) and
// Retry-After, with a body chosen by Accept (see WriteFallback): the HTML
// fallback for clients that ask for text/html explicitly (browsers), the JSON
// fallback for clients that accept application/json, application/* or */*
// (API clients, and clients that send no Accept), otherwise no body.
//
// # Metrics and logs
//
// sluice_degrade_level{rule} is the effective level (override included),
// sluice_degrade_transitions_total{rule,from,to} counts its changes, and
// sluice_degrade_shed_total{rule} counts shed requests. Level changes are
// logged; shed requests are logged through a small token bucket (ShedLogRate
// lines per second, bursts of ShedLogBurst) shared by every rule of the node,
// and dropped lines are counted in sluice_log_dropped_total.
//
// # Time
//
// now is nanoseconds on a monotonic scale supplied by the caller, the same
// scale as limit.Now and breaker.Now.
package degrade

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/reqview"
	"github.com/sluicegw/sluice/dataplane/reqview/classify"
)

// Tuning constants, documented in the package comment.
const (
	// MinSuccessSamples is the number of recorded requests a window needs
	// before its success rate can fire a trigger.
	MinSuccessSamples = 10
	// MaxRecoverFactor caps how far flapping can stretch recoverAfter.
	MaxRecoverFactor = 16
	// ShedLogRate and ShedLogBurst shape the shed-request log bucket.
	ShedLogRate  = 5
	ShedLogBurst = 10
)

const notStarted = math.MinInt64

// Controller is the degrade state of one rule. Create Controllers with
// Compile. Its methods are safe for concurrent use; Admit and Record allocate
// nothing. A nil *Controller admits everything at level 0.
type Controller struct {
	rule      string
	auto      bool
	manual    int32
	windowNs  int64
	windowSec float64
	shedBelow uint64 // level 1 sheds when mixed hash >> 11 < shedBelow (ratio × 2^53)
	seed      uint64
	base      int64 // the rule's recoverAfter
	l1, l2    *api.Trigger
	key       classify.Key
	fb        fallback
	ov        *atomic.Uint64 // override cell shared across hot swaps: until<<2 | level, 0 = none
	logs      *logLimiter
	log       *slog.Logger
	shedCtr   prometheus.Counter     // may be nil
	dropped   prometheus.Counter     // may be nil
	gauge     *prometheus.GaugeVec   // may be nil
	trans     *prometheus.CounterVec // may be nil

	level    atomic.Int32 // the auto or manual level, override not included
	win      atomic.Int64 // current window index (now / windowNs)
	arrivals atomic.Int64 // in the current window
	recorded atomic.Int64
	failed   atomic.Int64
	shedWin  atomic.Int64
	ra       atomic.Int64 // effective recoverAfter
	lastQPS  atomic.Uint64
	lastSR   atomic.Uint64 // float64 bits; NaN when unmeasured
	retired  atomic.Bool

	mu       sync.Mutex
	healthy  int64
	quiet    int64
	lastDown int64 // window index of the last step down
	lastEff  int   // last published effective level

	// shedOrder (shed.go): nil plan without one.
	plan           *shedPlan
	classArrivals  []atomic.Int64  // this window's arrivals per plan slot
	classShedBelow []atomic.Uint64 // level 1 threshold per plan slot
}

// Rule returns the degrade rule's id.
func (c *Controller) Rule() string { return c.rule }

// Admit decides whether the request of a client (clientKey from KeyHash or
// HashKey) is shed at now, and returns the effective level. A shed request is
// counted and logged here; the caller answers it with WriteFallback and
// neither forwards nor Records it.
func (c *Controller) Admit(clientKey uint64, now int64) (shed bool, level int) {
	return c.admit(clientKey, now, nil)
}

// AdmitView is AdmitClass for the request v, keyed on KeyHash(v), of class
// v.Class; a shed is logged as a decision line naming v
// (reqview.LogDecision: its trace id, request id, path and client).
func (c *Controller) AdmitView(v *reqview.View, now int64) (shed bool, level int) {
	if c == nil {
		return false, 0
	}
	return c.admitClass(c.key.StableHash(v), v.Class, now, v)
}

func (c *Controller) admit(clientKey uint64, now int64, v *reqview.View) (shed bool, level int) {
	if c == nil {
		return false, 0
	}
	if w := now / c.windowNs; w > c.win.Load() {
		c.roll(w, now)
	}
	c.arrivals.Add(1)
	level = c.Level(now)
	switch level {
	case 0:
		return false, 0
	case 1:
		if mix(clientKey^c.seed)>>11 >= c.shedBelow {
			return false, 1
		}
	}
	c.onShed(now, level, v)
	return true, level
}

// Record feeds the outcome of a request that Admit let through and that went
// to the upstream: success is false for a 5xx or transport error (the same
// outcomes a breaker counts as failures). Requests rejected by a limit or a
// breaker are not recorded.
func (c *Controller) Record(now int64, success bool) {
	if c == nil {
		return
	}
	if w := now / c.windowNs; w > c.win.Load() {
		c.roll(w, now)
	}
	c.recorded.Add(1)
	if !success {
		c.failed.Add(1)
	}
}

// Level returns the effective level at now: an active override's, otherwise
// the auto or manual level. An expired override is cleared (and the change
// published) by the first call that notices it.
func (c *Controller) Level(now int64) int {
	if c == nil {
		return 0
	}
	if o := c.ov.Load(); o != 0 {
		if now < int64(o>>2) {
			return int(o & 3)
		}
		if c.ov.CompareAndSwap(o, 0) {
			c.sync(now, "override expired")
		}
	}
	return int(c.level.Load())
}

func (c *Controller) effective(now int64) int {
	if o := c.ov.Load(); o != 0 && now < int64(o>>2) {
		return int(o & 3)
	}
	return int(c.level.Load())
}

func (c *Controller) onShed(now int64, level int, v *reqview.View) {
	c.shedWin.Add(1)
	if c.shedCtr != nil {
		c.shedCtr.Inc()
	}
	if c.logs.allow(now) {
		reqview.LogDecision(c.log, slog.LevelInfo, v, reqview.MsgDegrade, c.rule, "shed", slog.Int("level", level))
	} else if c.dropped != nil {
		c.dropped.Inc()
	}
}

// roll closes the windows before w and opens w.
func (c *Controller) roll(w, now int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.win.Load()
	if w <= cur {
		return
	}
	arrivals, recorded, failed := c.arrivals.Swap(0), c.recorded.Swap(0), c.failed.Swap(0)
	c.shedWin.Store(0)
	c.replan()
	if cur != notStarted {
		c.evaluate(cur, arrivals, recorded, failed)
		// Idle windows are healthy; stop early once nothing can change.
		for i := cur + 1; i < w && i-cur < 1<<20; i++ {
			if c.level.Load() == 0 && c.ra.Load() == c.base {
				break
			}
			c.evaluate(i, 0, 0, 0)
		}
	}
	c.win.Store(w)
	c.syncLocked(now, "auto")
}

func fires(t *api.Trigger, qps, sr float64, recorded int64) bool {
	if t == nil {
		return false
	}
	return (t.QPSAbove > 0 && qps > t.QPSAbove) ||
		(t.SuccessRateBelow > 0 && recorded >= MinSuccessSamples && sr < t.SuccessRateBelow)
}

// evaluate applies the end of window idx. It must be called with mu held.
func (c *Controller) evaluate(idx, arrivals, recorded, failed int64) {
	qps := float64(arrivals) / c.windowSec
	sr := math.NaN()
	if recorded > 0 {
		sr = float64(recorded-failed) / float64(recorded)
	}
	c.lastQPS.Store(math.Float64bits(qps))
	c.lastSR.Store(math.Float64bits(sr))
	if !c.auto {
		return
	}
	target := int32(0)
	if fires(c.l2, qps, sr, recorded) {
		target = 2
	} else if fires(c.l1, qps, sr, recorded) {
		target = 1
	}
	lvl, ra := c.level.Load(), c.ra.Load()
	switch {
	case target > lvl:
		if idx-c.lastDown <= ra {
			nra := min(2*ra, c.base*MaxRecoverFactor)
			c.ra.Store(nra)
			c.log.Warn("degrade level flapping; recoverAfter doubled", "rule", c.rule, "recoverAfter", nra)
		}
		c.level.Store(target)
		c.healthy = 0
	case target < lvl:
		c.healthy++
		if c.healthy >= ra {
			c.level.Store(lvl - 1)
			c.healthy = 0
			c.lastDown = idx
		}
	default:
		c.healthy = 0
	}
	if c.level.Load() == 0 && target == 0 {
		c.quiet++
		if ra := c.ra.Load(); c.quiet >= 2*ra && ra > c.base {
			c.ra.Store(max(c.base, ra/2))
			c.quiet = 0
		}
	} else {
		c.quiet = 0
	}
}

// sync publishes the effective level: gauge, transition counter and log line
// when it changed.
func (c *Controller) sync(now int64, reason string) {
	c.mu.Lock()
	c.syncLocked(now, reason)
	c.mu.Unlock()
}

func (c *Controller) syncLocked(now int64, reason string) {
	if c.retired.Load() {
		return
	}
	eff := c.effective(now)
	from := c.lastEff
	c.lastEff = eff
	if c.gauge != nil {
		c.gauge.WithLabelValues(c.rule).Set(float64(eff))
	}
	if eff == from {
		return
	}
	if c.trans != nil {
		c.trans.WithLabelValues(c.rule, levelName(from), levelName(eff)).Inc()
	}
	lvl := slog.LevelInfo
	if eff > from {
		lvl = slog.LevelWarn
	}
	args := []any{"rule", c.rule, "from", from, "to", eff, "reason", reason,
		"qps", math.Float64frombits(c.lastQPS.Load()), "recoverAfter", c.ra.Load()}
	if sr := math.Float64frombits(c.lastSR.Load()); !math.IsNaN(sr) {
		args = append(args, "successRate", sr)
	}
	c.log.Log(context.Background(), lvl, "degrade level changed", args...)
}

func levelName(l int) string {
	switch l {
	case 0:
		return "0"
	case 1:
		return "1"
	}
	return "2"
}

// mix is the splitmix64 finalizer: it spreads a key's bits so that the top 53
// bits are uniform even for keys that differ in a few bits.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// logLimiter is a token bucket of log lines (GCRA on one atomic word).
type logLimiter struct {
	tat      atomic.Int64
	interval int64
	burst    int64
}

func newLogLimiter() *logLimiter {
	return &logLimiter{interval: int64(time.Second) / ShedLogRate, burst: ShedLogBurst}
}

func (l *logLimiter) allow(now int64) bool {
	for {
		t := l.tat.Load()
		nt := max(t, now) + l.interval
		if nt-now > l.burst*l.interval {
			return false
		}
		if l.tat.CompareAndSwap(t, nt) {
			return true
		}
	}
}
