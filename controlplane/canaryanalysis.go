package sluice

import (
	"fmt"
	"time"

	"github.com/sluicegw/sluice/api"
)

// CanaryAnalysis is how the control plane judges a canary by itself (DESIGN
// "Canary analysis"). A zero maximum is not checked.
type CanaryAnalysis struct {
	// Window is how long each comparison lasts; zero means 60s.
	Window api.Duration `json:"window,omitempty"`
	// MaxRejectRateIncrease is the largest allowed canary reject rate
	// (share answered 429 or 503) minus the baseline's.
	MaxRejectRateIncrease float64 `json:"maxRejectRateIncrease,omitempty"`
	// Max5xxRateIncrease is the same for the share answered 5xx.
	Max5xxRateIncrease float64 `json:"max5xxRateIncrease,omitempty"`
	// MaxP99Ratio is the largest allowed canary p99 over baseline p99.
	MaxP99Ratio float64 `json:"maxP99Ratio,omitempty"`
	// MinRequests is how many requests each side must serve in a window
	// before it is judged; zero means 100.
	MinRequests int64 `json:"minRequests,omitempty"`
	// OnPass is promote or hold; empty means hold.
	OnPass string `json:"onPass,omitempty"`
}

// Canary analysis defaults and bounds.
const (
	DefaultCanaryWindow      = 60 * time.Second
	MinCanaryWindow          = 10 * time.Second
	MaxCanaryWindow          = time.Hour
	DefaultCanaryMinRequests = 100
	OnPassPromote            = "promote"
	OnPassHold               = "hold"
)

// WindowOrDefault is Window, or DefaultCanaryWindow when zero.
func (a *CanaryAnalysis) WindowOrDefault() time.Duration {
	if a.Window.D() <= 0 {
		return DefaultCanaryWindow
	}
	return a.Window.D()
}

// MinRequestsOrDefault is MinRequests, or DefaultCanaryMinRequests when zero.
func (a *CanaryAnalysis) MinRequestsOrDefault() int64 {
	if a.MinRequests <= 0 {
		return DefaultCanaryMinRequests
	}
	return a.MinRequests
}

// Validate returns every problem of the analysis, with paths under
// "canary.analysis".
func (a *CanaryAnalysis) Validate() api.Errors {
	var errs api.Errors
	bad := func(field, msg string) {
		errs = append(errs, api.FieldError{Path: "canary.analysis." + field, Message: msg})
	}
	if w := a.Window.D(); w != 0 && (w < MinCanaryWindow || w > MaxCanaryWindow) {
		bad("window", fmt.Sprintf("must be between %s and %s", MinCanaryWindow, MaxCanaryWindow))
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"maxRejectRateIncrease", a.MaxRejectRateIncrease}, {"max5xxRateIncrease", a.Max5xxRateIncrease}} {
		if f.v < 0 || f.v > 1 {
			bad(f.name, "must be between 0 and 1")
		}
	}
	if a.MaxP99Ratio < 0 {
		bad("maxP99Ratio", "must be >= 0")
	}
	if a.MinRequests < 0 {
		bad("minRequests", "must be >= 0")
	}
	switch a.OnPass {
	case "", OnPassPromote, OnPassHold:
	default:
		bad("onPass", "must be promote or hold")
	}
	return errs
}

// Side places a node in the canary's comparison by its registration: a
// node whose labels match the selector and that applied the canary's
// version is a canary node; a node whose labels do not match and that runs
// another version is the baseline; any other (a selected node still on the
// old version, an unselected one on the canary's) is in neither.
func (c *Canary) Side(_ string, labels map[string]string, version int64) CohortSide {
	selected := api.Selector(c.Selector).Matches(labels)
	switch {
	case selected && version == c.Version:
		return SideCanary
	case !selected && version != c.Version:
		return SideBaseline
	}
	return SideNeither
}

