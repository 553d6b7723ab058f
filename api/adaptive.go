package api

import (
	"fmt"
	"maps"
	"math"
	"net/textproto"
	"slices"
	"strings"
	"time"
)

// DefaultClass is the class of a request no Class matches.
const DefaultClass = "default"

// Class is a priority class: a request's class is the first Class whose
// Match matches it, else DefaultClass. Limits reserve capacity for classes
// (Limit.Reserve), degrade plans shed classes in order (Degrade.ShedOrder),
// and metrics and decision logs carry the class.
type Class struct {
	ID    string     `json:"id"`
	Match ClassMatch `json:"match"`
}

// ClassMatch says which requests a Class takes. Every field set must match;
// the zero value matches every request. Header values are exact, names
// ignore case, as in a route's Match.
//
// Routes and methods are what a request is, and match whoever sends it.
// Headers are what a client claims: a class that matches headers matches
// only requests whose connection comes from the gateway's
// --trusted-proxies (a proxy the operator runs, which sets or strips them);
// from any other peer it does not match, and the request goes on to the
// next class or the default (the header is forwarded as sent). Warnings
// flags such classes (WarnClassHeaderUntrusted).
type ClassMatch struct {
	// Routes lists route ids; empty means every route.
	Routes  []string `json:"routes,omitempty"`
	Methods []string `json:"methods,omitempty"`
	// Headers maps header names to exact values; honoured only from
	// trusted proxies (see ClassMatch).
	Headers map[string]string `json:"headers,omitempty"`
	// Claims maps claim names (dotted for nested claims) to the values the
	// caller's verified token must carry (see TierMatch): what an
	// identity proved, whoever the peer is. A request without verified
	// claims does not match.
	Claims map[string]string `json:"claims,omitempty"`
}

// AdaptiveSettings configure an adaptive limit: a concurrency limit per key
// that follows the upstream's latency by the gradient
// limit × minRTT·(1+Buffer) / sampleRTT(Percentile), plus a queue allowance
// of √limit, bounded by MinLimit and MaxLimit and smoothed. Zero fields mean
// the defaults below (written out by Normalize).
type AdaptiveSettings struct {
	// MinLimit is the floor of the limit; 0 means DefaultAdaptiveMinLimit.
	MinLimit int64 `json:"minLimit,omitempty"`
	// MaxLimit is the ceiling of the limit; 0 means DefaultAdaptiveMaxLimit.
	MaxLimit int64 `json:"maxLimit,omitempty"`
	// InitialLimit is the limit before any measurement; 0 means
	// DefaultAdaptiveInitialLimit, clamped into [MinLimit, MaxLimit].
	InitialLimit int64 `json:"initialLimit,omitempty"`
	// Percentile is the latency percentile of a window that is compared
	// with the minimum RTT, in (0, 1]; 0 means DefaultAdaptivePercentile.
	Percentile float64 `json:"percentile,omitempty"`
	// Buffer is the latency increase over the minimum RTT that is tolerated
	// before the limit shrinks, in [0, 10]; 0 means DefaultAdaptiveBuffer
	// (write a tiny value such as 0.0001 for none).
	Buffer float64 `json:"buffer,omitempty"`
	// Window is how long latency samples are gathered before the limit is
	// recomputed; 0 means DefaultAdaptiveWindow.
	Window Duration `json:"window,omitempty"`
	// ProbeInterval is how often the minimum RTT is measured again (with
	// ±25% jitter); 0 means DefaultAdaptiveProbeInterval.
	ProbeInterval Duration `json:"probeInterval,omitempty"`
}

// LimitVariant is an A/B variant of a limit: the clients whose key hashes
// into its Weight percent get the limit with the variant's non-zero fields in
// place of the limit's own (Limit.WithVariant), and their own counters.
// As for a limit, a token or leaky bucket variant that sets Rate and no
// Burst has a burst of its rate (Normalize writes it out).
type LimitVariant struct {
	ID string `json:"id"`
	// Weight is the percentage of clients (1-100) the variant takes; the
	// weights of a limit's variants add up to at most 100.
	Weight   int               `json:"weight"`
	Rate     int64             `json:"rate,omitempty"`
	Period   Duration          `json:"period,omitempty"`
	Burst    int64             `json:"burst,omitempty"`
	Cost     *Cost             `json:"cost,omitempty"`
	Adaptive *AdaptiveSettings `json:"adaptive,omitempty"`
}

