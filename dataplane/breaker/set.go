package breaker

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/internal/carry"
	monotonic "github.com/sluicegw/sluice/dataplane/internal/clock"
	"github.com/sluicegw/sluice/dataplane/metrics"
)

// Now is the default clock: nanoseconds on the runtime's monotonic scale,
// the same scale as limit.Now. Callers pass its readings as the now argument.
func Now() int64 { return monotonic.Now() }

// Options are a node's settings for compiling breakers. The zero value logs to
// slog.Default, exports no metrics and uses Now.
type Options struct {
	// Metrics receives sluice_breaker_state and
	// sluice_breaker_transitions_total; nil exports nothing.
	Metrics *metrics.Metrics
	// Logger receives one line per transition; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock whose readings the request path passes as now. It is
	// read only off the hot path (Status and the admin handler); nil means Now.
	Now func() int64
}

func (o Options) now() int64 {
	if o.Now != nil {
		return o.Now()
	}
	return Now()
}

// group is what a rule's breakers share: the rule's state gauge is the worst
// state of its member breakers (those of the set last swapped in). A group
// is carried into the next Set while its rule does not change (package
// carry, keyed by rule id and canonical JSON), and its breakers with it.
type group struct {
	rule    string
	cfg     config
	members atomic.Pointer[[]*Breaker]
	retired atomic.Bool
	gauge   *prometheus.GaugeVec // may be nil
	refused prometheus.Counter   // sluice_breaker_rejections_total{rule}; may be nil
}

func (g *group) worst() State {
	w := Closed
	if m := g.members.Load(); m != nil {
		for _, b := range *m {
			w = max(w, b.State())
		}
	}
	return w
}

func (g *group) moved(from, to State) { g.publish() }

func (g *group) publish() {
	if g.gauge != nil && !g.retired.Load() {
		g.gauge.WithLabelValues(g.rule).Set(float64(g.worst()))
	}
}

// rule is one breaker rule in one Set: its group and the breakers of the
// routes it covers in this Set.
type rule struct {
	id       string
	group    *group
	breakers []*Breaker // in route order
}

// Set is the compiled breakers of one rule set. It is immutable once
// compiled and safe for concurrent use; the zero value and a nil *Set hold no
// breakers.
type Set struct {
	rules   []*rule
	byRoute map[string]*Breaker
	gen     *carry.Gen[*group] // groups by rule id, what the next Set may carry
	opts    Options
}

// Compile builds the breakers of rules for the routes routeIDs, both from one
// validated, normalized rule set (api.Validated's Rules): Compile trusts them
// (every range, route reference and the one-breaker-per-route rule are
// Validate's) and checks nothing again. It makes one Breaker per (rule,
// route), a rule with no routes covering every route. Breakers of a rule whose
// canonical JSON equals its namesake's in prev are carried over as they are
// (state, window, open period); the others start closed. prev may be nil.
// It does not change prev; on error it retains nothing.
func Compile(rules []api.Breaker, routeIDs []string, prev *Set, opts Options) (*Set, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	var prevGen *carry.Gen[*group]
	var prevRoutes map[string]*Breaker
	if prev != nil {
		prevGen, prevRoutes = prev.gen, prev.byRoute
	}
	var trans, refusals *prometheus.CounterVec
	var gauge *prometheus.GaugeVec
	if opts.Metrics != nil {
		trans, gauge, refusals = opts.Metrics.BreakerTransitions, opts.Metrics.BreakerState, opts.Metrics.BreakerRejections
	}
	b := carry.Begin(prevGen, retireGroup)
	defer b.Discard()
	s := &Set{byRoute: make(map[string]*Breaker, len(routeIDs)), rules: make([]*rule, 0, len(rules)), opts: opts}
	for i := range rules {
		rb := &rules[i]
		canon, err := json.Marshal(rb)
		if err != nil {
			return nil, fmt.Errorf("compiling breaker %q: %w", rb.ID, err)
		}
		g, carried, err := b.Provide(rb.ID, string(canon), func(*group, bool) (*group, error) {
			g := &group{rule: rb.ID, cfg: compileConfig(rb), gauge: gauge}
			if refusals != nil {
				g.refused = refusals.WithLabelValues(rb.ID)
			}
			return g, nil
		})
		if err != nil {
			return nil, fmt.Errorf("compiling breaker %q: %w", rb.ID, err)
		}
		r := &rule{id: rb.ID, group: g}
		routes := rb.Routes
		if len(routes) == 0 {
			routes = routeIDs
		}
		r.breakers = make([]*Breaker, 0, len(routes))
		for _, route := range routes {
			br := prevRoutes[route]
			if !carried || br == nil || br.group != g {
				br = newBreaker(rb.ID, route, g.cfg, g, opts.Logger, trans)
			}
			r.breakers = append(r.breakers, br)
			s.byRoute[route] = br
		}
		if !carried {
			g.members.Store(&r.breakers)
		}
		s.rules = append(s.rules, r)
	}
	s.gen = b.Done()
	if prev == nil {
		s.publish()
	}
	return s, nil
}

