package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestServedBuckets: Served files a duration in the bucket
// sluice_request_duration_seconds does (upper bounds inclusive), and its
// totals count what was recorded.
func TestServedBuckets(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		seconds float64
	}{
		{"zero", 0}, {"on a bound", .001}, {"between bounds", .003}, {"last bound", 10}, {"past every bound", 11},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var s Served
			h := New().RequestDuration.WithLabelValues("r")
			s.Record(200, tc.seconds)
			h.Observe(tc.seconds)
			var pb dto.Metric
			if err := h.(prometheus.Metric).Write(&pb); err != nil {
				t.Fatal(err)
			}
			tot := s.Totals()
			for i, bk := range pb.GetHistogram().GetBucket() {
				if tot.Bounds[i] != bk.GetUpperBound() || tot.Cumulative[i] != bk.GetCumulativeCount() {
					t.Fatalf("bucket %d: Served le %v count %d, Prometheus le %v count %d",
						i, tot.Bounds[i], tot.Cumulative[i], bk.GetUpperBound(), bk.GetCumulativeCount())
				}
			}
			if tot.Total != 1 || tot.Rejected != 0 || tot.Cumulative[len(tot.Cumulative)-1] != 1 {
				t.Fatalf("totals %+v", tot)
			}
		})
	}
	var s Served
	s.Record(429, .01)
	s.Record(503, .01)
	s.Count(404)
	s.Count(503)
	if tot := s.Totals(); tot.Total != 4 || tot.Rejected != 3 || tot.Cumulative[len(tot.Cumulative)-1] != 2 {
		t.Fatalf("totals %+v, want 4 requests, 3 rejected, 2 with a duration", tot)
	}
}

// BenchmarkFinish measures what the request path's record step costs per
// request, in parallel: the route's Prometheus series (counter and
// histogram, as the snapshot records them) with and without Served's
// totals.
func BenchmarkFinish(b *testing.B) {
	m := New()
	ctr := m.Requests.WithLabelValues("r", "200")
	h := m.RequestDuration.WithLabelValues("r")
	b.Run("prometheus", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				ctr.Inc()
				h.Observe(.003)
			}
		})
	})
	b.Run("prometheus+served", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				ctr.Inc()
				h.Observe(.003)
				m.Served.Record(200, .003)
			}
		})
	})
}

// BenchmarkSample compares one sample of the node's statistics: Served's
// totals against gathering the registry (what the sampler did before), with
// 50 routes' series.
func BenchmarkSample(b *testing.B) {
	m := New()
	for i := range 50 {
		r := string(rune('a'+i%26)) + string(rune('a'+i/26))
		m.Requests.WithLabelValues(r, "200").Inc()
		m.Requests.WithLabelValues(r, "429").Inc()
		m.RequestDuration.WithLabelValues(r).Observe(.01)
	}
	b.Run("served", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = m.Served.Totals()
		}
	})
	b.Run("gather", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.Registry.Gather(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
