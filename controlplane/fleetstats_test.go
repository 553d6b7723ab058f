package sluice

import (
	"context"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
)

func testFleet(now *time.Time) *Fleet {
	rs := &api.RuleSet{Limits: []api.Limit{{ID: "per-ip"}}}
	return NewFleet(FleetSettings{Now: func() time.Time { return *now },
		Rules: func(context.Context, string, int64) (*api.RuleSet, error) { return rs, nil }})
}

// testLease is the lease of the registrations and report keys of the
// tests' nodes.
const testLease = 7

// key is a report key created at rev under testLease.
func key(rev int64) ReportKey { return ReportKey{CreateRevision: rev, Lease: testLease} }

// register registers node in shop under testLease, running version, with
// labels (k=v pairs).
func register(f *Fleet, node string, version int64, labels ...string) {
	l := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		l[labels[i]] = labels[i+1]
	}
	f.Register("shop", node, Registration{Lease: testLease, Labels: l, Version: version})
}

// byVersion places nodes running version canary in the canary cohort and
// all others in the baseline.
func byVersion(canary int64) func(string, map[string]string, int64) CohortSide {
	return func(_ string, _ map[string]string, v int64) CohortSide {
		if v == canary {
			return SideCanary
		}
		return SideBaseline
	}
}

// rep is node's report: requests, of which rejected (429) and 5xx, and
// the latency counts (cumulative: up to 0.1s, up to 1s, and all).
func rep(node, boot string, seq int64, at time.Time, version, requests, rejected, e5xx int64, lat ...int64) *api.Report {
	r := &api.Report{NodeID: node, BootID: boot, Seq: seq, At: at, Version: version,
		Requests: api.RequestCounts{Total: requests, Rejected: rejected, Class5xx: e5xx, Class2xx: requests - rejected - e5xx, Class4xx: rejected},
		Limits:   []api.LimitCounts{{Rule: "per-ip", Allowed: requests - rejected, Rejected: rejected}}}
	if len(lat) > 0 {
		c := make([]int64, len(api.LatencyBounds)+1)
		for i := range c {
			switch {
			case i == len(api.LatencyBounds):
				c[i] = lat[2]
			case api.LatencyBounds[i] >= 1:
				c[i] = lat[1]
			case api.LatencyBounds[i] >= 0.1:
				c[i] = lat[0]
			}
		}
		r.Latency = api.LatencyCounts{Bounds: api.LatencyBounds, Counts: c}
	}
	return r
}

