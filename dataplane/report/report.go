// Package report is a gateway node's report to the control plane: every
// Interval (sluice-gateway --report-interval, 5s by default) the Reporter
// reads the counters the request path already keeps (the Prometheus
// counters of limit decisions, degrade sheds, breaker and degrade
// transitions and states, requests by code, and metrics.Served's totals and
// latency histogram), builds an api.Report of cumulative counts since the
// node's boot, and writes it to /sluice/v1/ns/<ns>/reports/<nodeID>, bound
// to the node's registration lease so that it disappears with the node.
//
// A limit with variants is also reported per variant (api.VariantCounts,
// from the decisions' variant label, and the latency histogram of the
// requests each variant let through,
// sluice_limit_variant_request_duration_seconds), so that the console can
// set the variants side by side. The histograms are read before the
// decisions, and a variant's counters restart together (sums.group), so
// that a variant's latency never counts more requests than it let through
// (what the control plane checks).
//
// The request path does no work for reporting: the Reporter only reads, off
// the request path, counters that exist anyway. Counters are cumulative so
// that a lost write loses no count: the control plane takes deltas. A
// Prometheus series that was deleted and re-created (a rule removed then
// added again within one boot) restarts from zero; the Reporter keeps its
// own monotonic sums, so the counts it reports never go backwards within a
// boot.
//
// One write per node per interval: 1,000 nodes at 5s put 200 writes/s on
// etcd. The interval is the knob.
package report

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/metrics"
)

// DefaultInterval is the default time between two reports.
const DefaultInterval = 5 * time.Second

// State is what the node runs, read at each report.
type State struct {
	// Version is the applied version (0 when none or from a file).
	Version int64
	// Rules is the applied rule set; only its rules are reported (a series
	// of a retired rule that an in-flight request re-created is not).
	Rules *api.RuleSet
	// LastApplyError is the latest version the node refused, if any.
	LastApplyError string
	// Preview is what the running preview counted; nil when none runs.
	Preview *api.PreviewReport
	// Quotas is what the node's quotas learnt from Redis (the cluster
	// store's QuotaUsage); the report keeps those of Rules in the window
	// holding its time, a used count over api.MaxQuotaUsed reported as that.
	Quotas []api.QuotaUsage
}

// Putter is what the Reporter needs of an etcd client.
type Putter interface {
	Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error)
}

