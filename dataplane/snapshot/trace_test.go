package snapshot

import (
	"testing"

	"github.com/sluicegw/sluice/dataplane/reqview"
)

// TestUnsampledRequestsDoNotAllocate: with tracing on, a request that is
// not sampled (the caller's traceparent says so, or the ratio leaves out
// the trace the gateway starts) costs no allocation on the request path.
func TestUnsampledRequestsDoNotAllocate(t *testing.T) {
	s := decideSnapshot(t, 0)
	x, base := decideView("/free/x", "")
	var buf reqview.TraceBuf
	for _, tc := range []struct {
		name   string
		parent string
	}{{"caller unsampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"}, {"started, ratio 0", ""}} {
		n := 0
		if tc.parent == "" {
			n = 0
		} else {
			n = 1
		}
		allocs := testing.AllocsPerRun(200, func() {
			v := base
			v.Trace = reqview.TraceOf(tc.parent, n, &buf)
			clear(x.h)
			serve(s, x, &v)
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per request, want 0", tc.name, allocs)
		}
	}
}

// BenchmarkDecideTraced is BenchmarkDecide's "decide" request, each one a
// trace the gateway starts (so the ratio decides), with tracing off, at 1%
// and at 100% (the span built, queued and exported to an in-process OTLP
// receiver; spans the queue cannot take are dropped and counted); and, as
// "caller", each one in a caller's sampled trace (recorded whatever the
// ratio: the span built, and its traceparent set for the upstream in place
// of the caller's), with tracing off and on.
func BenchmarkDecideTraced(b *testing.B) {
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		name   string
		ratio  float64
		parent string
	}{{"off", -1, ""}, {"1pct", 0.01, ""}, {"100pct", 1, ""}, {"caller-off", -1, caller}, {"caller-1pct", 0.01, caller}} {
		b.Run(tc.name, func(b *testing.B) {
			s := decideSnapshot(b, tc.ratio)
			x, base := decideView("/free/x?page=1", tc.parent)
			h := base.Header()
			n := len(h["Traceparent"])
			var buf reqview.TraceBuf
			b.ReportAllocs()
			for b.Loop() {
				v := base
				v.Trace = reqview.TraceOf(tc.parent, n, &buf)
				clear(x.h)
				serve(s, x, &v)
			}
			if got := h.Get("Traceparent"); tc.parent != "" && (tc.ratio < 0) != (got == tc.parent) {
				b.Fatalf("the upstream's traceparent %q (caller's %q, ratio %v)", got, tc.parent, tc.ratio)
			}
		})
	}
}
