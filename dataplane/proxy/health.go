package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/internal/clock"
	"github.com/sluicegw/sluice/dataplane/metrics"
)

// Target health: passive outlier detection and active health checks.
//
// Outlier detection (upstream.outlier) watches every forwarded request's
// outcome per target: consecutiveFailures 5xx answers or transport errors
// (timeouts included) in a row eject the target for baseEjection ×
// 2^(ejections so far), at most maxEjection. An ejected target gets no
// requests until its time is up; it is then used again, and if it still
// fails it is ejected again, for longer. Its ejection count goes down by one
// after each run of consecutiveFailures successes. At most
// floor(maxEjectedRatio × targets) targets, and never all of them, are out at
// once: a failing target beyond that share stays in. A client that went away
// counts neither way.
//
// Active health checks (upstream.healthCheck) send GET path to every target
// every interval, over the target's own connection pool; a 2xx or 3xx answer
// within timeout is a success. The first round runs when the upstream is
// built, before its router can serve a request, and its result counts at
// once, so that a target that is down when the rule set is applied never
// gets a request; afterwards unhealthyAfter failures in a row mark a target
// down and healthyAfter successes in a row bring it back. The checker is one
// goroutine per upstream, stopped when the router is retired.
//
// A target is used when neither holds it out. When every target is out, all
// are used (round-robin) rather than none. State starts fresh with each
// compiled router (a rule-set swap); the first check round re-establishes
// what active checks know.
//
// sluice_upstream_target_healthy{route,target} is 1 for a target in use and
// 0 for one held out; sluice_upstream_target_ejections_total counts
// ejections. Router.Health lists every target's state for the node's status.

// targetState is one target's outstanding requests and health. Its fields
// are atomics: the request path reads and updates them without a lock.
type targetState struct {
	inflight  atomic.Int64
	fails     atomic.Int32 // consecutive failures
	oks       atomic.Int32 // consecutive successes
	until     atomic.Int64 // ejected until (clock.Now scale); 0 when not ejected
	ejections atomic.Int32 // ejections so far, less the healthy runs since
	checkDown atomic.Bool  // the active health check says down
	checked   atomic.Bool  // the active health check has a result
	checkRun  int          // consecutive equal check results (checker only)
	lastCheck atomic.Value // string: the last check's error, "" when it passed

	gauge   prometheus.Gauge   // may be nil
	ejected prometheus.Counter // may be nil
	_       [24]byte           // keep targets on separate cache lines
}

// healthPolicy is an upstream's outlier and health-check settings.
type healthPolicy struct {
	route                string
	urls                 []string // redacted, for logs and status
	failures             int32    // 0: no outlier detection
	base, maxEject       int64
	maxEjected           int
	healthyAfter, downAt int
	log                  *slog.Logger
}

// configureHealth sets up outlier detection and health-check state for the
// targets of route r (urls redacted, in order); it does nothing when r sets
// neither. m may be nil.
func (b *balancer) configureHealth(r *api.Route, urls []string, m *metrics.Metrics, log *slog.Logger) {
	o, hc := r.Upstream.Outlier, r.Upstream.HealthCheck
	if o == nil && hc == nil {
		return
	}
	p := &healthPolicy{route: r.ID, urls: urls, log: log}
	if o != nil {
		p.failures = int32(cmpOr(o.ConsecutiveFailures, api.DefaultOutlierConsecutiveFailures))
		p.base = int64(cmpOr(o.BaseEjection.D(), api.DefaultOutlierBaseEjection))
		p.maxEject = max(p.base, int64(cmpOr(o.MaxEjection.D(), api.DefaultOutlierMaxEjection)))
		ratio := cmpOr(o.MaxEjectedRatio, api.DefaultOutlierMaxEjectedRatio)
		p.maxEjected = min(int(math.Floor(ratio*float64(b.n)+1e-9)), b.n-1)
	}
	if hc != nil {
		p.healthyAfter = cmpOr(hc.HealthyAfter, api.DefaultHealthyAfter)
		p.downAt = cmpOr(hc.UnhealthyAfter, api.DefaultUnhealthyAfter)
	}
	b.health = p
	for i := range b.ts {
		t := &b.ts[i]
		t.lastCheck.Store("")
		if m != nil {
			t.gauge = m.TargetHealthy.WithLabelValues(r.ID, urls[i])
			t.gauge.Set(1)
			if o != nil {
				t.ejected = m.TargetEjections.WithLabelValues(r.ID, urls[i])
			}
		}
	}
}