func TestFleetDeltasAndCohorts(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	f := testFleet(&now)
	register(f, "gw-1", 1)
	register(f, "gw-2", 2)
	ctx := context.Background()
	must := func(r *api.Report, rev int64) []*Event {
		t.Helper()
		evs, err := f.Ingest(ctx, "shop", r, key(rev))
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	// gw-1 (baseline, version 1): 100 then 300 requests, 10 and 30 rejected.
	if evs := must(rep("gw-1", "a", 1, t0.Add(1*time.Second), 1, 100, 10, 0, 100, 100, 100), 5); len(evs) != 1 || evs[0].Kind != EventNodeJoined {
		t.Errorf("first report's events %+v, want node_joined", evs)
	}
	must(rep("gw-1", "a", 2, t0.Add(6*time.Second), 1, 300, 30, 0, 300, 300, 300), 5)
	// The same report again (a re-list) changes nothing.
	if evs := must(rep("gw-1", "a", 2, t0.Add(6*time.Second), 1, 300, 30, 0, 300, 300, 300), 5); len(evs) != 0 {
		t.Errorf("duplicate made events %+v", evs)
	}
	// gw-2 (canary, version 2): 200 requests, 100 rejected, 10 5xx, slow.
	must(rep("gw-2", "b", 1, t0.Add(2*time.Second), 2, 200, 100, 10, 0, 100, 200), 7)
	// gw-2 restarts: counts from zero.
	must(rep("gw-2", "c", 1, t0.Add(7*time.Second), 2, 50, 0, 0, 0, 50, 50), 9)

	st, err := f.FindStats(ctx, StatsQuery{Namespace: "shop", Step: time.Minute, Since: t0})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Series) != 1 || len(st.Series[0].Points) != 1 {
		t.Fatalf("series %+v", st.Series)
	}
	p := st.Series[0].Points[0]
	if p[0] != float64(t0.Unix()) || p[1] != 270+100+50 || p[2] != 30+100 {
		t.Errorf("fleet point %v, want [t0, 420, 130, ...]", p)
	}
	canary, base := f.Cohort("shop", t0, t0.Add(10*time.Second), byVersion(2))
	if canary.Requests != 250 || canary.Rejected != 100 || canary.Errors5xx != 10 || base.Requests != 300 || base.Rejected != 30 {
		t.Errorf("cohorts canary %+v baseline %+v", canary, base)
	}
	if math.Abs(canary.RejectRate-0.4) > 1e-9 || math.Abs(base.RejectRate-0.1) > 1e-9 {
		t.Errorf("reject rates %v and %v, want 0.4 and 0.1", canary.RejectRate, base.RejectRate)
	}
	if canary.P99Seconds <= 0.1 || base.P99Seconds > 0.1 {
		t.Errorf("p99 canary %v baseline %v: the canary's requests are slower", canary.P99Seconds, base.P99Seconds)
	}
	// A step that is not a multiple of the resolution.
	if _, err := f.FindStats(ctx, StatsQuery{Namespace: "shop", Step: 7 * time.Second}); ErrorCode(err) != EINVALID {
		t.Errorf("step 7s: %v, want EINVALID", err)
	}
	// gw-1 leaves once.
	if ev := f.Gone("shop", "gw-1", 0, now); ev == nil || ev.Kind != EventNodeLeft || ev.Key != "node_left/gw-1/5" {
		t.Errorf("Gone: %+v", ev)
	}
	if ev := f.Gone("shop", "gw-1", 0, now); ev != nil {
		t.Errorf("second Gone: %+v", ev)
	}
	if got := f.LiveNodes("shop"); len(got) != 1 || got[0] != "gw-2" {
		t.Errorf("live nodes %v", got)
	}
	// An hour later gw-1 (gone) is forgotten; gw-2 (live) is kept.
	now = now.Add(time.Hour)
	if n := f.Forget(); n != 1 {
		t.Errorf("Forget dropped %d nodes, want 1", n)
	}
	if r, _ := f.LastReport("shop", "gw-1"); r != nil {
		t.Errorf("gw-1 still held: %+v", r)
	}
	if r, _ := f.LastReport("shop", "gw-2"); r == nil {
		t.Error("gw-2, live, was forgotten")
	}
}

// TestCohortSkipsVersionSwitch checks that the step in which a node changed
// version counts in neither cohort: a harmless canary is not charged with the
// rejections of the version it replaced on its node.
func TestCohortSkipsVersionSwitch(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	f := testFleet(&now)
	ctx := context.Background()
	register(f, "gw-a", 2)
	for _, r := range []*api.Report{
		// gw-c ran version 3 (rejecting) in step 0, switched to the
		// harmless version 4 during step 1 (its report there still carries
		// version 3's rejections), and ran version 4 alone in step 2; its
		// registration says so.
		rep("gw-c", "a", 1, t0.Add(1*time.Second), 3, 100, 100, 0),
		rep("gw-c", "a", 2, t0.Add(6*time.Second), 4, 200, 150, 0),
		rep("gw-c", "a", 3, t0.Add(11*time.Second), 4, 300, 150, 0),
		// gw-a stayed on version 2 throughout.
		rep("gw-a", "b", 1, t0.Add(1*time.Second), 2, 100, 0, 0),
		rep("gw-a", "b", 2, t0.Add(6*time.Second), 2, 200, 0, 0),
		rep("gw-a", "b", 3, t0.Add(11*time.Second), 2, 300, 0, 0),
	} {
		if r.NodeID == "gw-c" {
			register(f, "gw-c", r.Version)
		}
		if _, err := f.Ingest(ctx, "shop", r, key(5)); err != nil {
			t.Fatal(err)
		}
	}
	canary, base := f.Cohort("shop", t0.Add(5*time.Second), t0.Add(15*time.Second), byVersion(4))
	if canary.Requests != 100 || canary.Rejected != 0 {
		t.Errorf("canary cohort %+v, want only step 2's 100 requests, none rejected", canary)
	}
	if base.Requests != 200 || base.Rejected != 0 {
		t.Errorf("baseline cohort %+v, want gw-a's 200 requests of steps 1 and 2", base)
	}
}