// retireGroup stops a group no Set in service holds from writing the state
// gauge (in-flight requests may still move its breakers), and removes the
// gauge when no rule of its id remains.
func retireGroup(id string, g *group, named bool) {
	g.retired.Store(true)
	if !named && g.gauge != nil {
		g.gauge.DeleteLabelValues(id)
	}
}

// compileConfig converts a validated, normalized rule (Validate bounds
// halfOpenProbes by api.MaxHalfOpenProbes, which the state word holds: see
// the assertion below).
func compileConfig(rb *api.Breaker) config {
	c := config{
		bucketNs:    int64(rb.Window) / nBuckets,
		minRequests: int64(rb.MinRequests),
		errorRatio:  rb.ErrorRatio,
		slowRatio:   rb.SlowCallRatio,
		slowDur:     rb.SlowCallDuration.D(),
		consecutive: int64(rb.ConsecutiveFailures),
		openFor:     int64(rb.OpenFor),
		maxOpenFor:  int64(rb.MaxOpenFor),
		probes:      rb.HalfOpenProbes,
		status:      rb.Fallback.Status,
		retryAfter:  rb.Fallback.RetryAfter.D(),
		body:        []byte(rb.Fallback.Body),
		contentType: rb.Fallback.ContentType,
	}
	if len(rb.FailureStatuses) == 0 {
		for s := 500; s < 600; s++ {
			c.failures[s/64] |= 1 << (s % 64)
		}
	}
	for _, s := range rb.FailureStatuses {
		c.failures[s/64] |= 1 << (s % 64)
	}
	p, _ := json.Marshal(map[string]any{
		"type":   "about:blank",
		"title":  "Circuit breaker open",
		"status": c.status,
		"detail": "the upstream is failing; circuit breaker " + rb.ID + " is refusing requests for now",
		"rule":   rb.ID,
	})
	c.problem = append(p, '\n')
	return c
}

// The half-open probe count Validate allows fits the breaker's state word.
const _ = uint(countMask - api.MaxHalfOpenProbes)

// ForRoute returns the breaker guarding routeID, or nil when no rule covers
// it (a nil *Breaker admits everything).
func (s *Set) ForRoute(routeID string) *Breaker {
	if s == nil {
		return nil
	}
	return s.byRoute[routeID]
}

// Len returns the number of breakers in the set.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.byRoute)
}

func (s *Set) publish() {
	for _, r := range s.rules {
		r.group.publish()
	}
}

// Retire is called on the previous set once next has been swapped in (next
// may be nil when the node stops). There are no goroutines to stop; Retire
// stops the state gauge of rules that did not carry over from being written
// by their old breakers (which in-flight requests may still move), removes the
// gauge of rules gone from next, and publishes next's states. A nil receiver
// only publishes next.
func (s *Set) Retire(next *Set) {
	if s != nil {
		var ng *carry.Gen[*group]
		if next != nil {
			ng = next.gen
		}
		s.gen.Retire(ng, retireGroup)
	}
	if next != nil {
		for _, r := range next.rules {
			r.group.members.Store(&r.breakers)
		}
		next.publish()
	}
}

// Status is one breaker's state as the admin endpoint shows it.
type Status struct {
	Rule  string `json:"rule"`
	Route string `json:"route"`
	State string `json:"state"`
	// Window holds the calls counted in the current rolling window (closed
	// state only; every transition starts a fresh window).
	Window              Counts `json:"window"`
	ConsecutiveFailures int64  `json:"consecutiveFailures"`
	// OpenFor is the current open period (doubled after failed probes).
	OpenFor string `json:"openFor"`
	// OpenUntil is when an open breaker lets probes through (wall clock).
	OpenUntil time.Time `json:"openUntil,omitzero"`
	// ProbesAdmitted and ProbesSucceeded count the probes of a half-open breaker.
	ProbesAdmitted  int `json:"probesAdmitted,omitempty"`
	ProbesSucceeded int `json:"probesSucceeded,omitempty"`
}

// Status returns the state of every breaker, in rule then route order, read
// at now.
func (s *Set) Status(now int64) []Status {
	if s == nil {
		return []Status{}
	}
	wall := time.Now()
	out := make([]Status, 0, len(s.byRoute))
	for _, r := range s.rules {
		for _, b := range r.breakers {
			out = append(out, b.status(now, wall))
		}
	}
	return out
}

func (b *Breaker) status(now int64, wall time.Time) Status {
	w := b.st.Load()
	st := Status{
		Rule:                b.rule,
		Route:               b.route,
		State:               wState(w).String(),
		ConsecutiveFailures: b.consec.Load(),
		OpenFor:             time.Duration(b.openFor.Load()).String(),
	}
	switch wState(w) {
	case Closed:
		st.Window = b.counts(now / b.cfg.bucketNs)
	case Open:
		st.OpenUntil = wall.Add(time.Duration(b.openUntil.Load() - now)).UTC()
	case HalfOpen:
		st.ProbesAdmitted, st.ProbesSucceeded = wUsed(w), wOK(w)
	}
	return st
}
