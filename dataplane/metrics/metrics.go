// Package metrics defines the gateway's Prometheus metrics, with the names the
// design fixes (sluice_*). One Registry per process; components receive the
// *Metrics they report to, so tests can use a fresh one.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
)

// Metrics holds every metric the gateway exports. The zero value is not
// usable; call New. Safe for concurrent use.
type Metrics struct {
	Registry *prometheus.Registry

	Requests           *prometheus.CounterVec   // sluice_requests_total{route,code}
	RequestDuration    *prometheus.HistogramVec // sluice_request_duration_seconds{route}
	LimitDecisions     *prometheus.CounterVec   // sluice_limit_decisions_total{rule,decision,class,variant,tier}; see LimitDecision
	VariantDuration    *prometheus.HistogramVec // sluice_limit_variant_request_duration_seconds{rule,variant}; see VariantLatency
	IdentityDecisions  *prometheus.CounterVec   // sluice_identity_decisions_total{identity,result}: valid, missing, invalid
	BreakerState       *prometheus.GaugeVec     // sluice_breaker_state{rule}
	BreakerTransitions *prometheus.CounterVec   // sluice_breaker_transitions_total{rule,from,to}
	DegradeLevel       *prometheus.GaugeVec     // sluice_degrade_level{rule}
	DegradeTransitions *prometheus.CounterVec   // sluice_degrade_transitions_total{rule,from,to}
	DegradeShed        *prometheus.CounterVec   // sluice_degrade_shed_total{rule}
	BreakerRejections  *prometheus.CounterVec   // sluice_breaker_rejections_total{rule}
	RulesetVersion     prometheus.Gauge         // sluice_ruleset_version
	RulesetApplyErrors prometheus.Counter       // sluice_ruleset_apply_errors_total
	RulesetApplies     prometheus.Counter       // sluice_ruleset_applies_total
	StoreErrors        *prometheus.CounterVec   // sluice_store_errors_total{store}
	StoreRepairs       *prometheus.CounterVec   // sluice_store_repairs_total{store}
	LogsDropped        prometheus.Counter       // sluice_log_dropped_total
	AccessLogDropped   prometheus.Counter       // sluice_access_log_dropped_total
	Panics             *prometheus.CounterVec   // sluice_panics_total{component}
	AdaptiveLimit      *prometheus.GaugeVec     // sluice_limit_adaptive_limit{rule,variant}
	TargetHealthy      *prometheus.GaugeVec     // sluice_upstream_target_healthy{route,target}
	TargetEjections    *prometheus.CounterVec   // sluice_upstream_target_ejections_total{route,target}
	LoopConnections    prometheus.Gauge         // sluice_evloop_connections
	LoopHandoffs       *prometheus.CounterVec   // sluice_evloop_handoffs_total{reason}; see Handoff*

	// Served counts every request answered, for the node's own figures.
	Served Served
}

// Limit decision label values.
const (
	DecisionAllow      = "allow"
	DecisionReject     = "reject"
	DecisionShadowDeny = "shadow_reject"
	DecisionExempt     = "exempt"
	DecisionStoreError = "store_error"
)