// HealthCheck configures active health checks of an upstream's targets:
// every Interval each target is sent GET Path; a 2xx or 3xx answer within
// Timeout is a success. A target is marked unhealthy after UnhealthyAfter
// failures in a row and healthy again after HealthyAfter successes in a row.
// Targets start unknown and are checked at once; an unknown target is used.
type HealthCheck struct {
	Path string `json:"path"`
	// Interval between checks; 0 means DefaultHealthCheckInterval.
	Interval Duration `json:"interval,omitempty"`
	// Timeout of one check; 0 means DefaultHealthCheckTimeout.
	Timeout Duration `json:"timeout,omitempty"`
	// HealthyAfter is 0 for DefaultHealthyAfter.
	HealthyAfter int `json:"healthyAfter,omitempty"`
	// UnhealthyAfter is 0 for DefaultUnhealthyAfter.
	UnhealthyAfter int `json:"unhealthyAfter,omitempty"`
}

// Outlier configures passive outlier detection: a target whose answers are
// ConsecutiveFailures 5xx or transport errors in a row is ejected (not
// picked) for BaseEjection × 2^(ejections so far), at most MaxEjection; at
// most MaxEjectedRatio of the targets are ejected at once (at least one
// target always stays in).
type Outlier struct {
	// ConsecutiveFailures is 0 for DefaultOutlierConsecutiveFailures.
	ConsecutiveFailures int `json:"consecutiveFailures,omitempty"`
	// BaseEjection is 0 for DefaultOutlierBaseEjection.
	BaseEjection Duration `json:"baseEjection,omitempty"`
	// MaxEjection is 0 for DefaultOutlierMaxEjection.
	MaxEjection Duration `json:"maxEjection,omitempty"`
	// MaxEjectedRatio is in (0, 1]; 0 means DefaultOutlierMaxEjectedRatio.
	MaxEjectedRatio float64 `json:"maxEjectedRatio,omitempty"`
}

// Defaults of the adaptive, health-check and outlier settings.
const (
	DefaultAdaptiveMinLimit           = 1
	DefaultAdaptiveMaxLimit           = 1000
	DefaultAdaptiveInitialLimit       = 20
	DefaultAdaptivePercentile         = 0.9
	DefaultAdaptiveBuffer             = 0.1
	DefaultAdaptiveWindow             = time.Second
	DefaultAdaptiveProbeInterval      = 60 * time.Second
	DefaultHealthCheckInterval        = 5 * time.Second
	DefaultHealthCheckTimeout         = time.Second
	DefaultHealthyAfter               = 2
	DefaultUnhealthyAfter             = 2
	DefaultOutlierConsecutiveFailures = 5
	DefaultOutlierBaseEjection        = 5 * time.Second
	DefaultOutlierMaxEjection         = 5 * time.Minute
	DefaultOutlierMaxEjectedRatio     = 0.5
	MaxClasses                        = 64
	MaxVariants                       = 16
	MaxReservedClasses                = 4 // per limit
)

// BaseVariant labels the clients of a limit with variants that no variant
// takes (metrics, logs); no variant may use it as its id.
const BaseVariant = "base"

// Concurrent reports whether the algorithm limits requests in flight
// (concurrency, adaptive) rather than a rate.
func (a Algorithm) Concurrent() bool { return a == Concurrency || a == Adaptive }

// WithVariant returns l with v's non-zero settings in place of l's own: the
// limit the clients of variant v get. The result keeps l's id (decisions are
// counted under the limit, labelled with the variant) and has no variants.
func (l Limit) WithVariant(v LimitVariant) Limit {
	l.Variants = nil
	if v.Rate != 0 {
		l.Rate = v.Rate
	}
	if v.Period != 0 {
		l.Period = v.Period
	}
	if v.Burst != 0 {
		l.Burst = v.Burst
	}
	if v.Cost != nil {
		c := *v.Cost
		l.Cost = &c
	}
	if v.Adaptive != nil {
		a := *v.Adaptive
		if l.Adaptive != nil {
			a = mergeAdaptive(*l.Adaptive, a)
		}
		l.Adaptive = &a
	}
	return l
}