func TestFleetRefuses(t *testing.T) {
	t.Parallel()
	now := time.Now()
	f := testFleet(&now)
	register(f, "gw-1", 1)
	register(f, "gw-2", 1)
	ctx := context.Background()
	for seq := int64(1); seq <= 2; seq++ {
		if _, err := f.Ingest(ctx, "shop", rep("gw-1", "a", seq, now, 1, 10*seq, 0, 0), key(1)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		desc   string
		r      *api.Report
		reason string
	}{
		{"backwards", rep("gw-1", "a", 3, now, 1, 5, 0, 0), RefusedBackwards},
		{"sequence going back", rep("gw-1", "a", 1, now, 1, 30, 0, 0), RefusedBackwards},
		{"unknown rule", func() *api.Report { r := rep("gw-2", "a", 1, now, 1, 5, 0, 0); r.Limits[0].Rule = "nope"; return r }(), RefusedUnknownRules},
		{"never registered", rep("gw-zz", "a", 1, now, 1, 380047, 266033, 0), RefusedUnregistered},
		// 3e9 requests five seconds after the last report.
		{"beyond what a node serves", rep("gw-1", "a", 3, now.Add(5*time.Second), 1, 3e9, 0, 0), RefusedImplausible},
		// A new boot claiming 3e9 requests in the 5s since it started.
		{"a new boot beyond what a node serves", func() *api.Report {
			r := rep("gw-2", "b", 1, now, 1, 3e9, 0, 0)
			r.BootAt = now.Add(-5 * time.Second)
			return r
		}(), RefusedImplausible},
	}
	for _, tc := range tests {
		_, err := f.Ingest(ctx, "shop", tc.r, key(1))
		re, ok := err.(*RefusedError)
		if !ok || re.Reason != tc.reason {
			t.Errorf("%s: %v, want refused as %s", tc.desc, err, tc.reason)
		}
	}
	// A forged key under gw-1's id, bound to another lease.
	if _, err := f.Ingest(ctx, "shop", rep("gw-1", "forged", 1, now, 1, 1450000, 0, 1305000), ReportKey{CreateRevision: 9, Lease: testLease + 1}); err == nil || err.(*RefusedError).Reason != RefusedLease {
		t.Errorf("a report key under another lease: %v, want refused as %s", err, RefusedLease)
	}
	// The registration ends: gw-1's reports no longer count.
	f.Unregister("shop", "gw-1")
	if _, err := f.Ingest(ctx, "shop", rep("gw-1", "a", 3, now.Add(5*time.Second), 1, 40, 0, 0), key(1)); err == nil || err.(*RefusedError).Reason != RefusedUnregistered {
		t.Errorf("a report after the registration ended: %v, want refused as %s", err, RefusedUnregistered)
	}
	stored, refused := f.Counts()
	if stored != 2 || refused[RefusedBackwards] != 2 || refused[RefusedUnknownRules] != 1 || refused[RefusedUnregistered] != 2 ||
		refused[RefusedImplausible] != 2 || refused[RefusedLease] != 1 {
		t.Errorf("stored %d refused %v", stored, refused)
	}
}

// TestCohortMedian: a cohort's rates are the median of its nodes' rates,
// so one node claiming 70% rejected among three honest ones at 1% leaves
// the cohort at 1%; the requests are still summed.
func TestCohortMedian(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	f := testFleet(&now)
	ctx := context.Background()
	for _, n := range []struct {
		id                string
		requests, rejects int64
	}{{"b-1", 100, 1}, {"b-2", 200, 2}, {"b-3", 100, 1}, {"b-evil", 380047, 266033}} {
		register(f, n.id, 1)
		if _, err := f.Ingest(ctx, "shop", rep(n.id, "a", 1, t0.Add(time.Second), 1, n.requests, n.rejects, 0), key(1)); err != nil {
			t.Fatal(err)
		}
	}
	_, base := f.Cohort("shop", t0, t0.Add(5*time.Second), byVersion(2))
	if base.Requests != 380447 || math.Abs(base.RejectRate-0.01) > 1e-9 || len(base.Nodes) != 4 {
		t.Errorf("baseline %+v, want 380,447 requests at a median reject rate of 0.01", base)
	}
}

func TestCanaryJudge(t *testing.T) {
	t.Parallel()
	a := &CanaryAnalysis{MaxRejectRateIncrease: 0.05, Max5xxRateIncrease: 0.02, MaxP99Ratio: 1.5, MinRequests: 100}
	base := &CohortFigures{Requests: 1000, RejectRate: 0.01, ErrorRate5xx: 0.001, P99Seconds: 0.1}
	tests := []struct {
		desc    string
		canary  CohortFigures
		verdict string
		metrics []string
	}{
		{"same as baseline", CohortFigures{Requests: 500, RejectRate: 0.01, ErrorRate5xx: 0.001, P99Seconds: 0.1}, VerdictPass, nil},
		{"rejects everything", CohortFigures{Requests: 500, RejectRate: 1, P99Seconds: 0.01}, VerdictBreach, []string{"rejectRateIncrease"}},
		{"5xx and slow", CohortFigures{Requests: 500, ErrorRate5xx: 0.5, P99Seconds: 0.2}, VerdictBreach, []string{"errorRate5xxIncrease", "p99Ratio"}},
		{"too few requests", CohortFigures{Requests: 99, RejectRate: 1}, VerdictInsufficient, nil},
	}
	for _, tc := range tests {
		v, _, _, _, br := a.Judge(&tc.canary, base)
		var got []string
		for _, b := range br {
			got = append(got, b.Metric)
		}
		if v != tc.verdict || len(got) != len(tc.metrics) {
			t.Errorf("%s: %s %v, want %s %v", tc.desc, v, got, tc.verdict, tc.metrics)
		}
	}
}

func TestCanaryAnalysisValidate(t *testing.T) {
	t.Parallel()
	bad := &CanaryAnalysis{Window: api.Duration(time.Second), MaxRejectRateIncrease: 2, OnPass: "ship"}
	errs := bad.Validate()
	if len(errs) != 3 {
		t.Errorf("errors %v, want window, maxRejectRateIncrease and onPass", errs)
	}
	if errs := (&CanaryAnalysis{Window: api.Duration(time.Minute), OnPass: OnPassPromote}).Validate(); len(errs) != 0 {
		t.Errorf("valid analysis: %v", errs)
	}
}

func TestP99(t *testing.T) {
	t.Parallel()
	bounds := []float64{0.1, 1}
	for _, tc := range []struct {
		counts []int64
		want   float64
	}{
		{[]int64{0, 0, 0}, 0},
		{[]int64{100, 0, 0}, 0.099},
		{[]int64{0, 100, 0}, 0.1 + 0.9*0.99},
		{[]int64{0, 0, 10}, 1},
	} {
		if got := P99(bounds, tc.counts); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("P99(%v) = %v, want %v", tc.counts, got, tc.want)
		}
	}
}

