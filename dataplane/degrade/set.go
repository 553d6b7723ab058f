package degrade

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/internal/carry"
	monotonic "github.com/sluicegw/sluice/dataplane/internal/clock"
	"github.com/sluicegw/sluice/dataplane/metrics"
)

// Now is the default clock: nanoseconds on the runtime's monotonic scale,
// the same scale as limit.Now and breaker.Now.
func Now() int64 { return monotonic.Now() }

// Errors of SetOverride and ClearOverride (wrapped with the rule id).
var (
	ErrUnknownRule = errors.New("no such degrade rule")
	ErrBadLevel    = errors.New("level must be 0, 1 or 2")
	ErrBadTTL      = errors.New("override must end in the future and within MaxOverrideTTL")
)

// MaxOverrideTTL bounds how long a local override may last.
const MaxOverrideTTL = 7 * 24 * time.Hour

// Options are a node's settings for compiling degrade controllers. The zero
// value logs to slog.Default, exports no metrics and uses Now.
type Options struct {
	// Metrics receives sluice_degrade_level, sluice_degrade_transitions_total,
	// sluice_degrade_shed_total and sluice_log_dropped_total; nil exports
	// nothing.
	Metrics *metrics.Metrics
	// Logger receives level changes and (rate-limited) shed requests; nil
	// means slog.Default().
	Logger *slog.Logger
	// Now is the clock whose readings the request path passes as now. It is
	// read off the hot path only (overrides, Status, the admin handlers);
	// nil means Now.
	Now func() int64
	// Classes are the rule set's priority class ids by index (index 0 is
	// "default", then the rule set's classes in order), which shedOrder
	// refers to and AdmitClass's class indexes; nil means none.
	Classes []string
}

func (o Options) now() int64 {
	if o.Now != nil {
		return o.Now()
	}
	return Now()
}

// overrides holds one cell per rule id, shared by every Set of a node so that
// an override outlives hot swaps, even one that races SetOverride.
type overrides struct {
	mu    sync.Mutex
	cells map[string]*atomic.Uint64
}

func (o *overrides) cell(rule string) *atomic.Uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.cells[rule]
	if c == nil {
		c = new(atomic.Uint64)
		o.cells[rule] = c
	}
	return c
}

// rule is one degrade rule in one Set: its controller, carried into the next
// Set while the rule does not change (package carry, keyed by rule id and
// canonical JSON), and the routes it covers in this Set.
type rule struct {
	ctrl   *Controller
	routes []string
}

// Set is the compiled degrade controllers of one rule set. It is immutable
// once compiled (overrides aside) and safe for concurrent use; a nil *Set
// holds no controllers.
type Set struct {
	rules   []*rule
	gen     *carry.Gen[*Controller] // controllers by rule id
	byRoute map[string]*Controller
	ov      *overrides
	logs    *logLimiter
	opts    Options
}

// Compile builds one Controller per degrade rule for the routes routeIDs,
// both from one validated, normalized rule set (api.Validated's Rules):
// Compile trusts them (every range, route reference and the one-plan-per-route
// rule are Validate's) and checks nothing again. A rule with no routes covers
// every route. The Controller of a rule whose canonical JSON equals its
// namesake's in prev is carried over as it is (level, window, recoverAfter);
// the others start at their manual level, or 0 in auto mode. Overrides carry
// over by rule id either way. prev may be nil; Compile does not change it,
// and on error it retains nothing.
func Compile(rules []api.Degrade, routeIDs []string, prev *Set, opts Options) (*Set, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Set{byRoute: make(map[string]*Controller, len(routeIDs)), rules: make([]*rule, 0, len(rules)), opts: opts}
	var prevGen *carry.Gen[*Controller]
	if prev != nil {
		s.ov, s.logs, prevGen = prev.ov, prev.logs, prev.gen
	} else {
		s.ov, s.logs = &overrides{cells: map[string]*atomic.Uint64{}}, newLogLimiter()
	}
	b := carry.Begin(prevGen, s.ov.retire)
	defer b.Discard()
	now := opts.now()
	for i := range rules {
		d := &rules[i]
		canon, err := json.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("compiling degrade %q: %w", d.ID, err)
		}
		c, _, err := b.Provide(d.ID, string(canon), func(*Controller, bool) (*Controller, error) {
			return s.newController(d, now)
		})
		if err != nil {
			return nil, fmt.Errorf("compiling degrade %q: %w", d.ID, err)
		}
		r := &rule{ctrl: c, routes: d.Routes}
		if len(r.routes) == 0 {
			r.routes = routeIDs
		}
		for _, route := range r.routes {
			s.byRoute[route] = c
		}
		s.rules = append(s.rules, r)
	}
	s.gen = b.Done()
	if prev == nil {
		s.publish(now)
	}
	return s, nil
}

