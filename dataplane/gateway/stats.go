package gateway

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/sluicegw/sluice/dataplane/metrics"
)

// RunStats samples the node's request totals (metrics.Served, counted
// where each request finishes) every second until ctx ends, for the
// last-minute figures of NodeStatus, and renews operator overrides every
// hour. Run starts it; a caller of Serve alone may run it beside.
func (n *Node) RunStats(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	renew := time.NewTicker(time.Hour)
	defer renew.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n.stats.sample(&n.metrics.Served)
		case <-renew.C:
			n.ovMu.Lock()
			if s := n.current.Load(); s != nil {
				n.applyLevelsLocked(s.Degrades())
			}
			n.ovMu.Unlock()
		}
	}
}

// stats keeps a minute of once-a-second samples of the request totals.
type stats struct {
	mu      sync.Mutex
	samples []metrics.ServedTotals // oldest first, at most 61
}

// sample takes one sample of served's totals; it reads atomic counters, not
// the Prometheus registry.
func (st *stats) sample(served *metrics.Served) {
	s := served.Totals()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.samples = append(st.samples, s)
	if len(st.samples) > 61 {
		st.samples = st.samples[len(st.samples)-61:]
	}
}

// lastMinute returns requests per second, the share answered 429 or 503, and
// the p99 latency in seconds (interpolated within histogram buckets) over the
// samples of the last minute.
func (st *stats) lastMinute() (rps, rejectRate, p99 float64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.samples) < 2 {
		return 0, 0, 0
	}
	a, b := st.samples[0], st.samples[len(st.samples)-1]
	secs := float64(len(st.samples) - 1)
	total := float64(b.Total) - float64(a.Total)
	if total <= 0 {
		return 0, 0, 0
	}
	rps = total / secs
	rejectRate = (float64(b.Rejected) - float64(a.Rejected)) / total
	// The finite buckets: the last cumulative count (+Inf) is the number of
	// requests with a duration.
	bounds := b.Bounds
	counts := make([]float64, len(bounds))
	for i := range counts {
		counts[i] = float64(b.Cumulative[i]) - float64(a.Cumulative[i])
	}
	if len(counts) == 0 {
		return rps, rejectRate, 0
	}
	n := counts[len(counts)-1]
	if n <= 0 {
		return rps, rejectRate, 0
	}
	target := 0.99 * n
	i := sort.Search(len(counts), func(i int) bool { return counts[i] >= target })
	if i >= len(counts) {
		return rps, rejectRate, bounds[len(bounds)-1]
	}
	lo, loCount := 0.0, 0.0
	if i > 0 {
		lo, loCount = bounds[i-1], counts[i-1]
	}
	hi := bounds[i]
	if counts[i] == loCount {
		return rps, rejectRate, hi
	}
	return rps, rejectRate, lo + (hi-lo)*(target-loCount)/(counts[i]-loCount)
}
