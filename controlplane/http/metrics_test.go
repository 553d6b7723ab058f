package http

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// sluice_admin_publish_attempts_total is exposed from start with every
// result at 0: deploy/prometheus/alerts.yml's publish-failure alert takes
// its increase, which a series first seen at 1 would not have.
func TestPublishAttemptsExposedAtStart(t *testing.T) {
	m := newMetrics(nil)
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "sluice_admin_publish_attempts_total" {
			continue
		}
		for _, metric := range f.GetMetric() {
			got[label(metric, "result")] = metric.GetCounter().GetValue()
		}
	}
	for _, result := range []string{"published", "retry", "failed"} {
		if v, ok := got[result]; !ok || v != 0 {
			t.Errorf("result %q: got %v (exposed %v), want 0 from start", result, v, ok)
		}
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