// mergeAdaptive returns base with over's non-zero fields.
func mergeAdaptive(base, over AdaptiveSettings) AdaptiveSettings {
	if over.MinLimit != 0 {
		base.MinLimit = over.MinLimit
	}
	if over.MaxLimit != 0 {
		base.MaxLimit = over.MaxLimit
	}
	if over.InitialLimit != 0 {
		base.InitialLimit = over.InitialLimit
	}
	if over.Percentile != 0 {
		base.Percentile = over.Percentile
	}
	if over.Buffer != 0 {
		base.Buffer = over.Buffer
	}
	if over.Window != 0 {
		base.Window = over.Window
	}
	if over.ProbeInterval != 0 {
		base.ProbeInterval = over.ProbeInterval
	}
	return base
}

// normalizeAdaptive writes out the defaults of a.
func normalizeAdaptive(a *AdaptiveSettings) {
	if a.MinLimit == 0 {
		a.MinLimit = DefaultAdaptiveMinLimit
	}
	if a.MaxLimit == 0 {
		a.MaxLimit = max(DefaultAdaptiveMaxLimit, a.MinLimit)
	}
	if a.InitialLimit == 0 {
		a.InitialLimit = min(max(DefaultAdaptiveInitialLimit, a.MinLimit), a.MaxLimit)
	}
	if a.Percentile == 0 {
		a.Percentile = DefaultAdaptivePercentile
	}
	if a.Buffer == 0 {
		a.Buffer = DefaultAdaptiveBuffer
	}
	if a.Window == 0 {
		a.Window = Duration(DefaultAdaptiveWindow)
	}
	if a.ProbeInterval == 0 {
		a.ProbeInterval = Duration(DefaultAdaptiveProbeInterval)
	}
}

// normalizeAdaptiveParts writes out the defaults of the settings this file
// adds to a normalized rule set: class match header names, adaptive
// settings (the limit's and its variants'), health checks and outlier
// detection. Documents without them keep their canonical form.
func (n *RuleSet) normalizeAdaptiveParts() {
	for i := range n.Classes {
		m := &n.Classes[i].Match
		for j, meth := range m.Methods {
			m.Methods[j] = strings.ToUpper(meth)
		}
		if len(m.Headers) > 0 {
			hs := make(map[string]string, len(m.Headers))
			for _, name := range slices.Sorted(maps.Keys(m.Headers)) {
				hs[textproto.CanonicalMIMEHeaderKey(name)] = m.Headers[name]
			}
			m.Headers = hs
		}
	}
	for i := range n.Limits {
		l := &n.Limits[i]
		if l.Algorithm == Adaptive {
			if l.Adaptive == nil {
				l.Adaptive = &AdaptiveSettings{}
			}
			normalizeAdaptive(l.Adaptive)
		}
		for j := range l.Variants {
			v := &l.Variants[j]
			if (l.Algorithm == TokenBucket || l.Algorithm == LeakyBucket) && v.Rate != 0 && v.Burst == 0 {
				v.Burst = v.Rate // as for the limit: zero burst means the rate
			}
			if v.Cost != nil && v.Cost.Header != "" {
				v.Cost.Header = textproto.CanonicalMIMEHeaderKey(v.Cost.Header)
			}
		}
	}
	for i := range n.Routes {
		up := &n.Routes[i].Upstream
		if hc := up.HealthCheck; hc != nil {
			if hc.Interval == 0 {
				hc.Interval = Duration(DefaultHealthCheckInterval)
			}
			if hc.Timeout == 0 {
				hc.Timeout = Duration(DefaultHealthCheckTimeout)
			}
			if hc.HealthyAfter == 0 {
				hc.HealthyAfter = DefaultHealthyAfter
			}
			if hc.UnhealthyAfter == 0 {
				hc.UnhealthyAfter = DefaultUnhealthyAfter
			}
		}
		if o := up.Outlier; o != nil {
			if o.ConsecutiveFailures == 0 {
				o.ConsecutiveFailures = DefaultOutlierConsecutiveFailures
			}
			if o.BaseEjection == 0 {
				o.BaseEjection = Duration(DefaultOutlierBaseEjection)
			}
			if o.MaxEjection == 0 {
				o.MaxEjection = Duration(max(DefaultOutlierMaxEjection, o.BaseEjection.D()))
			}
			if o.MaxEjectedRatio == 0 {
				o.MaxEjectedRatio = DefaultOutlierMaxEjectedRatio
			}
		}
	}
}