// TestTransitionEventKeys: a transition has one key whichever report a
// replica first saw it in, so that a replica that saw every report and one
// that saw only the newest store it once.
func TestTransitionEventKeys(t *testing.T) {
	rep := func(seq int64, tr ...api.Transition) *api.Report {
		return &api.Report{NodeID: "gw-1", BootID: "b1", Seq: seq, Degrades: []api.DegradeState{{Rule: "coupon", Transitions: tr}}}
	}
	up, down := api.Transition{From: "0", To: "1", Count: 1}, api.Transition{From: "1", To: "0", Count: 1}
	r1, r2, r3 := rep(1), rep(2, up), rep(3, up, down)
	keys := func(evs []*Event) map[string]bool {
		m := map[string]bool{}
		for _, e := range evs {
			m[e.Key] = true
		}
		return m
	}
	stepwise := keys(append(transitionEvents("shop", r1, r2), transitionEvents("shop", r2, r3)...))
	coalesced := keys(transitionEvents("shop", r1, r3))
	if len(stepwise) != 2 || !reflect.DeepEqual(stepwise, coalesced) {
		t.Fatalf("keys seen report by report %v, seen at once %v", stepwise, coalesced)
	}
}

// TestFleetVariants: the per-variant counts of a limit with variants are
// stored as deltas, fleet-wide and per node, answered by FindStats and
// pushed by Tick; a variant the reported version's limit does not have,
// or a variant count growing beyond what a node serves, refuses the report.
func TestFleetVariants(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := t0.Add(10 * time.Second)
	rs := &api.RuleSet{Limits: []api.Limit{{ID: "per-ip", Variants: []api.LimitVariant{{ID: "strict", Weight: 20}}}}}
	f := NewFleet(FleetSettings{Now: func() time.Time { return now },
		Rules: func(context.Context, string, int64) (*api.RuleSet, error) { return rs, nil }})
	register(f, "gw-1", 1)
	register(f, "gw-2", 1)
	ctx := context.Background()
	withVariants := func(r *api.Report, base, strict [2]int64) *api.Report {
		r.Limits[0].Variants = []api.VariantCounts{{Variant: api.BaseVariant, Allowed: base[0], Rejected: base[1]}, {Variant: "strict", Allowed: strict[0], Rejected: strict[1]}}
		return r
	}
	// withLatency gives strict's latency: fast requests of at most 10ms,
	// slow ones in (250ms, 500ms].
	withLatency := func(r *api.Report, fast, slow int64) *api.Report {
		c := make([]int64, len(api.LatencyBounds)+1)
		for i := range c {
			if api.LatencyBounds[min(i, len(api.LatencyBounds)-1)] >= 0.01 || i == len(api.LatencyBounds) {
				c[i] += fast
			}
			if i == len(api.LatencyBounds) || api.LatencyBounds[i] >= 0.5 {
				c[i] += slow
			}
		}
		r.Limits[0].Variants[1].Latency = &api.LatencyCounts{Bounds: api.LatencyBounds, Counts: c}
		return r
	}
	for _, r := range []*api.Report{
		withLatency(withVariants(rep("gw-1", "a", 1, t0.Add(1*time.Second), 1, 100, 10, 0), [2]int64{80, 0}, [2]int64{10, 10}), 10, 0),
		withLatency(withVariants(rep("gw-1", "a", 2, t0.Add(6*time.Second), 1, 200, 30, 0), [2]int64{150, 5}, [2]int64{20, 25}), 10, 10),
		withLatency(withVariants(rep("gw-2", "b", 1, t0.Add(2*time.Second), 1, 50, 5, 0), [2]int64{40, 0}, [2]int64{5, 5}), 5, 0),
	} {
		if _, err := f.Ingest(ctx, "shop", r, key(3)); err != nil {
			t.Fatal(err)
		}
	}
	st, err := f.FindStats(ctx, StatsQuery{Namespace: "shop", Step: time.Minute, Since: t0})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(st.VariantColumns, VariantColumns) || VariantColumns[len(VariantColumns)-1] != "p99Seconds" {
		t.Errorf("variant columns %v", st.VariantColumns)
	}
	got := map[string][]float64{}
	p99 := map[string]float64{}
	for _, v := range st.Variants {
		if v.Node != "" || v.Rule != "per-ip" || len(v.Points) != 1 || len(v.Points[0]) != len(VariantColumns) {
			t.Fatalf("fleet variant series %+v", v)
		}
		got[v.Variant] = v.Points[0][1:3]
		p99[v.Variant] = v.Points[0][len(VariantColumns)-1]
	}
	want := map[string][]float64{api.BaseVariant: {150 + 40, 5}, "strict": {20 + 5, 25 + 5}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fleet variants %v, want %v", got, want)
	}
	// strict let through 15 fast and 10 slow requests (gw-1's two reports
	// and gw-2's): the 99th percentile, 24.75th, is 9.75/10 into (0.25, 0.5].
	// base reported no latency: 0.
	if want := map[string]float64{api.BaseVariant: 0, "strict": 0.25 + 0.25*9.75/10}; !reflect.DeepEqual(p99, want) {
		t.Errorf("fleet variants' p99 %v, want %v", p99, want)
	}
	st, err = f.FindStats(ctx, StatsQuery{Namespace: "shop", Step: time.Minute, Since: t0, Node: "gw-2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Variants) != 2 || st.Variants[1].Node != "gw-2" || st.Variants[1].Variant != "strict" || st.Variants[1].Points[0][2] != 5 ||
		st.Variants[1].Points[0][6] != P99(api.LatencyBounds, []int64{0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}) {
		t.Errorf("gw-2's variants %+v", st.Variants)
	}
	if st, _ := f.FindStats(ctx, StatsQuery{Namespace: "shop", Rule: "other"}); len(st.Variants) != 0 {
		t.Errorf("rule filter kept variants %+v", st.Variants)
	}
	// gw-1's second report, at t0+6s, is step t0+5s: Tick pushes its deltas.
	tick := f.Tick("shop", t0.Add(5*time.Second).Unix()/5)
	if len(tick.Variants) != 2 || tick.Variants[1].Variant != "strict" || tick.Variants[1].Points[0][1] != 10 || tick.Variants[1].Points[0][2] != 15 ||
		tick.Variants[1].Points[0][6] != 0.25+0.25*9.9/10 {
		t.Errorf("tick variants %+v, want strict +10 allowed +15 rejected, p99 of its 10 slow requests", tick.Variants)
	}

	for _, tc := range []struct {
		desc   string
		r      *api.Report
		reason string
	}{
		{"a variant the limit lacks", withVariants(rep("gw-2", "b", 2, t0.Add(7*time.Second), 1, 60, 5, 0), [2]int64{50, 0}, [2]int64{5, 5}), RefusedUnknownRules},
		{"a variant count beyond what a node serves", withLatency(withVariants(rep("gw-2", "b", 2, t0.Add(7*time.Second), 1, 60, 5, 0), [2]int64{50, 0}, [2]int64{3e9, 5}), 5, 0), RefusedImplausible},
		{"a variant count going backwards", withVariants(rep("gw-2", "b", 2, t0.Add(7*time.Second), 1, 60, 5, 0), [2]int64{50, 0}, [2]int64{5, 4}), RefusedBackwards},
		{"a variant latency going backwards", withLatency(withVariants(rep("gw-2", "b", 2, t0.Add(7*time.Second), 1, 60, 5, 0), [2]int64{50, 0}, [2]int64{5, 5}), 4, 0), RefusedBackwards},
		{"a variant latency dropped", withVariants(rep("gw-2", "b", 2, t0.Add(7*time.Second), 1, 60, 5, 0), [2]int64{50, 0}, [2]int64{5, 5}), RefusedBackwards},
	} {
		if tc.reason == RefusedUnknownRules {
			tc.r.Limits[0].Variants[1].Variant = "loose"
		}
		_, err := f.Ingest(ctx, "shop", tc.r, key(3))
		re, ok := err.(*RefusedError)
		if !ok || re.Reason != tc.reason {
			t.Errorf("%s: %v, want refused as %s", tc.desc, err, tc.reason)
		}
	}
}
