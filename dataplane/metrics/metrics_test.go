package metrics

import "testing"

// The dashboard and the alerts under deploy/ are checked against the
// metrics the code defines by deploy/check (TestDashboardAndAlerts).

// registered returns the name of every metric family New registers, after
// giving each vector one child so that it is gathered.
func registered(t *testing.T) map[string]bool {
	t.Helper()
	m := New()
	m.Requests.WithLabelValues("r", "200").Inc()
	m.RequestDuration.WithLabelValues("r").Observe(0.01)
	m.LimitDecision("l", DecisionAllow, "", "", "").Inc()
	m.BreakerState.WithLabelValues("b").Set(0)
	m.BreakerTransitions.WithLabelValues("b", "closed", "open").Inc()
	m.DegradeLevel.WithLabelValues("d").Set(0)
	m.DegradeTransitions.WithLabelValues("d", "normal", "partial").Inc()
	m.DegradeShed.WithLabelValues("d").Inc()
	m.RulesetVersion.Set(1)
	m.RulesetApplyErrors.Inc()
	m.RulesetApplies.Inc()
	m.StoreErrors.WithLabelValues("redis").Inc()
	m.LogsDropped.Inc()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	return names
}

func TestEveryFamilyGathered(t *testing.T) {
	names := registered(t)
	for _, want := range []string{
		"sluice_requests_total", "sluice_request_duration_seconds", "sluice_limit_decisions_total",
		"sluice_breaker_state", "sluice_breaker_transitions_total", "sluice_degrade_level",
		"sluice_degrade_transitions_total", "sluice_degrade_shed_total", "sluice_ruleset_version",
		"sluice_ruleset_apply_errors_total", "sluice_ruleset_applies_total", "sluice_store_errors_total",
		"sluice_log_dropped_total",
	} {
		if !names[want] {
			t.Errorf("%s is not gathered", want)
		}
	}
}