// CohortFigures are one side's figures over a window: request counts
// summed over its nodes, rates and p99 the median of its nodes' (see
// Fleet.Cohort).
type CohortFigures struct {
	Nodes        []string `json:"nodes"`
	Requests     int64    `json:"requests"`
	Rejected     int64    `json:"rejected"`
	Errors5xx    int64    `json:"errors5xx"`
	RejectRate   float64  `json:"rejectRate"`
	ErrorRate5xx float64  `json:"errorRate5xx"`
	P99Seconds   float64  `json:"p99Seconds"`
}

// CanaryBreach is one limit a window breached.
type CanaryBreach struct {
	Metric string  `json:"metric"`
	Value  float64 `json:"value"`
	Limit  float64 `json:"limit"`
}

// Canary comparison states and verdicts.
const (
	ComparisonWaiting  = "waiting"
	ComparisonRunning  = "running"
	ComparisonPassed   = "passed"
	ComparisonBreached = "breached"
	ComparisonHeld     = "held"

	VerdictInsufficient = "insufficient"
	VerdictPass         = "pass"
	VerdictBreach       = "breach"
)

// CanaryComparison is the analyser's view of a canary: the last judged
// window, and the window in progress.
type CanaryComparison struct {
	State                string          `json:"state"`
	WindowStart          *time.Time      `json:"windowStart,omitempty"`
	WindowEnd            *time.Time      `json:"windowEnd,omitempty"`
	Windows              int64           `json:"windows"`
	Verdict              string          `json:"verdict,omitempty"`
	Canary               *CohortFigures  `json:"canary,omitempty"`
	Baseline             *CohortFigures  `json:"baseline,omitempty"`
	RejectRateIncrease   float64         `json:"rejectRateIncrease"`
	ErrorRate5xxIncrease float64         `json:"errorRate5xxIncrease"`
	P99Ratio             float64         `json:"p99Ratio"`
	Breaches             []CanaryBreach  `json:"breaches,omitempty"`
	Current              *CohortProgress `json:"current,omitempty"`
	DecidedAt            *time.Time      `json:"decidedAt,omitempty"`
}

// CohortProgress is the window in progress.
type CohortProgress struct {
	Canary   *CohortFigures `json:"canary"`
	Baseline *CohortFigures `json:"baseline"`
}

// Judge compares canary with baseline under a: insufficient when either
// side served fewer than MinRequests, breach with every limit exceeded, or
// pass. It fills the comparison's figures.
func (a *CanaryAnalysis) Judge(canary, baseline *CohortFigures) (verdict string, rejInc, errInc, p99Ratio float64, breaches []CanaryBreach) {
	rejInc = canary.RejectRate - baseline.RejectRate
	errInc = canary.ErrorRate5xx - baseline.ErrorRate5xx
	switch {
	case baseline.P99Seconds > 0:
		p99Ratio = canary.P99Seconds / baseline.P99Seconds
	case canary.P99Seconds > 0:
		p99Ratio = 0 // no baseline latency to compare with: not judged
	}
	min := a.MinRequestsOrDefault()
	if canary.Requests < min || baseline.Requests < min {
		return VerdictInsufficient, rejInc, errInc, p99Ratio, nil
	}
	if a.MaxRejectRateIncrease > 0 && rejInc > a.MaxRejectRateIncrease {
		breaches = append(breaches, CanaryBreach{Metric: "rejectRateIncrease", Value: rejInc, Limit: a.MaxRejectRateIncrease})
	}
	if a.Max5xxRateIncrease > 0 && errInc > a.Max5xxRateIncrease {
		breaches = append(breaches, CanaryBreach{Metric: "errorRate5xxIncrease", Value: errInc, Limit: a.Max5xxRateIncrease})
	}
	if a.MaxP99Ratio > 0 && p99Ratio > a.MaxP99Ratio {
		breaches = append(breaches, CanaryBreach{Metric: "p99Ratio", Value: p99Ratio, Limit: a.MaxP99Ratio})
	}
	if len(breaches) > 0 {
		return VerdictBreach, rejInc, errInc, p99Ratio, breaches
	}
	return VerdictPass, rejInc, errInc, p99Ratio, nil
}
