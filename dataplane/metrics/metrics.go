// Package metrics defines the gateway's Prometheus metrics, with the names the
// design fixes (sluice_*). One Registry per process; components receive the
// *Metrics they report to, so tests can use a fresh one.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics holds every metric the gateway exports. The zero value is not
// usable; call New. Safe for concurrent use.
type Metrics struct {
	Registry *prometheus.Registry

	Requests           *prometheus.CounterVec   // sluice_requests_total{route,code}
	RequestDuration    *prometheus.HistogramVec // sluice_request_duration_seconds{route}
	LimitDecisions     *prometheus.CounterVec   // sluice_limit_decisions_total{rule,decision}
	BreakerState       *prometheus.GaugeVec     // sluice_breaker_state{rule}
	BreakerTransitions *prometheus.CounterVec   // sluice_breaker_transitions_total{rule,from,to}
	DegradeLevel       *prometheus.GaugeVec     // sluice_degrade_level{rule}
	DegradeTransitions *prometheus.CounterVec   // sluice_degrade_transitions_total{rule,from,to}
	DegradeShed        *prometheus.CounterVec   // sluice_degrade_shed_total{rule}
	RulesetVersion     prometheus.Gauge         // sluice_ruleset_version
	RulesetApplyErrors prometheus.Counter       // sluice_ruleset_apply_errors_total
	RulesetApplies     prometheus.Counter       // sluice_ruleset_applies_total
	StoreErrors        *prometheus.CounterVec   // sluice_store_errors_total{store}
	LogsDropped        prometheus.Counter       // sluice_log_dropped_total
}

// Limit decision label values.
const (
	DecisionAllow      = "allow"
	DecisionReject     = "reject"
	DecisionShadowDeny = "shadow_reject"
	DecisionExempt     = "exempt"
	DecisionStoreError = "store_error"
)

// New registers every metric, and the Go and process collectors, in a new registry.
func New() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_requests_total", Help: "Requests served, by route and status code.",
		}, []string{"route", "code"}),
		RequestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_request_duration_seconds", Help: "Time from request to response, by route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"}),
		LimitDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_limit_decisions_total", Help: "Limit decisions, by rule and decision.",
		}, []string{"rule", "decision"}),
		BreakerState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_breaker_state", Help: "Circuit breaker state: 0 closed, 1 half-open, 2 open.",
		}, []string{"rule"}),
		BreakerTransitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_breaker_transitions_total", Help: "Circuit breaker state changes.",
		}, []string{"rule", "from", "to"}),
		DegradeLevel: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_degrade_level", Help: "Degrade level: 0 normal, 1 partial, 2 full.",
		}, []string{"rule"}),
		DegradeTransitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_degrade_transitions_total", Help: "Degrade level changes.",
		}, []string{"rule", "from", "to"}),
		DegradeShed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_degrade_shed_total", Help: "Requests answered with a degrade fallback.",
		}, []string{"rule"}),
		RulesetVersion: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_ruleset_version", Help: "Version of the applied rule set.",
		}),
		RulesetApplyErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_ruleset_apply_errors_total", Help: "Rule sets refused (invalid, corrupt or failing to compile).",
		}),
		RulesetApplies: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_ruleset_applies_total", Help: "Rule sets applied.",
		}),
		StoreErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_store_errors_total", Help: "Errors from shared stores, by store.",
		}, []string{"store"}),
		LogsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_log_dropped_total", Help: "Log lines dropped by the log rate limiter.",
		}),
	}
	r.MustRegister(m.Requests, m.RequestDuration, m.LimitDecisions, m.BreakerState, m.BreakerTransitions,
		m.DegradeLevel, m.DegradeTransitions, m.DegradeShed, m.RulesetVersion, m.RulesetApplyErrors,
		m.RulesetApplies, m.StoreErrors, m.LogsDropped,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
