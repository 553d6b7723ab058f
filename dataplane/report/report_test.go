package report

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/dataplane/snapshot"
	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
)

const rules = `namespace: shop
routes:
  - id: api
    match: {pathPrefix: /api}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
limits:
  - id: tiny
    routes: [api]
    algorithm: fixed_window
    rate: 3
    period: 1h
  - id: watch
    routes: [api]
    algorithm: fixed_window
    rate: 1
    period: 1h
    shadow: true
breakers:
  - id: api-breaker
    routes: [api]
    window: 10s
    errorRatio: 0.5
    openFor: 5s
degrades:
  - id: api-degrade
    routes: [api]
    mode: manual
    level: 0
`

// mustSnapshot compiles rules with m as its metrics.
func mustSnapshot(tb testing.TB, m *metrics.Metrics, doc string) *snapshot.Snapshot {
	tb.Helper()
	rs, err := api.Decode([]byte(doc))
	if err != nil {
		tb.Fatal(err)
	}
	v, err := api.Validated(rs)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := snapshot.Compile(context.Background(), v, snapshot.Meta{Version: 7}, nil, snapshot.Options{
		Metrics: m, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Retire(nil) })
	return s
}

func serve(s http.Handler, n int) {
	for range n {
		s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/api/x", nil))
	}
}

type nopPutter struct{}

func (nopPutter) Put(context.Context, string, string, ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	return &clientv3.PutResponse{}, nil
}

func mustReporter(tb testing.TB, s Settings) *Reporter {
	tb.Helper()
	r, err := New(s)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// TestCollectMatchesCounters: the report's per-rule counts are the
// node's own sluice_limit_decisions_total, cumulative, and a series that
// restarts from zero (deleted, re-created) never makes them go backwards.
func TestCollectMatchesCounters(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	s := mustSnapshot(t, m, rules)
	r := mustReporter(t, Settings{Client: nopPutter{}, Namespace: "shop", NodeID: "gw-1", Metrics: m,
		State: func() State { return State{Version: s.Version, Rules: s.Rules} }})
	limit := func(rep *api.Report, id string) api.LimitCounts {
		for _, l := range rep.Limits {
			if l.Rule == id {
				return l
			}
		}
		t.Fatalf("report lacks limit %s: %+v", id, rep.Limits)
		return api.LimitCounts{}
	}
	serve(s, 10)
	first := r.Collect()
	if errs := first.Check(time.Now(), 0); len(errs) > 0 {
		t.Fatalf("Check: %v", errs)
	}
	if err := first.CheckRules(s.Rules); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc, rule, decision string
		got                  int64
	}{
		{"tiny allowed", "tiny", metrics.DecisionAllow, limit(first, "tiny").Allowed},
		{"tiny rejected", "tiny", metrics.DecisionReject, limit(first, "tiny").Rejected},
		{"watch shadow", "watch", metrics.DecisionShadowDeny, limit(first, "watch").ShadowRejected},
		{"watch allowed", "watch", metrics.DecisionAllow, limit(first, "watch").Allowed},
	} {
		want := int64(testutil.ToFloat64(m.LimitDecision(tc.rule, tc.decision, "", "", "")))
		if tc.got != want {
			t.Errorf("%s: report %d, counter %d", tc.desc, tc.got, want)
		}
	}
	if l := limit(first, "tiny"); l.Allowed != 3 || l.Rejected != 7 {
		t.Errorf("tiny: allowed %d rejected %d, want 3 and 7", l.Allowed, l.Rejected)
	}
	if first.Requests.Total != 10 || first.Requests.Rejected != 7 || first.Requests.Class4xx != 7 {
		t.Errorf("requests %+v, want 10 total, 7 rejected (429)", first.Requests)
	}
	if len(first.Breakers) != 1 || first.Breakers[0].State != "closed" || len(first.Degrades) != 1 || first.Degrades[0].Level != 0 {
		t.Errorf("breakers %+v degrades %+v", first.Breakers, first.Degrades)
	}
	// The series restarts from zero: the report keeps counting up.
	// (Reset detaches the counters the compiled limits hold, as Prune does
	// for a removed rule; a re-added rule's series starts again at zero.)
	m.LimitDecisions.Reset()
	m.LimitDecision("tiny", metrics.DecisionReject, "", "", "").Add(2)
	second := r.Collect()
	if err := second.Follows(first); err != nil {
		t.Fatalf("Follows: %v", err)
	}
	if got := limit(second, "tiny").Rejected; got != 9 {
		t.Errorf("after a series reset, tiny rejected %d, want 9", got)
	}
	if second.Seq != first.Seq+1 || second.BootID != first.BootID {
		t.Errorf("seq %d boot %s after seq %d boot %s", second.Seq, second.BootID, first.Seq, first.BootID)
	}
}