// retire keeps a controller no Set in service holds from writing the level
// gauge (in-flight requests may still touch it) and, when no rule of its id
// remains, removes the gauge and the override.
func (o *overrides) retire(id string, c *Controller, named bool) {
	c.retired.Store(true)
	if named {
		return
	}
	if c.gauge != nil {
		c.gauge.DeleteLabelValues(id)
	}
	o.mu.Lock()
	delete(o.cells, id)
	o.mu.Unlock()
}

func (s *Set) newController(d *api.Degrade, now int64) (*Controller, error) {
	key, err := compileKey(d.Key)
	if err != nil {
		return nil, err
	}
	c := &Controller{
		rule:      d.ID,
		auto:      d.Mode == api.DegradeAuto,
		windowNs:  int64(d.Window),
		windowSec: d.Window.D().Seconds(),
		shedBelow: uint64(d.Level1ShedRatio * (1 << 53)),
		seed:      mix(HashKey("sluice-degrade-seed:" + d.ID)),
		base:      int64(d.RecoverAfter),
		key:       key,
		ov:        s.ov.cell(d.ID),
		logs:      s.logs,
		log:       s.opts.Logger,
		lastDown:  math.MinInt64 / 2,
		fb: fallback{
			status:     d.Fallback.Status,
			retryAfter: d.Fallback.RetryAfter.D(),
			html:       []byte(d.Fallback.HTML),
			json:       []byte(d.Fallback.JSON),
		},
	}
	if d.Triggers != nil {
		c.l1, c.l2 = d.Triggers.Level1, d.Triggers.Level2
	}
	if c.plan = newShedPlan(d.ShedOrder, s.opts.Classes); c.plan != nil {
		c.classArrivals = make([]atomic.Int64, c.plan.slots)
		c.classShedBelow = make([]atomic.Uint64, c.plan.slots)
		for i := range c.classShedBelow {
			c.classShedBelow[i].Store(c.shedBelow) // until a window is measured
		}
	}
	if !c.auto {
		c.manual = int32(d.Level)
	}
	if m := s.opts.Metrics; m != nil {
		c.shedCtr = m.DegradeShed.WithLabelValues(d.ID)
		c.dropped, c.gauge, c.trans = m.LogsDropped, m.DegradeLevel, m.DegradeTransitions
	}
	c.level.Store(c.manual)
	c.win.Store(notStarted)
	c.ra.Store(c.base)
	c.lastSR.Store(math.Float64bits(math.NaN()))
	c.lastEff = c.effective(now)
	return c, nil
}

// ForRoute returns the controller of routeID, or nil when no rule covers it
// (a nil *Controller admits everything).
func (s *Set) ForRoute(routeID string) *Controller {
	if s == nil {
		return nil
	}
	return s.byRoute[routeID]
}

// ForRule returns the controller of rule id, or nil.
func (s *Set) ForRule(id string) *Controller {
	if s == nil {
		return nil
	}
	c, _ := s.gen.Get(id)
	return c
}

func (s *Set) publish(now int64) {
	for _, r := range s.rules {
		r.ctrl.sync(now, "applied")
	}
}

// Retire is called on the previous set once next has been swapped in (next
// may be nil when the node stops). There are no goroutines to stop: Retire
// keeps controllers that did not carry over from writing the level gauge
// (in-flight requests may still touch them), removes the gauge and the
// override of rules gone from next, and publishes next's levels. A nil
// receiver only publishes next.
func (s *Set) Retire(next *Set) {
	if s != nil {
		var ng *carry.Gen[*Controller]
		if next != nil {
			ng = next.gen
		}
		s.gen.Retire(ng, s.ov.retire)
	}
	if next != nil {
		next.publish(next.opts.now())
	}
}