func cmpOr[T comparable](a, b T) T {
	var zero T
	if a != zero {
		return a
	}
	return b
}

// usable reports whether target i may get requests at now. An ejection
// whose time is up ends here, the first time a pick looks.
func (b *balancer) usable(i int, now int64) bool {
	t := &b.ts[i]
	if u := t.until.Load(); u != 0 {
		if now < u {
			return false
		}
		if t.until.CompareAndSwap(u, 0) {
			b.health.log.Info("upstream target re-admitted", "route", b.health.route, "target", b.health.urls[i])
			b.setGauge(i)
		}
	}
	return !t.checkDown.Load()
}

func (b *balancer) setGauge(i int) {
	t := &b.ts[i]
	if t.gauge == nil {
		return
	}
	if t.until.Load() == 0 && !t.checkDown.Load() {
		t.gauge.Set(1)
	} else {
		t.gauge.Set(0)
	}
}

// done ends the request pick gave target i: failed is a 5xx answer or a
// transport error, gone a client that went away (neither).
func (b *balancer) done(i int, failed, gone bool) {
	if b.n <= 1 {
		return
	}
	t := &b.ts[i]
	t.inflight.Add(-1)
	p := b.health
	if p == nil || p.failures == 0 || gone {
		return
	}
	if !failed {
		t.fails.Store(0)
		if t.ejections.Load() > 0 && t.oks.Add(1) >= p.failures {
			t.oks.Store(0)
			t.ejections.Add(-1)
		}
		return
	}
	t.oks.Store(0)
	if t.fails.Add(1) < p.failures {
		return
	}
	now := clock.Now()
	if t.until.Load() > now {
		return // already out (requests picked before the ejection finishing)
	}
	out := 0
	for j := range b.ts {
		if j != i && b.ts[j].until.Load() > now {
			out++
		}
	}
	if out >= p.maxEjected {
		return // the share is used up: it stays in, its failures counted
	}
	n := t.ejections.Add(1)
	d := p.base << min(n-1, 30)
	if d <= 0 || d > p.maxEject {
		d = p.maxEject
	}
	if t.until.CompareAndSwap(t.until.Load(), now+d) {
		t.fails.Store(0)
		if t.ejected != nil {
			t.ejected.Inc()
		}
		p.log.Warn("upstream target ejected", "route", p.route, "target", p.urls[i],
			"consecutive_failures", p.failures, "for", time.Duration(d), "ejections", n)
		b.setGauge(i)
	}
}

// checkResult records one active health check of target i.
func (b *balancer) checkResult(i int, err error) {
	t := &b.ts[i]
	p := b.health
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	t.lastCheck.Store(msg)
	down := err != nil
	first := !t.checked.Swap(true)
	if first {
		t.checkRun = 1
		t.checkDown.Store(down)
		if down {
			p.log.Warn("upstream target failed its first health check", "route", p.route, "target", p.urls[i], "err", msg)
		}
		b.setGauge(i)
		return
	}
	if down == t.checkDown.Load() {
		t.checkRun = 0
		return
	}
	t.checkRun++
	need := p.downAt
	if !down {
		need = p.healthyAfter
	}
	if t.checkRun >= need {
		t.checkRun = 0
		t.checkDown.Store(down)
		if down {
			p.log.Warn("upstream target marked down by health checks", "route", p.route, "target", p.urls[i], "err", msg)
		} else {
			p.log.Info("upstream target marked up by health checks", "route", p.route, "target", p.urls[i])
		}
		b.setGauge(i)
	}
}

