package metrics

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The Grafana dashboard and the Prometheus alerts under deploy/ name metrics
// by string; this keeps them honest when a metric is renamed or removed.
var deployFiles = []string{
	"../../deploy/grafana/sluice.json",
	"../../deploy/prometheus/alerts.yml",
}

// controlPlaneMetrics is where sluice-admin's metrics (sluice_admin_*) are
// defined; the dataplane module cannot import it, so names are checked as
// string literals in its source.
const controlPlaneMetrics = "../../controlplane/http/metrics.go"

var metricName = regexp.MustCompile(`sluice_[a-z_]+`)

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

// baseName strips the series suffixes Prometheus adds to a histogram or
// summary family.
func baseName(name string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(name, suffix); ok {
			return b
		}
	}
	return name
}

func TestDeployReferencesExistingMetrics(t *testing.T) {
	names := registered(t)
	cp, err := os.ReadFile(controlPlaneMetrics)
	if err != nil {
		t.Fatalf("reading the control plane's metrics: %v", err)
	}
	for _, file := range deployFiles {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("reading %s: %v", file, err)
		}
		refs := map[string]bool{}
		for _, ref := range metricName.FindAllString(string(text), -1) {
			refs[ref] = true
		}
		if len(refs) == 0 {
			t.Errorf("%s references no sluice_ metric; is the pattern or the file wrong?", file)
		}
		sorted := make([]string, 0, len(refs))
		for ref := range refs {
			sorted = append(sorted, ref)
		}
		sort.Strings(sorted)
		for _, ref := range sorted {
			if strings.HasPrefix(ref, "sluice_admin_") {
				// Histogram series of the control plane: try the name as
				// written, then without its suffix.
				if !strings.Contains(string(cp), `"`+ref+`"`) && !strings.Contains(string(cp), `"`+baseName(ref)+`"`) {
					t.Errorf("%s references %s, which %s does not define", file, ref, controlPlaneMetrics)
				}
				continue
			}
			if !names[ref] && !names[baseName(ref)] {
				t.Errorf("%s references %s, which the gateway does not export", file, ref)
			}
		}
	}
}

// The check must be able to fail: a made-up name is caught.
func TestUnknownMetricIsCaught(t *testing.T) {
	names := registered(t)
	for _, bogus := range []string{"sluice_requests", "sluice_ruleset_versions", "sluice_nope_bucket"} {
		if names[bogus] || names[baseName(bogus)] {
			t.Errorf("%s should not be a metric", bogus)
		}
	}
}