// SetOverride forces rule's level to level until the wall-clock time until,
// in either mode, replacing any override it has. It returns ErrUnknownRule,
// ErrBadLevel or ErrBadTTL (wrapped with the rule id). The override survives
// hot swaps while the rule exists, and expires by itself.
func (s *Set) SetOverride(rule string, level int, until time.Time) error {
	now := s.opts.now()
	return s.setOverride(rule, level, now, now+int64(time.Until(until)))
}

// SetOverrideFor is SetOverride with a duration from now.
func (s *Set) SetOverrideFor(rule string, level int, ttl time.Duration) error {
	now := s.opts.now()
	if ttl <= 0 || ttl > MaxOverrideTTL {
		return fmt.Errorf("override of degrade %q for %s: %w", rule, ttl, ErrBadTTL)
	}
	return s.setOverride(rule, level, now, now+int64(ttl))
}

func (s *Set) setOverride(rule string, level int, now, until int64) error {
	c := s.ForRule(rule)
	switch {
	case c == nil:
		return fmt.Errorf("override of degrade %q: %w", rule, ErrUnknownRule)
	case level < 0 || level > 2:
		return fmt.Errorf("override of degrade %q to %d: %w", rule, level, ErrBadLevel)
	case until <= now || until-now > int64(MaxOverrideTTL) || until >= 1<<62:
		return fmt.Errorf("override of degrade %q: %w", rule, ErrBadTTL)
	}
	c.ov.Store(uint64(until)<<2 | uint64(level))
	c.sync(now, "override set")
	c.log.Warn("degrade override set", "rule", rule, "level", level, "ttl", time.Duration(until-now).String())
	return nil
}

// ClearOverride removes rule's override, if any. It returns ErrUnknownRule
// (wrapped) when the set has no such rule.
func (s *Set) ClearOverride(rule string) error {
	c := s.ForRule(rule)
	if c == nil {
		return fmt.Errorf("clearing override of degrade %q: %w", rule, ErrUnknownRule)
	}
	if c.ov.Swap(0) != 0 {
		c.sync(s.opts.now(), "override cleared")
	}
	return nil
}

// Override is an active override as Status shows it.
type Override struct {
	Level int       `json:"level"`
	Until time.Time `json:"until"`
}

// Status is one degrade controller as the admin endpoint shows it. QPS and
// SuccessRate are those of the last complete window; SuccessRate is null when
// that window forwarded nothing.
type Status struct {
	Rule   string   `json:"rule"`
	Routes []string `json:"routes"`
	Mode   string   `json:"mode"`
	// Level is the effective level; RuleLevel the auto or manual level under
	// any override.
	Level        int       `json:"level"`
	RuleLevel    int       `json:"ruleLevel"`
	Override     *Override `json:"override,omitempty"`
	QPS          float64   `json:"qps"`
	SuccessRate  *float64  `json:"successRate"`
	Window       string    `json:"window"`
	RecoverAfter int64     `json:"recoverAfter"`
}

// Status returns every controller's state at now, in rule order.
func (s *Set) Status(now int64) []Status {
	if s == nil {
		return []Status{}
	}
	wall := time.Now()
	out := make([]Status, 0, len(s.rules))
	for _, r := range s.rules {
		c := r.ctrl
		// Advance idle windows so that the figures are current.
		if w := now / c.windowNs; w > c.win.Load() && c.win.Load() != notStarted {
			c.roll(w, now)
		}
		st := Status{
			Rule: c.rule, Routes: r.routes, Mode: string(api.DegradeManual),
			Level: c.Level(now), RuleLevel: int(c.level.Load()),
			QPS:          math.Float64frombits(c.lastQPS.Load()),
			Window:       time.Duration(c.windowNs).String(),
			RecoverAfter: c.ra.Load(),
		}
		if c.auto {
			st.Mode = string(api.DegradeAuto)
		}
		if st.Routes == nil {
			st.Routes = []string{}
		}
		if sr := math.Float64frombits(c.lastSR.Load()); !math.IsNaN(sr) {
			st.SuccessRate = &sr
		}
		if o := c.ov.Load(); o != 0 && now < int64(o>>2) {
			st.Override = &Override{Level: int(o & 3), Until: wall.Add(time.Duration(int64(o>>2) - now)).UTC()}
		}
		out = append(out, st)
	}
	return out
}