// classesOf checks the rule set's classes and returns their ids.
func (v validator) classesOf(cs []Class, routes map[string]int) map[string]bool {
	ids := map[string]bool{}
	if len(cs) > MaxClasses {
		v.add("classes", "has %d classes; the limit is %d", len(cs), MaxClasses)
	}
	for i := range cs {
		c := &cs[i]
		p := fmt.Sprintf("classes[%d]", i)
		v.id(p+".id", c.ID)
		switch {
		case c.ID == DefaultClass:
			v.add(p+".id", "%q is the class of requests no class matches; it cannot be declared", c.ID)
		case ids[c.ID]:
			v.add(p+".id", "duplicate id %q", c.ID)
		}
		ids[c.ID] = true
		mp := p + ".match"
		if len(c.Match.Routes) == 0 && len(c.Match.Methods) == 0 && len(c.Match.Headers) == 0 && len(c.Match.Claims) == 0 {
			v.add(mp, "is required: set routes, methods, headers or claims (a class matching every request would leave the others unreachable)")
		}
		v.claims(mp+".claims", c.Match.Claims)
		v.routeRefs(mp, c.Match.Routes, routes)
		v.methods(mp, c.Match.Methods)
		v.headers(mp+".headers", c.Match.Headers)
	}
	return ids
}

// classRefs checks a list of class ids (shedOrder): each declared (or
// DefaultClass), none twice.
func (v validator) classRefs(p string, refs []string, classes map[string]bool) {
	for i, c := range refs {
		cp := fmt.Sprintf("%s[%d]", p, i)
		if c != DefaultClass && !classes[c] {
			v.add(cp, "names class %q, which does not exist (declare it under classes)", c)
		}
		if slices.Contains(refs[:i], c) {
			v.add(cp, "class %q is listed twice", c)
		}
	}
}