// TestReportTransitions: a forced degrade level and back shows in the
// level and in the transition counts.
func TestReportTransitions(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	s := mustSnapshot(t, m, rules)
	r := mustReporter(t, Settings{Client: nopPutter{}, Namespace: "shop", NodeID: "gw-1", Metrics: m,
		State: func() State { return State{Version: s.Version, Rules: s.Rules} }})
	if err := s.Degrades().SetOverrideFor("api-degrade", 1, time.Hour); err != nil {
		t.Fatal(err)
	}
	serve(s, 4)
	up := r.Collect()
	if d := up.Degrades[0]; d.Level != 1 || len(d.Transitions) != 1 || d.Transitions[0] != (api.Transition{From: "0", To: "1", Count: 1}) {
		t.Errorf("after level 1: %+v", d)
	}
	if err := s.Degrades().ClearOverride("api-degrade"); err != nil {
		t.Fatal(err)
	}
	serve(s, 1)
	down := r.Collect()
	if err := down.Follows(up); err != nil {
		t.Fatal(err)
	}
	if d := down.Degrades[0]; d.Level != 0 || len(d.Transitions) != 2 {
		t.Errorf("after level 0: %+v", d)
	}
}

// TestWriteBoundToLease: the report is written under the registration's
// lease (gone when the lease is), and skipped while there is none.
func TestWriteBoundToLease(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t)
	c := e.Client(t)
	m := metrics.New()
	var lease int64
	r := mustReporter(t, Settings{Client: c, Namespace: "shop", NodeID: "gw-1", Metrics: m,
		Lease: func() int64 { return lease }, State: func() State { return State{} }})
	ctx := context.Background()
	key := api.Keys{}.Report("shop", "gw-1")
	if err := r.Write(ctx); err != nil {
		t.Fatal(err)
	}
	if resp, err := c.Get(ctx, key); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("without a lease: %v %v, want no report", resp, err)
	}
	if st := r.Status(); st.Skipped != 1 {
		t.Errorf("skipped %d, want 1", st.Skipped)
	}
	g, err := c.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	lease = int64(g.ID)
	if err := r.Write(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get(ctx, key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("get %s: %v %v", key, resp, err)
	}
	if resp.Kvs[0].Lease != lease {
		t.Errorf("lease %x, want %x", resp.Kvs[0].Lease, lease)
	}
	got, err := api.DecodeReport("gw-1", resp.Kvs[0].Value, time.Now(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Seq != 1 || got.BootID != r.BootID() {
		t.Errorf("report %+v", got)
	}
	if _, err := c.Revoke(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	if resp, err := c.Get(ctx, key); err != nil || len(resp.Kvs) != 0 {
		t.Errorf("after revoke: %v %v, want the report gone", resp, err)
	}
}

func TestNewRefusesBadSettings(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	st := func() State { return State{} }
	for _, tc := range []struct {
		desc string
		s    Settings
		want string
	}{
		{"no client", Settings{Namespace: "shop", NodeID: "gw-1", Metrics: m, State: st}, "no etcd client"},
		{"colon in node id", Settings{Client: nopPutter{}, Namespace: "shop", NodeID: "gw:1", Metrics: m, State: st}, `invalid node id "gw:1"`},
		{"bad namespace", Settings{Client: nopPutter{}, Namespace: "Shop!", NodeID: "gw-1", Metrics: m, State: st}, "invalid namespace"},
		{"no metrics", Settings{Client: nopPutter{}, Namespace: "shop", NodeID: "gw-1", State: st}, "no metrics"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := New(tc.s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want %q", err, tc.want)
			}
		})
	}
}

// The report is JSON the control plane decodes strictly, with the latency
// layout api.LatencyBounds fixes (the control plane refuses any other).
func TestReportRoundTrip(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	s := mustSnapshot(t, m, rules)
	r := mustReporter(t, Settings{Client: nopPutter{}, Namespace: "shop", NodeID: "gw-1", Metrics: m,
		State: func() State { return State{Version: s.Version, Rules: s.Rules} }})
	serve(s, 5)
	rep := r.Collect()
	if !slices.Equal(rep.Latency.Bounds, api.LatencyBounds) {
		t.Fatalf("latency bounds %v, want api.LatencyBounds %v", rep.Latency.Bounds, api.LatencyBounds)
	}
	b, err := api.EncodeReport(rep)
	if err != nil {
		t.Fatal(err)
	}
	got, err := api.DecodeReport("gw-1", b, time.Now(), 0)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(rep)
	c, _ := json.Marshal(got)
	if string(a) != string(c) {
		t.Errorf("round trip:\n%s\n%s", a, c)
	}
}

// TestReportQuotas checks the quota usages a report carries: those of the
// rules the node runs, in the window holding the report's time, a used
// count over the quota's rate plus burst reported as that bound; and that
// the control plane's checks accept what the node keeps.
func TestReportQuotas(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	now := time.Date(2026, 12, 14, 12, 0, 0, 0, time.UTC)
	day := time.Date(2026, 12, 14, 0, 0, 0, 0, time.UTC)
	rs := &api.RuleSet{Namespace: "shop", Limits: []api.Limit{{ID: "daily", Algorithm: api.Quota, Rate: 10, Calendar: api.CalendarDay,
		Timezone: "UTC", Scope: api.ScopeCluster, Tiers: []api.Tier{{ID: "pro", Rate: 100}}}}}
	usage := []api.QuotaUsage{
		{Rule: "daily", WindowStart: day, MaxUsed: 25, OverHalf: 2},                      // capped at 20
		{Rule: "daily", Tier: "pro", WindowStart: day.Add(-24 * time.Hour), MaxUsed: 60}, // yesterday's: dropped
		{Rule: "gone", WindowStart: day, MaxUsed: 1},                                     // not in the rules: dropped
	}
	r := mustReporter(t, Settings{Client: nopPutter{}, Namespace: "shop", NodeID: "gw-1", Metrics: m, Now: func() time.Time { return now },
		State: func() State { return State{Rules: rs, Quotas: usage} }})
	rep := r.Collect()
	want := []api.QuotaUsage{{Rule: "daily", WindowStart: day, MaxUsed: 20, OverHalf: 2}}
	if len(rep.Quotas) != 1 || rep.Quotas[0] != want[0] {
		t.Fatalf("quotas %+v, want %+v", rep.Quotas, want)
	}
	if errs := rep.Check(now, 0); len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := rep.CheckQuotas(rs); err != nil {
		t.Fatal(err)
	}
}

// TestCollectVariants: a limit with variants is reported per variant (the
// base one first, then the limit's own), each count the node's
// sluice_limit_decisions_total of that variant, adding up to the limit's
// counts; a limit without variants has none.
func TestCollectVariants(t *testing.T) {
	t.Parallel()
	const doc = `namespace: shop
routes:
  - id: api
    match: {pathPrefix: /api}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
limits:
  - id: per-user
    routes: [api]
    key: ["header:X-User"]
    algorithm: fixed_window
    rate: 1
    period: 1h
    variants:
      - {id: loose, weight: 50, rate: 1000}
  - id: plain
    routes: [api]
    algorithm: fixed_window
    rate: 1000
    period: 1h
`
	m := metrics.New()
	s := mustSnapshot(t, m, doc)
	r := mustReporter(t, Settings{Client: nopPutter{}, Namespace: "shop", NodeID: "gw-1", Metrics: m,
		State: func() State { return State{Version: s.Version, Rules: s.Rules} }})
	for u := range 40 {
		for range 3 {
			req := httptest.NewRequest(http.MethodGet, "/api/x", nil)
			req.Header.Set("X-User", "user-"+strings.Repeat("x", u))
			s.ServeHTTP(httptest.NewRecorder(), req)
		}
	}
	rep := r.Collect()
	if errs := rep.Check(time.Now(), 0); len(errs) > 0 {
		t.Fatalf("Check: %v", errs)
	}
	if err := rep.CheckRules(s.Rules); err != nil {
		t.Fatal(err)
	}
	var lim, plain api.LimitCounts
	for _, l := range rep.Limits {
		switch l.Rule {
		case "per-user":
			lim = l
		case "plain":
			plain = l
		}
	}
	if len(plain.Variants) != 0 {
		t.Errorf("plain (no variants) reports variants %+v", plain.Variants)
	}
	if got := []string{lim.Variants[0].Variant, lim.Variants[1].Variant}; len(lim.Variants) != 2 || !slices.Equal(got, []string{api.BaseVariant, "loose"}) {
		t.Fatalf("per-user variants %+v, want base then loose", lim.Variants)
	}
	var sum api.VariantCounts
	for _, v := range lim.Variants {
		for _, c := range []struct {
			decision string
			got      int64
		}{{metrics.DecisionAllow, v.Allowed}, {metrics.DecisionReject, v.Rejected}, {metrics.DecisionShadowDeny, v.ShadowRejected}} {
			if want := int64(testutil.ToFloat64(m.LimitDecision("per-user", c.decision, "", v.Variant, ""))); c.got != want {
				t.Errorf("variant %s %s: report %d, counter %d", v.Variant, c.decision, c.got, want)
			}
		}
		sum.Allowed += v.Allowed
		sum.Rejected += v.Rejected
	}
	if sum.Allowed != lim.Allowed || sum.Rejected != lim.Rejected || lim.Allowed+lim.Rejected != 120 {
		t.Errorf("variants add up to %d allowed %d rejected; the limit counts %d and %d of 120", sum.Allowed, sum.Rejected, lim.Allowed, lim.Rejected)
	}
	// Both variants saw clients: base rejects every user's 2nd and 3rd
	// request (rate 1), loose none.
	base, loose := lim.Variants[0], lim.Variants[1]
	if base.Allowed == 0 || loose.Allowed == 0 || base.Rejected != 2*base.Allowed || loose.Rejected != 0 {
		t.Errorf("base %+v loose %+v: want both used, base rejecting 2 of 3, loose none", base, loose)
	}
}

// TestCollectVariantLatency: each variant of a limit with variants reports
// the latency histogram of the requests it let through and the route's
// other limits admitted (sluice_limit_variant_request_duration_seconds):
// cumulative over api.LatencyBounds, bucket for bucket the node's
// histogram, never the requests answered 429, and no more than the
// variant allowed (what the control plane checks).
func TestCollectVariantLatency(t *testing.T) {
	t.Parallel()
	const doc = `namespace: shop
routes:
  - id: api
    match: {pathPrefix: /api}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
limits:
  - id: per-user
    routes: [api]
    key: ["header:X-User"]
    algorithm: fixed_window
    rate: 1
    period: 1h
    variants:
      - {id: loose, weight: 50, rate: 1000}
  - id: plain
    routes: [api]
    algorithm: fixed_window
    rate: 50
    period: 1h
`
	m := metrics.New()
	s := mustSnapshot(t, m, doc)
	r := mustReporter(t, Settings{Client: nopPutter{}, Namespace: "shop", NodeID: "gw-1", Metrics: m,
		State: func() State { return State{Version: s.Version, Rules: s.Rules} }})
	first := r.Collect()
	for _, l := range first.Limits {
		for _, v := range l.Variants {
			if v.Latency != nil {
				t.Errorf("variant %s/%s reports latency %v before any request", l.Rule, v.Variant, v.Latency)
			}
		}
	}
	for u := range 40 {
		for range 3 {
			req := httptest.NewRequest(http.MethodGet, "/api/x", nil)
			req.Header.Set("X-User", "user-"+strings.Repeat("x", u))
			s.ServeHTTP(httptest.NewRecorder(), req)
		}
	}
	rep := r.Collect()
	if errs := rep.Check(time.Now(), 0); len(errs) > 0 {
		t.Fatalf("Check: %v", errs)
	}
	if err := rep.Follows(first); err != nil {
		t.Fatal(err)
	}
	var lim, plain api.LimitCounts
	for _, l := range rep.Limits {
		switch l.Rule {
		case "per-user":
			lim = l
		case "plain":
			plain = l
		}
	}
	if plain.Rejected == 0 || plain.Allowed != 50 {
		t.Fatalf("plain %+v: want 50 allowed and some rejected (the requests per-user let through past 50)", plain)
	}
	var total int64
	for _, v := range lim.Variants {
		if v.Latency == nil {
			t.Fatalf("variant %s: no latency (allowed %d)", v.Variant, v.Allowed)
		}
		if !slices.Equal(v.Latency.Bounds, api.LatencyBounds) || len(v.Latency.Counts) != len(api.LatencyBounds)+1 {
			t.Fatalf("variant %s latency %+v: not over api.LatencyBounds", v.Variant, v.Latency)
		}
		// Bucket for bucket the node's Prometheus histogram.
		h := &dto.Metric{}
		if err := m.VariantDuration.WithLabelValues("per-user", v.Variant).(prometheus.Histogram).Write(h); err != nil {
			t.Fatal(err)
		}
		for i, b := range h.GetHistogram().GetBucket() {
			if got := v.Latency.Counts[i]; got != int64(b.GetCumulativeCount()) {
				t.Errorf("variant %s bucket le=%g: report %d, histogram %d", v.Variant, b.GetUpperBound(), got, b.GetCumulativeCount())
			}
		}
		if got, want := v.Latency.Total(), int64(h.GetHistogram().GetSampleCount()); got != want {
			t.Errorf("variant %s: report counts %d requests, histogram %d", v.Variant, got, want)
		}
		if v.Latency.Total() > v.LatencyBound() {
			t.Errorf("variant %s counts %d requests, more than the %d it let through", v.Variant, v.Latency.Total(), v.LatencyBound())
		}
		total += v.Latency.Total()
	}
	// Every request per-user let through reached plain; those plain
	// refused (429) are in no variant's latency.
	if total != plain.Allowed {
		t.Errorf("the variants' latency counts %d requests; plain admitted %d of the %d per-user let through", total, plain.Allowed, lim.Allowed)
	}
}

// TestSumsGroupRestartTogether: the counters of a group (a variant's
// decisions and latency buckets) restart together, so that a latency that
// counts no more than the decisions at every reading counts no more in the
// sums, across a restart that per-counter sums miscount.
func TestSumsGroupRestartTogether(t *testing.T) {
	t.Parallel()
	keys := []string{"allowed", "latency"}
	s := sums{}
	// Read: 10 allowed, 10 observed. The series restart (the rule removed
	// and added back) and read 11 allowed, 5 observed.
	s.group(keys, []float64{10, 10})
	got := s.group(keys, []float64{11, 5})
	if got[1] > got[0] {
		t.Errorf("group sums: %d observed of %d allowed", got[1], got[0])
	}
	if want := []int64{21, 15}; !slices.Equal(got, want) {
		t.Errorf("group sums %v, want %v (every reading whole once any restarted)", got, want)
	}
	// The same readings summed one counter at a time (sums.add) would
	// count 15 observed of 11 allowed.
	one := sums{}
	one.add("allowed", 10)
	one.add("latency", 10)
	if a, l := one.add("allowed", 11), one.add("latency", 5); l <= a {
		t.Errorf("per-counter sums %d observed of %d allowed: the case group exists for no longer arises", l, a)
	}
}