// Reasons a request is served off its event loop, on a goroutine, after
// which its connection goes back to a loop; h2c alone leaves HTTP/1.1 for
// good (sluice_evloop_handoffs_total's reason label).
const (
	HandoffH2C     = "h2c"     // the HTTP/2 preface (prior knowledge)
	HandoffHTTP10  = "http10"  // an HTTP/1.0 request
	HandoffUpgrade = "upgrade" // a protocol switch (WebSocket, h2c upgrade)
	HandoffBody    = "body"    // a chunked body, or one over the loop's bound
	HandoffExpect  = "expect"  // a body behind Expect: 100-continue
	HandoffRoute   = "route"   // a route a loop does not serve (https or h2c targets)
	HandoffStream  = "stream"  // an answer whose body streams (chunked, long)
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
			Buckets: durationBuckets[:],
		}, []string{"route"}),
		LimitDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_limit_decisions_total", Help: "Limit decisions, by rule and decision; class for limits with reserved capacity, variant for limits with variants, tier for limits with tiers (empty otherwise).",
		}, []string{"rule", "decision", "class", "variant", "tier"}),
		VariantDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_limit_variant_request_duration_seconds", Help: "Time from request to response of the requests a limit with variants let through (allowed or shadow-rejected, and admitted by every limit of the route), by rule and variant.",
			Buckets: durationBuckets[:],
		}, []string{"rule", "variant"}),
		IdentityDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_identity_decisions_total", Help: "Token checks of identities, by identity and result: valid, missing (no token; answered 401 when the identity requires one), invalid (answered 401).",
		}, []string{"identity", "result"}),
		AdaptiveLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_limit_adaptive_limit", Help: "The current limit of an adaptive limit (requests in flight per key), by rule and variant (empty for the limit itself).",
		}, []string{"rule", "variant"}),
		TargetHealthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_upstream_target_healthy", Help: "Upstream target health: 1 in use, 0 ejected by outlier detection or failing its active health check.",
		}, []string{"route", "target"}),
		TargetEjections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_upstream_target_ejections_total", Help: "Upstream targets ejected by outlier detection, by route and target.",
		}, []string{"route", "target"}),
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
		BreakerRejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_breaker_rejections_total", Help: "Requests a breaker refused (open, or half-open with every probe taken).",
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
		StoreRepairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_store_repairs_total", Help: "Keys of a shared store found in an impossible state and rewritten from scratch, by store.",
		}, []string{"store"}),
		LogsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_log_dropped_total", Help: "Log lines dropped by the log rate limiter.",
		}),
		AccessLogDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_access_log_dropped_total", Help: "Access log lines (--access-log) dropped because the log's destination fell behind.",
		}),
		Panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_panics_total", Help: "Panics recovered in a node's components (each stops the node), by component.",
		}, []string{"component"}),
		LoopConnections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_evloop_connections", Help: "Client connections served by the event-loop engine's loops.",
		}),
		LoopHandoffs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_evloop_handoffs_total", Help: "Requests the event loops served off the loop, on a goroutine (the connection then returns to a loop; h2c: to the HTTP/2 server for good), by reason: h2c, http10, upgrade, body, expect, route, stream.",
		}, []string{"reason"}),
	}
	r.MustRegister(m.Requests, m.RequestDuration, m.LimitDecisions, m.VariantDuration, m.IdentityDecisions, m.BreakerState, m.BreakerTransitions,
		m.DegradeLevel, m.DegradeTransitions, m.DegradeShed, m.BreakerRejections, m.RulesetVersion, m.RulesetApplyErrors,
		m.RulesetApplies, m.StoreErrors, m.StoreRepairs, m.LogsDropped, m.AccessLogDropped, m.Panics,
		m.AdaptiveLimit, m.TargetHealthy, m.TargetEjections, m.LoopConnections, m.LoopHandoffs,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Live names the routes and rules of the rule set a node serves, for Prune.
type Live struct {
	Routes, Limits, Breakers, Degrades []string
	// Identities are the identity ids (sluice_identity_decisions_total).
	Identities []string
}

// Prune deletes every per-route and per-rule series whose route or rule is
// not in live: sluice_requests_total and sluice_request_duration_seconds by
// route, sluice_limit_decisions_total and
// sluice_limit_variant_request_duration_seconds by limit, sluice_breaker_state and
// sluice_breaker_transitions_total by breaker, sluice_degrade_level,
// sluice_degrade_transitions_total and sluice_degrade_shed_total by degrade
// rule. The gateway calls it after each swap, so that a node does not keep
// exporting the series of rules that are gone. It returns the number of
// series deleted. It reads every series of those metrics once (off the hot
// path); safe for concurrent use with updates, which may re-create a series
// of a rule an in-flight request of the retired rule set still reports on.
func (m *Metrics) Prune(live Live) int {
	set := func(ids []string) map[string]bool {
		s := make(map[string]bool, len(ids))
		for _, id := range ids {
			s[id] = true
		}
		return s
	}
	routes := set(live.Routes)
	routes[""] = true // requests no route matched (404)
	limits, breakers, degrades := set(live.Limits), set(live.Breakers), set(live.Degrades)
	n := 0
	n += prune(m.IdentityDecisions, "identity", set(live.Identities))
	n += prune(m.Requests, "route", routes)
	n += prune(m.RequestDuration, "route", routes)
	n += prune(m.LimitDecisions, "rule", limits)
	n += prune(m.VariantDuration, "rule", limits)
	n += prune(m.AdaptiveLimit, "rule", limits)
	n += prune(m.TargetHealthy, "route", routes)
	n += prune(m.TargetEjections, "route", routes)
	n += prune(m.BreakerState, "rule", breakers)
	n += prune(m.BreakerTransitions, "rule", breakers)
	n += prune(m.DegradeLevel, "rule", degrades)
	n += prune(m.DegradeTransitions, "rule", degrades)
	n += prune(m.DegradeShed, "rule", degrades)
	n += prune(m.BreakerRejections, "rule", breakers)
	return n
}

// vec is what prune needs of a *prometheus.MetricVec wrapper.
type vec interface {
	prometheus.Collector
	Delete(prometheus.Labels) bool
}

// prune deletes v's series whose label value is not in keep, each by its
// whole label set (a hash lookup; DeletePartialMatch would scan every series
// for every value, quadratic in the number of rules).
func prune(v vec, label string, keep map[string]bool) int {
	ch := make(chan prometheus.Metric, 256)
	go func() {
		v.Collect(ch)
		close(ch)
	}()
	var gone []prometheus.Labels
	var pb dto.Metric
	for mt := range ch {
		pb.Reset()
		if mt.Write(&pb) != nil {
			continue
		}
		for _, lp := range pb.GetLabel() {
			if lp.GetName() == label && !keep[lp.GetValue()] {
				ls := make(prometheus.Labels, len(pb.GetLabel()))
				for _, l := range pb.GetLabel() {
					ls[l.GetName()] = l.GetValue()
				}
				gone = append(gone, ls)
				break
			}
		}
	}
	n := 0
	for _, ls := range gone {
		if v.Delete(ls) {
			n++
		}
	}
	return n
}

// LimitDecision returns the sluice_limit_decisions_total counter of one
// rule's decision; class, variant and tier are "" where they do not apply
// (a limit without reserved capacity, without variants, without tiers or
// for a caller no tier takes).
func (m *Metrics) LimitDecision(rule, decision, class, variant, tier string) prometheus.Counter {
	return m.LimitDecisions.WithLabelValues(rule, decision, class, variant, tier)
}

// VariantLatency returns the sluice_limit_variant_request_duration_seconds
// histogram of one variant of a limit with variants (variant is a variant
// id or api.BaseVariant): what the request path observes the request's
// duration in, once, for each limit with variants that let it through.
func (m *Metrics) VariantLatency(rule, variant string) prometheus.Observer {
	return m.VariantDuration.WithLabelValues(rule, variant)
}