// adaptiveLimit checks the settings this file adds to a limit: adaptive,
// reserve and variants.
func (v validator) adaptiveLimit(p string, l *Limit, routes map[string]int) {
	classes := v.classes
	if l.Adaptive != nil && l.Algorithm != Adaptive {
		v.add(p+".adaptive", "applies only to algorithm adaptive")
	}
	if l.Algorithm == Adaptive {
		if l.Rate != 0 {
			v.add(p+".rate", "does not apply to the adaptive algorithm (set adaptive.initialLimit and adaptive.maxLimit)")
		}
		if l.Period != 0 {
			v.add(p+".period", "does not apply to the adaptive algorithm")
		}
		if l.Burst != 0 {
			v.add(p+".burst", "does not apply to the adaptive algorithm")
		}
		if l.Cost != nil {
			v.add(p+".cost", "does not apply to the adaptive algorithm")
		}
		if l.Adaptive != nil {
			v.adaptiveSettings(p+".adaptive", *l.Adaptive)
		}
	}
	if len(l.Reserve) > 0 {
		if !l.Algorithm.Concurrent() && l.Algorithm != "" {
			v.add(p+".reserve", "applies only to the concurrency and adaptive algorithms")
		}
		if len(l.Reserve) > MaxReservedClasses {
			v.add(p+".reserve", "reserves capacity for %d classes; the limit is %d", len(l.Reserve), MaxReservedClasses)
		}
		sum := 0.0
		for _, c := range slices.Sorted(maps.Keys(l.Reserve)) {
			cp := joinKey(p+".reserve", c)
			if !classes[c] {
				v.add(cp, "names class %q, which does not exist (declare it under classes)", c)
			}
			share := l.Reserve[c]
			if !(share > 0 && share < 1) {
				v.add(cp, "must be in (0, 1)")
				continue
			}
			sum += share
		}
		if sum >= 1 {
			v.add(p+".reserve", "shares add up to %v; they must leave some capacity unreserved (< 1)", sum)
		}
	}
	if len(l.Variants) > MaxVariants {
		v.add(p+".variants", "has %d variants; the limit is %d", len(l.Variants), MaxVariants)
	}
	total := 0
	for i := range l.Variants {
		vr := &l.Variants[i]
		vp := fmt.Sprintf("%s.variants[%d]", p, i)
		v.id(vp+".id", vr.ID)
		if vr.ID == BaseVariant {
			v.add(vp+".id", "%q names the clients no variant takes; it cannot be a variant's id", vr.ID)
		}
		for j := range i {
			if vr.ID != "" && l.Variants[j].ID == vr.ID {
				v.add(vp+".id", "duplicate id %q (also variants[%d])", vr.ID, j)
			}
		}
		if vr.Weight < 1 || vr.Weight > 100 {
			v.add(vp+".weight", "must be a percentage of clients between 1 and 100")
		} else {
			total += vr.Weight
		}
		if *vr == (LimitVariant{ID: vr.ID, Weight: vr.Weight}) {
			v.add(vp, "changes nothing; set rate, period, burst, cost or adaptive")
		}
		// The variant's limit is checked as a limit of its own, under the
		// variant's path: one set of rules for both.
		merged := l.WithVariant(*vr)
		if l.Algorithm == Adaptive {
			// rate, period, burst and cost are refused above for the base;
			// a variant setting them is refused here.
			v.variantFieldsAdaptive(vp, vr)
			continue
		}
		// Only what the variant adds is reported: the base limit's own
		// problems are reported once, at the limit's path.
		base := *l
		base.Variants = nil
		had := validator{errs: &Errors{}, classes: classes}
		had.limit(vp, &base, routes)
		known := map[FieldError]bool{}
		for _, e := range *had.errs {
			known[e] = true
		}
		sub := validator{errs: &Errors{}, classes: classes}
		sub.limit(vp, &merged, routes)
		for _, e := range *sub.errs {
			if !known[e] {
				v.errs.add(e.Path, "%s", e.Message)
			}
		}
	}
	if total > 100 {
		v.add(p+".variants", "weights add up to %d%%; at most 100%% of clients can get a variant", total)
	}
}

func (v validator) variantFieldsAdaptive(vp string, vr *LimitVariant) {
	if vr.Rate != 0 || vr.Period != 0 || vr.Burst != 0 || vr.Cost != nil {
		v.add(vp, "a variant of an adaptive limit sets adaptive only (rate, period, burst and cost do not apply)")
	}
	if vr.Adaptive != nil {
		v.adaptiveSettings(vp+".adaptive", *vr.Adaptive)
	}
}

func (v validator) adaptiveSettings(p string, a AdaptiveSettings) {
	if a.MinLimit < 0 || a.MinLimit > 1_000_000_000 {
		v.add(p+".minLimit", "must be between 1 and 1000000000 (0 means %d)", DefaultAdaptiveMinLimit)
	}
	if a.MaxLimit < 0 || a.MaxLimit > 1_000_000_000 {
		v.add(p+".maxLimit", "must be between 1 and 1000000000 (0 means %d)", DefaultAdaptiveMaxLimit)
	}
	lo, hi := cmpOr(a.MinLimit, DefaultAdaptiveMinLimit), cmpOr(a.MaxLimit, max(DefaultAdaptiveMaxLimit, a.MinLimit))
	if hi < lo {
		v.add(p+".maxLimit", "%d is below minLimit %d", hi, lo)
	}
	if a.InitialLimit != 0 && (a.InitialLimit < lo || a.InitialLimit > hi) {
		v.add(p+".initialLimit", "must be between minLimit %d and maxLimit %d", lo, hi)
	}
	if a.InitialLimit < 0 {
		v.add(p+".initialLimit", "must be >= 0")
	}
	if !(a.Percentile >= 0 && a.Percentile <= 1) {
		v.add(p+".percentile", "must be in (0, 1] (0 means %v)", DefaultAdaptivePercentile)
	}
	if !(a.Buffer >= 0 && a.Buffer <= 10) || math.IsInf(a.Buffer, 0) {
		v.add(p+".buffer", "must be between 0 and 10 (0 means %v)", DefaultAdaptiveBuffer)
	}
	if a.Window != 0 && (a.Window.D() < 10*time.Millisecond || a.Window.D() > time.Minute) {
		v.add(p+".window", "must be between 10ms and 1m (0 means %s)", DefaultAdaptiveWindow)
	}
	win := cmpOr(a.Window.D(), DefaultAdaptiveWindow)
	if a.ProbeInterval < 0 || a.ProbeInterval.D() > 24*time.Hour {
		v.add(p+".probeInterval", "must be between window and 24h (0 means %s)", DefaultAdaptiveProbeInterval)
	} else if a.ProbeInterval != 0 && a.ProbeInterval.D() < 2*win {
		v.add(p+".probeInterval", "%s must be at least twice the window (%s)", a.ProbeInterval.D(), win)
	}
}

