package gateway

import (
	"context"
	"errors"
	"math"
	"sort"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/degrade"
)

// ErrDrained is the readiness error while an operator override drains the node.
var ErrDrained = errors.New("drained by an operator override")

// ApplyOverride takes up an operator override for this node (from etcd):
// forced degrade levels by rule id, and drain, which fails /readyz so load
// balancers stop sending traffic while the node keeps serving what arrives.
// The zero Override clears everything. Levels for rules the applied rule set
// does not have are logged and skipped.
func (n *Node) ApplyOverride(ov api.Override) {
	n.ovMu.Lock()
	defer n.ovMu.Unlock()
	old := n.override
	n.override = ov
	n.drained.Store(ov.Drain)
	s := n.current.Load()
	if s == nil {
		return
	}
	set := s.Degrades()
	for rule := range old.DegradeLevels {
		if _, still := ov.DegradeLevels[rule]; !still {
			if err := set.ClearOverride(rule); err != nil && !errors.Is(err, degrade.ErrUnknownRule) {
				n.log.Warn("clearing degrade override", "rule", rule, "err", err)
			}
		}
	}
	n.applyLevelsLocked(set)
	n.log.Info("operator override applied", "drain", ov.Drain, "degradeLevels", ov.DegradeLevels, "by", ov.By, "reason", ov.Reason)
}

// applyLevelsLocked (re)sets the override's degrade levels on set, renewing
// them: an override without an expiry lasts until it is removed, and the
// degrade package caps one setting at MaxOverrideTTL.
func (n *Node) applyLevelsLocked(set *degrade.Set) {
	ov := n.override
	until := time.Now().Add(degrade.MaxOverrideTTL)
	if ov.Expires != nil {
		until = *ov.Expires
	}
	for rule, level := range ov.DegradeLevels {
		if err := set.SetOverride(rule, level, until); err != nil {
			n.log.Warn("node override names a degrade rule this node cannot apply", "rule", rule, "level", level, "err", err)
		}
	}
}

// Override returns the operator override in force.
func (n *Node) Override() api.Override {
	n.ovMu.Lock()
	defer n.ovMu.Unlock()
	return n.override
}

// NodeStatus is the node's registration value: identity from the given
// template, applied version, last apply error, and last-minute traffic.
func (n *Node) NodeStatus(tmpl api.NodeStatus) api.NodeStatus {
	st := n.Status()
	tmpl.Build = Build
	tmpl.StartedAt = n.started
	tmpl.Version, tmpl.Checksum, tmpl.AppliedAt, tmpl.Source = st.Version, st.Checksum, st.AppliedAt, st.Source
	tmpl.LastApplyError = st.LastApplyError
	tmpl.Draining = n.draining.Load() || n.drained.Load()
	rps, reject, p99 := n.stats.lastMinute()
	tmpl.RPS, tmpl.RejectRate, tmpl.P99Seconds = round(rps, 1), round(reject, 3), round(p99, 4)
	return tmpl
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// RunStats samples the node's request metrics every second until ctx ends,
// for the last-minute figures of NodeStatus, and renews operator overrides.
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
			n.stats.sample(n)
		case <-renew.C:
			n.ovMu.Lock()
			if s := n.current.Load(); s != nil {
				n.applyLevelsLocked(s.Degrades())
			}
			n.ovMu.Unlock()
		}
	}
}

// stats keeps a minute of once-a-second samples of the request counters.
type stats struct {
	mu      sync.Mutex
	samples []sample // oldest first, at most 61
}

type sample struct {
	total, rejected float64
	buckets         []float64 // cumulative counts per upper bound
	bounds          []float64
}

func (st *stats) sample(n *Node) {
	mfs, err := n.metrics.Registry.Gather()
	if err != nil {
		return
	}
	var s sample
	for _, mf := range mfs {
		switch mf.GetName() {
		case "sluice_requests_total":
			for _, m := range mf.GetMetric() {
				v := m.GetCounter().GetValue()
				s.total += v
				if code := label(m, "code"); code == "429" || code == "503" {
					s.rejected += v
				}
			}
		case "sluice_request_duration_seconds":
			for _, m := range mf.GetMetric() {
				h := m.GetHistogram()
				if s.bounds == nil {
					for _, b := range h.GetBucket() {
						s.bounds = append(s.bounds, b.GetUpperBound())
					}
					s.buckets = make([]float64, len(s.bounds))
				}
				for i, b := range h.GetBucket() {
					if i < len(s.buckets) {
						s.buckets[i] += float64(b.GetCumulativeCount())
					}
				}
			}
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.samples = append(st.samples, s)
	if len(st.samples) > 61 {
		st.samples = st.samples[len(st.samples)-61:]
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
	total := b.total - a.total
	if total <= 0 {
		return 0, 0, 0
	}
	rps = total / secs
	rejectRate = (b.rejected - a.rejected) / total
	if len(b.buckets) == 0 {
		return rps, rejectRate, 0
	}
	counts := make([]float64, len(b.buckets))
	for i := range counts {
		counts[i] = b.buckets[i]
		if i < len(a.buckets) {
			counts[i] -= a.buckets[i]
		}
	}
	n := counts[len(counts)-1]
	if n <= 0 {
		return rps, rejectRate, 0
	}
	target := 0.99 * n
	i := sort.Search(len(counts), func(i int) bool { return counts[i] >= target })
	if i >= len(counts) {
		return rps, rejectRate, b.bounds[len(b.bounds)-1]
	}
	lo, loCount := 0.0, 0.0
	if i > 0 {
		lo, loCount = b.bounds[i-1], counts[i-1]
	}
	hi := b.bounds[i]
	if counts[i] == loCount {
		return rps, rejectRate, hi
	}
	return rps, rejectRate, lo + (hi-lo)*(target-loCount)/(counts[i]-loCount)
}