// Settings configures a Reporter. Client, Namespace, NodeID, Metrics and
// State are required; other zero values have the meaning on each field.
type Settings struct {
	Client    Putter
	Keys      api.Keys
	Namespace string
	NodeID    string
	// Interval is the time between two reports; zero means DefaultInterval.
	Interval time.Duration
	// Lease returns the node's registration lease (registry.Registrar's
	// LeaseID); a report is skipped while it is 0. Nil writes without a
	// lease (tests).
	Lease func() int64
	// Metrics holds the counters read.
	Metrics *metrics.Metrics
	// State returns what the node runs.
	State func() State
	// OpTimeout bounds each write; zero means Interval.
	OpTimeout time.Duration
	Logger    *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Status says how reporting goes, for the node's /status.
type Status struct {
	BootID      string    `json:"bootId"`
	Seq         int64     `json:"seq"`
	Written     int64     `json:"written"`
	Skipped     int64     `json:"skipped"`
	LastWrite   time.Time `json:"lastWrite,omitzero"`
	LastError   string    `json:"lastError,omitempty"`
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
}

// Reporter builds and writes a node's reports. Collect is safe for use by
// one goroutine at a time (Run's); Status is safe for concurrent use.
type Reporter struct {
	s      Settings
	bootID string
	bootAt time.Time
	seq    int64
	sums   sums

	mu     sync.Mutex
	status Status
}

// New checks s and returns a Reporter with a new boot id.
func New(s Settings) (*Reporter, error) {
	switch {
	case s.Client == nil:
		return nil, errors.New("reporter: no etcd client")
	case !api.ValidID(s.Namespace):
		return nil, fmt.Errorf("reporter: invalid namespace %q", s.Namespace)
	case s.Metrics == nil:
		return nil, errors.New("reporter: no metrics")
	case s.State == nil:
		return nil, errors.New("reporter: no State func")
	}
	if err := api.ValidateNodeID(s.NodeID); err != nil {
		return nil, fmt.Errorf("reporter: %w", err)
	}
	if s.Interval <= 0 {
		s.Interval = DefaultInterval
	}
	if s.OpTimeout <= 0 {
		s.OpTimeout = s.Interval
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	b := make([]byte, 8)
	rand.Read(b)
	id := hex.EncodeToString(b)
	return &Reporter{s: s, bootID: id, bootAt: s.Now().UTC(), sums: sums{}, status: Status{BootID: id}}, nil
}

// SetClient replaces the etcd client (the authenticated one, once there is
// one). Call it before Run, not during.
func (r *Reporter) SetClient(c Putter) { r.s.Client = c }

// BootID is the id of this boot's reports.
func (r *Reporter) BootID() string { return r.bootID }

// Status returns how reporting goes. Safe for concurrent use.
func (r *Reporter) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// Run writes a report every Interval until ctx ends. A failed write is
// logged and counted; the next report carries its counts.
func (r *Reporter) Run(ctx context.Context) {
	t := time.NewTicker(r.s.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := r.Write(ctx); err != nil && ctx.Err() == nil {
				r.s.Logger.Warn("writing the node report", "node", r.s.NodeID, "err", err)
			}
		}
	}
}

// Write builds the next report and writes it, bound to the lease.
func (r *Reporter) Write(ctx context.Context) error {
	var opts []clientv3.OpOption
	if r.s.Lease != nil {
		lease := r.s.Lease()
		if lease == 0 {
			r.mu.Lock()
			r.status.Skipped++
			r.mu.Unlock()
			return nil // not registered: the report would outlive the node
		}
		opts = append(opts, clientv3.WithLease(clientv3.LeaseID(lease)))
	}
	rep := r.Collect()
	b, err := api.EncodeReport(rep)
	if err == nil {
		cctx, cancel := context.WithTimeout(ctx, r.s.OpTimeout)
		_, err = r.s.Client.Put(cctx, r.s.Keys.Report(r.s.Namespace, r.s.NodeID), string(b), opts...)
		cancel()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status.Seq = rep.Seq
	if err != nil {
		r.status.LastError, r.status.LastErrorAt = err.Error(), r.s.Now()
		return err
	}
	r.status.Written++
	r.status.LastWrite = rep.At
	return nil
}

// Collect builds the next report from the counters.
func (r *Reporter) Collect() *api.Report {
	st := r.s.State()
	m := r.s.Metrics
	r.seq++
	rep := &api.Report{NodeID: r.s.NodeID, BootID: r.bootID, BootAt: r.bootAt, Seq: r.seq, At: r.s.Now().UTC(),
		IntervalSeconds: r.s.Interval.Seconds(), Version: st.Version, LastApplyError: st.LastApplyError}

	served := m.Served.Totals()
	rep.Requests.Total = r.sums.add("req/total", float64(served.Total))
	rep.Requests.Rejected = r.sums.add("req/rejected", float64(served.Rejected))
	rep.Latency.Bounds = served.Bounds
	rep.Latency.Counts = make([]int64, len(served.Cumulative))
	for i, c := range served.Cumulative {
		rep.Latency.Counts[i] = int64(c) // Served's counts are atomic totals: never reset
	}
	var c2, c4, c5 float64
	collect(m.Requests, func(l labels, v float64) {
		code, _ := strconv.Atoi(l.get("code"))
		switch code / 100 {
		case 2:
			c2 += v
		case 4:
			c4 += v
		case 5:
			c5 += v
		}
	})
	rep.Requests.Class2xx = r.sums.add("req/2xx", c2)
	rep.Requests.Class4xx = r.sums.add("req/4xx", c4)
	rep.Requests.Class5xx = r.sums.add("req/5xx", c5)
	rep.ApplyErrors = r.sums.add("applyErrors", counterValue(m.RulesetApplyErrors))

	rep.Preview = st.Preview
	rep.Quotas = quotas(st.Rules, st.Quotas, rep.At)
	if rs := st.Rules; rs != nil {
		// The variants' latency, per bucket (not cumulative; +Inf last) by
		// rule/variant: read before the decisions, which count each of
		// its requests before it is observed.
		lat := map[string][]float64{}
		collectHistograms(m.VariantDuration, func(l labels, h *dto.Histogram) {
			k := l.get("rule") + "/" + l.get("variant")
			b := lat[k]
			if b == nil {
				b = make([]float64, len(api.LatencyBounds)+1)
				lat[k] = b
			}
			var below uint64
			for i, bk := range h.GetBucket() {
				if i < len(b)-1 {
					b[i] += float64(bk.GetCumulativeCount() - below)
				}
				below = bk.GetCumulativeCount()
			}
			b[len(b)-1] += float64(h.GetSampleCount() - below)
		})
		// decisions by rule/decision, and by rule/variant/decision for the
		// limits with variants (the series' variant label; "" otherwise).
		decisions := map[string]float64{}
		collect(m.LimitDecisions, func(l labels, v float64) {
			rule, dec := l.get("rule"), l.get("decision")
			decisions[rule+"/"+dec] += v
			if vr := l.get("variant"); vr != "" {
				decisions[rule+"/"+vr+"/"+dec] += v
			}
		})
		for _, lim := range rs.Limits {
			id := lim.ID
			c := api.LimitCounts{Rule: id,
				Allowed:        r.sums.add("limit/"+id+"/allow", decisions[id+"/"+metrics.DecisionAllow]),
				Rejected:       r.sums.add("limit/"+id+"/reject", decisions[id+"/"+metrics.DecisionReject]),
				ShadowRejected: r.sums.add("limit/"+id+"/shadow", decisions[id+"/"+metrics.DecisionShadowDeny]),
			}
			if len(lim.Variants) > 0 {
				// The base variant first, then the limit's in document
				// order; each has its own monotonic sums.
				ids := []string{api.BaseVariant}
				for _, v := range lim.Variants {
					ids = append(ids, v.ID)
				}
				for _, vr := range ids {
					c.Variants = append(c.Variants, r.variant(id, vr, decisions, lat[id+"/"+vr]))
				}
			}
			rep.Limits = append(rep.Limits, c)
		}
		if len(rs.Breakers) > 0 {
			state := map[string]float64{}
			collect(m.BreakerState, func(l labels, v float64) { state[l.get("rule")] = v })
			refused := map[string]float64{}
			collect(m.BreakerRejections, func(l labels, v float64) { refused[l.get("rule")] += v })
			trans := transitions(m.BreakerTransitions)
			for _, b := range rs.Breakers {
				rep.Breakers = append(rep.Breakers, api.BreakerState{Rule: b.ID, State: breakerState(state[b.ID]),
					Rejected:    r.sums.add("breaker/"+b.ID+"/rejected", refused[b.ID]),
					Transitions: r.sums.transitions("breaker/"+b.ID, trans[b.ID])})
			}
		}
		if len(rs.Degrades) > 0 {
			level, shed := map[string]float64{}, map[string]float64{}
			collect(m.DegradeLevel, func(l labels, v float64) { level[l.get("rule")] = v })
			collect(m.DegradeShed, func(l labels, v float64) { shed[l.get("rule")] += v })
			trans := transitions(m.DegradeTransitions)
			for _, d := range rs.Degrades {
				rep.Degrades = append(rep.Degrades, api.DegradeState{Rule: d.ID, Level: min(max(int(level[d.ID]), 0), 2),
					Shed: r.sums.add("degrade/"+d.ID+"/shed", shed[d.ID]), Transitions: r.sums.transitions("degrade/"+d.ID, trans[d.ID])})
			}
		}
	}
	return rep
}

// variant returns the counts of variant vr of limit id from the decisions
// (by rule/variant/decision) and its latency's per-bucket readings (nil
// for none): monotonic sums of one group, restarting together, with the
// latency cumulative, left out while it counts nothing.
func (r *Reporter) variant(id, vr string, decisions map[string]float64, lat []float64) api.VariantCounts {
	k := id + "/" + vr + "/"
	keys := []string{"variant/" + k + "allow", "variant/" + k + "reject", "variant/" + k + "shadow"}
	readings := []float64{decisions[k+metrics.DecisionAllow], decisions[k+metrics.DecisionReject], decisions[k+metrics.DecisionShadowDeny]}
	for i := range len(api.LatencyBounds) + 1 {
		keys = append(keys, "variant/"+k+"latency/"+strconv.Itoa(i))
		var x float64
		if lat != nil {
			x = lat[i]
		}
		readings = append(readings, x)
	}
	got := r.sums.group(keys, readings)
	c := api.VariantCounts{Variant: vr, Allowed: got[0], Rejected: got[1], ShadowRejected: got[2]}
	counts := got[3:]
	for i := 1; i < len(counts); i++ {
		counts[i] += counts[i-1]
	}
	if counts[len(counts)-1] > 0 {
		c.Latency = &api.LatencyCounts{Bounds: api.LatencyBounds, Counts: counts}
	}
	return c
}

// quotas keeps, of us, the usages of quotas of rs in the window holding at
// (what the control plane accepts: api.RuleSet.CheckQuotaUsage), with a
// used count over api.MaxQuotaUsed reported as that, at most
// api.MaxReportQuotas.
func quotas(rs *api.RuleSet, us []api.QuotaUsage, at time.Time) []api.QuotaUsage {
	var out []api.QuotaUsage
	for _, u := range us {
		l, err := rs.QuotaLimit(u.Rule, u.Tier)
		if err != nil || len(out) == api.MaxReportQuotas {
			continue
		}
		u.MaxUsed = min(u.MaxUsed, api.MaxQuotaUsed(&l))
		if rs.CheckQuotaUsage(u, at) == nil {
			out = append(out, u)
		}
	}
	return out
}

func breakerState(v float64) string {
	switch v {
	case 1:
		return "half-open"
	case 2:
		return "open"
	}
	return "closed"
}

// sums turns counters that may restart from zero (a deleted and re-created
// series) into sums that never go backwards: a reading below the last one
// counts whole, as counts since the restart.
type sums map[string]*sum

type sum struct{ last, total float64 }

func (s sums) add(key string, reading float64) int64 {
	c := s.sum(key)
	return c.advance(reading, reading < c.last)
}

// sum is key's running sum, new at zero.
func (s sums) sum(key string) *sum {
	c := s[key]
	if c == nil {
		c = &sum{}
		s[key] = c
	}
	return c
}

// advance takes the counter's new reading: its growth since the last one,
// or the whole reading when the counter restarted.
func (c *sum) advance(reading float64, restarted bool) int64 {
	if restarted {
		c.total += reading
	} else {
		c.total += reading - c.last
	}
	c.last = reading
	return int64(c.total)
}

// group is add for counters that restart together (one variant's
// decisions and latency buckets, whose series a rule's removal deletes at
// once): when any reading is below its last one, every reading counts
// whole, as counts since the restart. So an order that holds between the
// readings at every read (a variant's latency counts no more than its
// allowed and shadow-rejected decisions) holds between the sums.
func (s sums) group(keys []string, readings []float64) []int64 {
	restarted := false
	cs := make([]*sum, len(keys))
	for i, key := range keys {
		cs[i] = s.sum(key)
		restarted = restarted || readings[i] < cs[i].last
	}
	out := make([]int64, len(keys))
	for i, c := range cs {
		out[i] = c.advance(readings[i], restarted)
	}
	return out
}

// transitions returns each from→to count of one rule as a monotonic sum,
// in a stable order; pairs never seen are left out.
func (s sums) transitions(prefix string, readings map[[2]string]float64) []api.Transition {
	for k, v := range readings {
		s.add(prefix+"/"+k[0]+"/"+k[1], v)
	}
	var out []api.Transition
	for key, c := range s {
		if len(key) > len(prefix)+1 && key[:len(prefix)+1] == prefix+"/" && c.total > 0 {
			var from, to string
			rest := key[len(prefix)+1:]
			for i := 0; i < len(rest); i++ {
				if rest[i] == '/' {
					from, to = rest[:i], rest[i+1:]
					break
				}
			}
			if from != "" && to != "" {
				out = append(out, api.Transition{From: from, To: to, Count: int64(c.total)})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].From != out[j].From {
			return out[i].From < out[j].From
		}
		return out[i].To < out[j].To
	})
	return out
}

// labels is one series' label pairs.
type labels []*dto.LabelPair

func (l labels) get(name string) string {
	for _, p := range l {
		if p.GetName() == name {
			return p.GetValue()
		}
	}
	return ""
}

// series calls f with every series of c as written (pb is reused between
// calls). It reads the collector directly, not the whole registry.
func series(c prometheus.Collector, f func(pb *dto.Metric)) {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	var pb dto.Metric
	for mt := range ch {
		pb.Reset()
		if mt.Write(&pb) == nil {
			f(&pb)
		}
	}
}

// collect calls f with every series of c (a counter or gauge vector) and its
// value.
func collect(c prometheus.Collector, f func(labels, float64)) {
	series(c, func(pb *dto.Metric) {
		switch {
		case pb.Counter != nil:
			f(pb.GetLabel(), pb.GetCounter().GetValue())
		case pb.Gauge != nil:
			f(pb.GetLabel(), pb.GetGauge().GetValue())
		}
	})
}

// collectHistograms calls f with every series of c (a histogram vector).
func collectHistograms(c prometheus.Collector, f func(labels, *dto.Histogram)) {
	series(c, func(pb *dto.Metric) {
		if pb.Histogram != nil {
			f(pb.GetLabel(), pb.GetHistogram())
		}
	})
}

func counterValue(c prometheus.Counter) float64 {
	var v float64
	collect(c, func(_ labels, x float64) { v += x })
	return v
}

// transitions reads a {rule,from,to} counter vector by rule.
func transitions(v *prometheus.CounterVec) map[string]map[[2]string]float64 {
	out := map[string]map[[2]string]float64{}
	collect(v, func(l labels, x float64) {
		rule := l.get("rule")
		if out[rule] == nil {
			out[rule] = map[[2]string]float64{}
		}
		out[rule][[2]string{l.get("from"), l.get("to")}] += x
	})
	return out
}