// upstreamHealth checks an upstream's healthCheck and outlier settings.
func (v validator) upstreamHealth(p string, up *Upstream) {
	if hc := up.HealthCheck; hc != nil {
		hp := p + ".healthCheck"
		switch {
		case hc.Path == "":
			v.add(hp+".path", "is required")
		case !strings.HasPrefix(hc.Path, "/"):
			v.add(hp+".path", "%q must start with /", hc.Path)
		case !targetPathPattern.MatchString(hc.Path):
			v.add(hp+".path", "%q must be a URL path (no spaces, query or fragment)", hc.Path)
		}
		if hc.Interval != 0 && (hc.Interval.D() < 100*time.Millisecond || hc.Interval.D() > time.Hour) {
			v.add(hp+".interval", "must be between 100ms and 1h (0 means %s)", DefaultHealthCheckInterval)
		}
		if hc.Timeout != 0 && (hc.Timeout.D() < time.Millisecond || hc.Timeout.D() > time.Minute) {
			v.add(hp+".timeout", "must be between 1ms and 1m (0 means %s)", DefaultHealthCheckTimeout)
		}
		if hc.Interval != 0 && hc.Timeout.D() > hc.Interval.D() {
			v.add(hp+".timeout", "%s is longer than the interval %s", hc.Timeout.D(), hc.Interval.D())
		}
		if hc.HealthyAfter < 0 || hc.HealthyAfter > 100 {
			v.add(hp+".healthyAfter", "must be between 1 and 100 (0 means %d)", DefaultHealthyAfter)
		}
		if hc.UnhealthyAfter < 0 || hc.UnhealthyAfter > 100 {
			v.add(hp+".unhealthyAfter", "must be between 1 and 100 (0 means %d)", DefaultUnhealthyAfter)
		}
	}
	if o := up.Outlier; o != nil {
		op := p + ".outlier"
		if o.ConsecutiveFailures < 0 || o.ConsecutiveFailures > 10000 {
			v.add(op+".consecutiveFailures", "must be between 1 and 10000 (0 means %d)", DefaultOutlierConsecutiveFailures)
		}
		if o.BaseEjection != 0 && (o.BaseEjection.D() < 10*time.Millisecond || o.BaseEjection.D() > time.Hour) {
			v.add(op+".baseEjection", "must be between 10ms and 1h (0 means %s)", DefaultOutlierBaseEjection)
		}
		if o.MaxEjection != 0 && (o.MaxEjection.D() < 10*time.Millisecond || o.MaxEjection.D() > 24*time.Hour) {
			v.add(op+".maxEjection", "must be between 10ms and 24h")
		} else if o.MaxEjection != 0 && o.MaxEjection.D() < cmpOr(o.BaseEjection.D(), DefaultOutlierBaseEjection) {
			v.add(op+".maxEjection", "is shorter than baseEjection")
		}
		v.ratio(op+".maxEjectedRatio", o.MaxEjectedRatio, true)
	}
}

func cmpOr[T comparable](a, b T) T {
	var zero T
	if a != zero {
		return a
	}
	return b
}