// healthChecker is one upstream's active health-check goroutine.
type healthChecker struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startHealthChecks runs the first check round of u's targets (in
// parallel; it returns when every check has answered or timed out) and
// starts the goroutine that runs the following rounds. Stop it with stop.
func startHealthChecks(u *Upstream, hc *api.HealthCheck) *healthChecker {
	interval := cmpOr(hc.Interval.D(), api.DefaultHealthCheckInterval)
	timeout := cmpOr(hc.Timeout.D(), api.DefaultHealthCheckTimeout)
	ctx, cancel := context.WithCancel(context.Background())
	h := &healthChecker{cancel: cancel, done: make(chan struct{})}
	clients := make([]*http.Client, len(u.targets))
	for i, t := range u.targets {
		clients[i] = &http.Client{Transport: t.origin.rt, Timeout: timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	round := func() {
		var wg sync.WaitGroup
		for i, t := range u.targets {
			wg.Go(func() { u.balance.checkResult(i, checkTarget(ctx, clients[i], t, hc.Path)) })
		}
		wg.Wait()
	}
	round()
	go func() {
		defer close(h.done)
		defer func() {
			if v := recover(); v != nil {
				u.log.Error("health checker panicked; checks stop", "route", u.routeID, "panic", fmt.Sprint(v))
			}
		}()
		tk := time.NewTicker(interval)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				round()
			}
		}
	}()
	return h
}

// stop cancels the checker and waits for it. Safe on nil.
func (h *healthChecker) stop() {
	if h == nil {
		return
	}
	h.cancel()
	<-h.done
}

// checkTarget sends one health check to t.
func checkTarget(ctx context.Context, c *http.Client, t *target, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.scheme+"://"+t.host+t.base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "sluice-health-check")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// TargetHealth is one upstream target's state, for a node's status.
type TargetHealth struct {
	Route   string `json:"route"`
	Target  string `json:"target"`
	Healthy bool   `json:"healthy"` // in use
	// EjectedFor is how long outlier detection still holds it out.
	EjectedFor time.Duration `json:"ejectedFor,omitempty"`
	Ejections  int           `json:"ejections,omitempty"`
	// CheckFailing: active health checks hold it out; CheckError is the
	// last check's error.
	CheckFailing bool   `json:"checkFailing,omitempty"`
	CheckError   string `json:"checkError,omitempty"`
	InFlight     int64  `json:"inFlight"`
}

// Health returns the state of every target of every route that has outlier
// detection or health checks, in route order.
func (rt *Router) Health() []TargetHealth {
	var out []TargetHealth
	now := clock.Now()
	for _, r := range rt.routes {
		b := r.Upstream.balance
		if b.health == nil {
			continue
		}
		for i := range b.ts {
			t := &b.ts[i]
			th := TargetHealth{Route: r.ID, Target: b.health.urls[i], InFlight: t.inflight.Load(),
				Ejections: int(t.ejections.Load()), CheckFailing: t.checkDown.Load()}
			if u := t.until.Load(); u > now {
				th.EjectedFor = time.Duration(u - now)
			}
			th.Healthy = th.EjectedFor == 0 && !th.CheckFailing
			if s, _ := t.lastCheck.Load().(string); s != "" {
				th.CheckError = s
			}
			out = append(out, th)
		}
	}
	return out
}

// startHealth sets up r's outlier detection and health checks on u (see
// above); the first check round runs before it returns.
func (u *Upstream) startHealth(r *api.Route, m *metrics.Metrics) {
	u.balance.configureHealth(r, u.Targets(), m, u.log)
	if hc := r.Upstream.HealthCheck; hc != nil {
		u.health = startHealthChecks(u, hc)
	}
}

// clockNow is the clock ejections are timed on (tests read it too).
func clockNow() int64 { return clock.Now() }
