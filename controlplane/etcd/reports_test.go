package etcd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/etcd"
	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
)

// The red team's forged reports, replayed against a real etcd and the real
// ReportWatcher, Fleet and CanaryAnalyser: reports under a node id that
// never registered, under a real node's id with another lease, with
// unbounded latency bounds, with counters past 2^31, an event flood, and
// forged nodes trying to swing a canary's verdict.

// memEvents is an EventService in memory that keeps one event per
// (namespace, key), as the Postgres one does.
type memEvents struct {
	mu   sync.Mutex
	evs  []*sluice.Event
	keys map[string]bool
}

func (m *memEvents) RecordEvents(_ context.Context, evs []*sluice.Event) ([]*sluice.Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.keys == nil {
		m.keys = map[string]bool{}
	}
	var out []*sluice.Event
	for _, e := range evs {
		if k := e.Namespace + "/" + e.Key; !m.keys[k] {
			m.keys[k] = true
			m.evs = append(m.evs, e)
			out = append(out, e)
		}
	}
	return out, nil
}

func (m *memEvents) FindEvents(context.Context, sluice.EventFilter) ([]*sluice.Event, int64, error) {
	return nil, 0, nil
}

func (m *memEvents) PruneEvents(context.Context, time.Time) (int64, error) { return 0, nil }

func (m *memEvents) count(ns string, kind sluice.EventKind) (n int, suppressed int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.evs {
		if e.Namespace == ns && e.Kind == kind {
			n++
			var d struct {
				Suppressed int64 `json:"suppressed"`
			}
			_ = json.Unmarshal(e.Detail, &d)
			suppressed += d.Suppressed
		}
	}
	return n, suppressed
}

// redTeam is a control plane's report side over a real etcd: a Fleet fed by
// a ReportWatcher, its clock fixed (at start, moved by set).
type redTeam struct {
	c      *clientv3.Client
	keys   api.Keys
	fleet  *sluice.Fleet
	events *memEvents
	start  time.Time
	clock  atomic.Int64 // unix nanoseconds
}

func (rt *redTeam) now() time.Time    { return time.Unix(0, rt.clock.Load()).UTC() }
func (rt *redTeam) set(now time.Time) { rt.clock.Store(now.UnixNano()) }

func newRedTeam(t *testing.T, namespaces ...string) *redTeam {
	t.Helper()
	srv := etcdtest.Start(t)
	c, err := etcd.NewClient(srv.Endpoints)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	rt := &redTeam{c: c, keys: api.Keys{Prefix: "/redteam"}, events: &memEvents{}, start: time.Now().UTC().Truncate(5 * time.Second)}
	rt.set(rt.start)
	rs := &api.RuleSet{Limits: []api.Limit{{ID: "per-ip"}}, Degrades: []api.Degrade{{ID: "coupon"}}}
	clock := rt.now
	rt.fleet = sluice.NewFleet(sluice.FleetSettings{Now: clock, Rules: func(context.Context, string, int64) (*api.RuleSet, error) { return rs, nil }})
	w := etcd.NewReportWatcher(etcd.ReportSettings{Client: c, Fleet: rt.fleet, Events: rt.events, Keys: rt.keys, Now: clock,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Namespaces: func(context.Context) ([]string, error) { return namespaces, nil }})
	w.Start(context.Background())
	t.Cleanup(w.Close)
	// Wait until the watcher follows each namespace (one that starts
	// after a test's reports sees only each key's last value): node
	// "probe" (no requests) reports in each.
	for _, ns := range namespaces {
		lease := rt.register(t, ns, "probe", 1, nil)
		rt.put(t, ns, report("probe", 1, rt.start.Add(-time.Minute), 1, 0, 0, 0), lease)
	}
	rt.wait(t, map[string]int64{"": int64(len(namespaces))})
	return rt
}

// register registers node in ns on a lease of its own, with labels and
// version, and returns the lease.
func (rt *redTeam) register(t *testing.T, ns, node string, version int64, labels map[string]string) clientv3.LeaseID {
	t.Helper()
	g, err := rt.c.Grant(context.Background(), 600)
	if err != nil {
		t.Fatal(err)
	}
	rt.registerOn(t, ns, node, g.ID, api.NodeStatus{Address: "10.0.0.1:9000", Labels: labels, Version: version})
	return g.ID
}

func (rt *redTeam) registerOn(t *testing.T, ns, node string, lease clientv3.LeaseID, s api.NodeStatus) {
	t.Helper()
	b, _ := json.Marshal(s)
	if _, err := rt.c.Put(context.Background(), rt.keys.Node(ns, node), string(b), clientv3.WithLease(lease)); err != nil {
		t.Fatal(err)
	}
}

// put writes r under ns's report key of r.NodeID, bound to lease.
func (rt *redTeam) put(t *testing.T, ns string, r *api.Report, lease clientv3.LeaseID) {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	rt.putRaw(t, rt.keys.Report(ns, r.NodeID), string(b), lease)
}

func (rt *redTeam) putRaw(t *testing.T, key, value string, lease clientv3.LeaseID) {
	t.Helper()
	if _, err := rt.c.Put(context.Background(), key, value, clientv3.WithLease(lease)); err != nil {
		t.Fatal(err)
	}
}

// wait waits until the Fleet has stored and refused (by reason) at least
// what want says ("" is the reports stored).
func (rt *redTeam) wait(t *testing.T, want map[string]int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		stored, refused := rt.fleet.Counts()
		refused[""] = stored
		ok := true
		for k, n := range want {
			ok = ok && refused[k] >= n
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stored and refused %v, want %v", refused, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// nodeRequests sums node's requests (and 5xx) in the stats.
func (rt *redTeam) nodeRequests(t *testing.T, ns, node string) (requests, e5xx float64) {
	t.Helper()
	st, err := rt.fleet.FindStats(context.Background(), sluice.StatsQuery{Namespace: ns, Node: node})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Nodes {
		for _, p := range s.Points {
			requests += p[1]
			e5xx += p[5]
		}
	}
	return requests, e5xx
}

// report is a report of node: requests of which rejected (429) and e5xx.
func report(node string, seq int64, at time.Time, version, requests, rejected, e5xx int64) *api.Report {
	return &api.Report{NodeID: node, BootID: "boot-" + node, BootAt: at.Add(-time.Duration(seq) * 5 * time.Second), Seq: seq, At: at,
		IntervalSeconds: 5, Version: version,
		Requests: api.RequestCounts{Total: requests, Rejected: rejected, Class4xx: rejected, Class5xx: e5xx, Class2xx: requests - rejected - e5xx},
		Limits:   []api.LimitCounts{{Rule: "per-ip", Allowed: requests - rejected, Rejected: rejected}}}
}

// TestForgedReports: a report under a node id that never registered
// (gw-zz), a forged key under a real node's id bound to another lease, and
// a report of a node whose registration is invalid are refused, counted by
// reason, and never stored; the real node's reports still count.
func TestForgedReports(t *testing.T) {
	t.Parallel()
	rt := newRedTeam(t, "forged")
	ns := "forged"
	l1 := rt.register(t, ns, "gw-1", 1, nil)
	at := rt.start.Add(-time.Minute)
	rt.put(t, ns, report("gw-1", 1, at, 1, 100, 0, 0), l1)
	rt.wait(t, map[string]int64{"": 1 + 1})

	// gw-zz never registered; it writes under a lease of its own, then
	// under gw-1's.
	other, err := rt.c.Grant(context.Background(), 600)
	if err != nil {
		t.Fatal(err)
	}
	rt.put(t, ns, report("gw-zz", 1, at, 1, 380047, 266033, 0), other.ID)
	rt.put(t, ns, report("gw-zy", 1, at, 1, 380047, 266033, 0), l1)
	// 1.45 M requests at 90% 5xx under gw-1's key, bound to another lease.
	forged := report("gw-1", 2, at.Add(5*time.Second), 1, 1450000, 0, 1305000)
	forged.BootID = "forged"
	rt.put(t, ns, forged, other.ID)
	// A node whose registration is forged (a label of HTML, an address of
	// javascript:) is not registered.
	rt.registerOn(t, ns, "gw-x", other.ID, api.NodeStatus{Address: "javascript:alert(1)", Labels: map[string]string{"x": "<b>y</b>"}})
	rt.put(t, ns, report("gw-x", 1, at, 1, 5000, 0, 5000), other.ID)
	rt.wait(t, map[string]int64{sluice.RefusedUnregistered: 3, sluice.RefusedLease: 1})
	// gw-1's own key claims a quota usage of a limit that is no quota:
	// refused as implausible, never kept.
	usage := report("gw-1", 2, at.Add(5*time.Second), 1, 200, 0, 0)
	usage.Quotas = []api.QuotaUsage{{Rule: "per-ip", WindowStart: at.Add(-time.Hour), MaxUsed: 1 << 40}}
	rt.put(t, ns, usage, l1)
	rt.wait(t, map[string]int64{sluice.RefusedImplausible: 1})

	// gw-1 carries on: its own next report counts.
	rt.put(t, ns, report("gw-1", 2, at.Add(10*time.Second), 1, 250, 0, 0), l1)
	rt.wait(t, map[string]int64{"": 1 + 2})
	if req, e5 := rt.nodeRequests(t, ns, "gw-1"); req != 250 || e5 != 0 {
		t.Errorf("gw-1's chart: %v requests, %v 5xx; want its own 250 and none", req, e5)
	}
	for _, id := range []string{"gw-zz", "gw-zy", "gw-x"} {
		if r, _ := rt.fleet.LastReport(ns, id); r != nil {
			t.Errorf("%s's report stored: %+v", id, r)
		}
	}
	stored, refused := rt.fleet.Counts()
	if stored != 1+2 || refused[sluice.RefusedUnregistered] != 3 || refused[sluice.RefusedLease] != 1 || refused[sluice.RefusedImplausible] != 1 {
		t.Errorf("stored %d, refused %v", stored, refused)
	}
	if n, _ := rt.events.count(ns, sluice.EventNodeJoined); n != 2 {
		t.Errorf("%d node_joined events, want gw-1's and the probe's", n)
	}
}

// TestUnboundedReports: reports with 50,000 latency bounds (169 KB and
// more) or a few thousand (under the size cap) are refused, and the
// control plane's heap does not grow with them (it grew to 390 MB after
// five such reports when the first report fixed the histogram's width).
func TestUnboundedReports(t *testing.T) {
	t.Parallel()
	rt := newRedTeam(t, "unbounded")
	ns := "unbounded"
	lease := rt.register(t, ns, "gw-1", 1, nil)
	at := rt.start.Add(-time.Minute)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for seq := int64(1); seq <= 5; seq++ {
		r := report("gw-1", seq, at.Add(time.Duration(seq)*time.Second), 1, 10*seq, 0, 0)
		width := 50000
		if seq%2 == 0 {
			width = 5000 // under 64 KiB: refused for its bounds, not its size
		}
		r.Latency = api.LatencyCounts{Bounds: make([]float64, width), Counts: make([]int64, width+1)}
		for i := range r.Latency.Bounds {
			r.Latency.Bounds[i] = float64(width - i) // unordered too
		}
		b, _ := json.Marshal(r)
		if seq == 1 && len(b) < 169000 {
			t.Fatalf("the report is %d bytes, want the red team's 169 KB or more", len(b))
		}
		if seq == 2 && len(b) > api.MaxReportBytes {
			t.Fatalf("the report is %d bytes, want one under the cap", len(b))
		}
		rt.putRaw(t, rt.keys.Report(ns, "gw-1"), string(b), lease)
	}
	rt.wait(t, map[string]int64{sluice.RefusedInvalid: 5})
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 32<<20 {
		t.Errorf("heap grew by %d MB over five refused reports", grew>>20)
	}
	if stored, _ := rt.fleet.Counts(); stored != 1 { // the probe's
		t.Errorf("%d reports stored", stored)
	}
}

// TestReportCountersPast2e31: 3e9 requests over the hour since a node's
// boot are stored as 3e9 (they showed as -1,294,967,296 when rings held
// int32); the same count claimed over five seconds is beyond what a node
// can serve and refused.
func TestReportCountersPast2e31(t *testing.T) {
	t.Parallel()
	rt := newRedTeam(t, "big")
	ns := "big"
	l1 := rt.register(t, ns, "gw-1", 1, nil)
	l2 := rt.register(t, ns, "gw-2", 1, nil)
	at := rt.start.Add(-time.Minute)
	long := report("gw-1", 1, at, 1, 3e9, 0, 0)
	long.BootAt = at.Add(-time.Hour)
	rt.put(t, ns, long, l1)
	rt.put(t, ns, report("gw-2", 1, at, 1, 3e9, 0, 0), l2) // booted 5s before
	rt.wait(t, map[string]int64{"": 1 + 1, sluice.RefusedImplausible: 1})
	if req, _ := rt.nodeRequests(t, ns, "gw-1"); req != 3e9 {
		t.Errorf("gw-1's chart: %v requests, want 3e9", req)
	}
	if req, _ := rt.nodeRequests(t, ns, "gw-2"); req != 0 {
		t.Errorf("gw-2's chart: %v requests, want none", req)
	}
	// gw-2's next report counts from the refused one (its baseline): a
	// plausible rate is stored.
	next := report("gw-2", 2, at.Add(5*time.Second), 1, 3e9+1000, 0, 0)
	next.BootAt = at.Add(-5 * time.Second)
	rt.put(t, ns, next, l2)
	rt.wait(t, map[string]int64{"": 1 + 2})
	if req, _ := rt.nodeRequests(t, ns, "gw-2"); req != 1000 {
		t.Errorf("gw-2's chart: %v requests, want 1000", req)
	}
}

// TestReportEventFlood: a node that writes a report per degrade
// transition (the red team's 4,500 in 15 s, here 600) makes at most
// EventsPerMinute events of the rule in a minute; the rest are counted in
// the next stored event's "suppressed" once the minute has passed.
func TestReportEventFlood(t *testing.T) {
	t.Parallel()
	rt := newRedTeam(t, "flood")
	ns := "flood"
	lease := rt.register(t, ns, "gw-1", 1, nil)
	at := rt.start.Add(-time.Minute)
	const flood = 600
	r := report("gw-1", 1, at, 1, 0, 0, 0)
	r.Degrades = []api.DegradeState{{Rule: "coupon"}}
	for i := range flood {
		r.Seq = int64(i + 1)
		r.At = at.Add(time.Duration(i) * 10 * time.Millisecond)
		up, down := int64(i/2+i%2), int64(i/2)
		r.Degrades[0].Level = i % 2
		r.Degrades[0].Transitions = []api.Transition{{From: "0", To: "1", Count: up}, {From: "1", To: "0", Count: down}}
		if down == 0 {
			r.Degrades[0].Transitions = r.Degrades[0].Transitions[:1]
		}
		if up == 0 {
			r.Degrades[0].Transitions = nil
		}
		rt.put(t, ns, r, lease)
	}
	rt.wait(t, map[string]int64{"": 1 + flood})
	if n, _ := rt.events.count(ns, sluice.EventDegrade); n != 10 {
		t.Errorf("%d degrade events from %d transitions in a minute, want 10", n, flood-1)
	}
	// A minute later the next transition is stored, carrying the count of
	// those dropped.
	rt.set(rt.start.Add(time.Minute))
	r.Seq++
	r.At = rt.now()
	r.Degrades[0].Level = 1
	r.Degrades[0].Transitions[0].Count++
	rt.put(t, ns, r, lease)
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, suppressed := rt.events.count(ns, sluice.EventDegrade)
		if n == 11 {
			if suppressed != flood-1-10 {
				t.Errorf("suppressed %d, want %d", suppressed, flood-1-10)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d degrade events, want 11", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// memCanaries is a CanaryStore in memory.
type memCanaries struct {
	mu       sync.Mutex
	canaries []*sluice.Canary
	ended    []bool // promote?
	reasons  []string
}

func (m *memCanaries) FindAnalysedCanaries(context.Context) ([]*sluice.Canary, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*sluice.Canary(nil), m.canaries...), nil
}

func (m *memCanaries) SaveCanaryComparison(_ context.Context, id int64, c *sluice.CanaryComparison) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, can := range m.canaries {
		if can.ID == id {
			cp := *c
			can.Comparison = &cp
		}
	}
	return nil
}

func (m *memCanaries) EndCanaryByAnalysis(_ context.Context, _ string, id int64, promote bool, reason string, _ *sluice.CanaryComparison) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ended, m.reasons = append(m.ended, promote), append(m.reasons, reason)
	m.canaries = nil
	return true, nil
}

// TestCanaryForgedNodes: cohorts come from registrations and cohort rates
// are medians of per-node rates, so that
//   - a bad canary (30% rejected) is not promoted because a node that never
//     registered (gw-zz: 380,047 requests, 70% rejected) or a registered
//     baseline node claiming the same joins the baseline;
//   - a good canary is not aborted because one canary node reports 3,000 of
//     3,156 requests with 5xx, or a baseline node's report claims the
//     canary's version with 5xx.
func TestCanaryForgedNodes(t *testing.T) {
	t.Parallel()
	rt := newRedTeam(t, "bad-canary", "good-canary", "good-canary-2")
	t0 := rt.start.Add(-35 * time.Second) // window 1 [t0, t0+20s) ended, plus the 10s delay
	canaryLabels, baseLabels := map[string]string{"track": "canary"}, map[string]string{"track": "stable"}
	type node struct {
		id       string
		labels   map[string]string
		regV     int64 // its registration's version
		repV     int64 // its report's claim
		requests int64 // per 5s report
		rejected int64
		e5xx     int64
		register bool
	}
	run := func(t *testing.T, ns string, nodes []node) *memCanaries {
		t.Helper()
		stored, refused := rt.fleet.Counts()
		want := map[string]int64{"": stored, sluice.RefusedUnregistered: refused[sluice.RefusedUnregistered]}
		for _, n := range nodes {
			lease, err := rt.c.Grant(context.Background(), 600)
			if err != nil {
				t.Fatal(err)
			}
			if n.register {
				rt.registerOn(t, ns, n.id, lease.ID, api.NodeStatus{Address: "10.0.0.1:9000", Labels: n.labels, Version: n.regV})
				want[""] += 5
			} else {
				want[sluice.RefusedUnregistered] += 5
			}
			for seq := int64(1); seq <= 5; seq++ {
				r := report(n.id, seq, t0.Add(time.Duration(seq-1)*5*time.Second+time.Second), n.repV, seq*n.requests, seq*n.rejected, seq*n.e5xx)
				rt.put(t, ns, r, lease.ID)
			}
		}
		rt.wait(t, want)
		store := &memCanaries{canaries: []*sluice.Canary{{ID: 1, Namespace: ns, Version: 2, CreatedAt: t0, State: sluice.CanaryActive,
			Selector: canaryLabels, Analysis: &sluice.CanaryAnalysis{Window: api.Duration(20 * time.Second), MaxRejectRateIncrease: 0.05,
				Max5xxRateIncrease: 0.02, MinRequests: 100, OnPass: sluice.OnPassPromote}}}}
		a := &sluice.CanaryAnalyser{Store: store, Fleet: rt.fleet, Delay: 10 * time.Second, Since: t0, Now: rt.now}
		a.Run(context.Background())
		return store
	}
	t.Run("a bad canary is not promoted by forged baseline nodes", func(t *testing.T) {
		store := run(t, "bad-canary", []node{
			{id: "c-1", labels: canaryLabels, regV: 2, repV: 2, requests: 100, rejected: 30, register: true},
			{id: "c-2", labels: canaryLabels, regV: 2, repV: 2, requests: 100, rejected: 30, register: true},
			{id: "b-1", labels: baseLabels, regV: 1, repV: 1, requests: 100, rejected: 1, register: true},
			{id: "b-2", labels: baseLabels, regV: 1, repV: 1, requests: 100, rejected: 1, register: true},
			{id: "b-3", labels: baseLabels, regV: 1, repV: 1, requests: 100, rejected: 1, register: true},
			{id: "b-evil", labels: baseLabels, regV: 1, repV: 1, requests: 380047 / 5, rejected: 266033 / 5, register: true},
			{id: "gw-zz", labels: baseLabels, repV: 1, requests: 380047 / 5, rejected: 266033 / 5},
		})
		if len(store.ended) != 1 || store.ended[0] {
			t.Fatalf("ended %v (%v), want aborted", store.ended, store.reasons)
		}
		if !strings.Contains(store.reasons[0], "rejectRateIncrease") {
			t.Errorf("abort reason %q", store.reasons[0])
		}
	})
	t.Run("a good canary is not aborted by one node's 5xx", func(t *testing.T) {
		store := run(t, "good-canary", []node{
			{id: "c-1", labels: canaryLabels, regV: 2, repV: 2, requests: 100, rejected: 1, register: true},
			{id: "c-2", labels: canaryLabels, regV: 2, repV: 2, requests: 100, rejected: 1, register: true},
			{id: "c-evil", labels: canaryLabels, regV: 2, repV: 2, requests: 3156 / 5, e5xx: 3000 / 5, register: true},
			{id: "b-1", labels: baseLabels, regV: 1, repV: 1, requests: 100, rejected: 1, register: true},
			{id: "b-2", labels: baseLabels, regV: 1, repV: 1, requests: 100, rejected: 1, register: true},
			{id: "gw-zz", labels: canaryLabels, repV: 2, requests: 3156 / 5, e5xx: 3000 / 5},
		})
		if len(store.ended) != 1 || !store.ended[0] {
			t.Fatalf("ended %v (%v), want promoted", store.ended, store.reasons)
		}
	})
	t.Run("a good canary is not aborted by reports claiming its version", func(t *testing.T) {
		store := run(t, "good-canary-2", []node{
			{id: "c-1", labels: canaryLabels, regV: 2, repV: 2, requests: 100, rejected: 1, register: true},
			{id: "c-2", labels: canaryLabels, regV: 2, repV: 2, requests: 100, rejected: 1, register: true},
			{id: "b-1", labels: baseLabels, regV: 1, repV: 1, requests: 100, rejected: 1, register: true},
			{id: "b-2", labels: baseLabels, regV: 1, repV: 1, requests: 100, rejected: 1, register: true},
			// Selected by the canary, they claim its version in their
			// reports; their registrations say they still run version 1:
			// in neither cohort. One outside the canary claims it too.
			{id: "c-liar-1", labels: canaryLabels, regV: 1, repV: 2, requests: 3156 / 5, e5xx: 3000 / 5, register: true},
			{id: "c-liar-2", labels: canaryLabels, regV: 1, repV: 2, requests: 3156 / 5, e5xx: 3000 / 5, register: true},
			{id: "b-liar", labels: baseLabels, regV: 1, repV: 2, requests: 3156 / 5, e5xx: 3000 / 5, register: true},
		})
		if len(store.ended) != 1 || !store.ended[0] {
			t.Fatalf("ended %v (%v), want promoted", store.ended, store.reasons)
		}
	})
}

// TestForgedRegistrationsNotListed: registrations with a label of HTML or
// an address of javascript: are not listed as live nodes.
func TestForgedRegistrationsNotListed(t *testing.T) {
	t.Parallel()
	rt := newRedTeam(t)
	ns := "shop"
	rt.register(t, ns, "gw-1", 1, map[string]string{"zone": "a"})
	rt.register(t, ns, "gw-label", 1, map[string]string{"x": "<b>y</b>"})
	lease := rt.register(t, ns, "gw-addr", 1, nil)
	rt.registerOn(t, ns, "gw-addr", lease, api.NodeStatus{Address: "javascript:alert(document.cookie)"})
	rt.registerOn(t, ns, "gw-build", lease, api.NodeStatus{Address: "10.0.0.2:9000", Build: strings.Repeat("<", 5000)})
	svc := &etcd.NodeService{Client: rt.c, Keys: rt.keys}
	nodes, err := svc.FindNodes(context.Background(), sluice.NodeFilter{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range nodes {
		ids = append(ids, n.NodeID)
	}
	if fmt.Sprint(ids) != "[gw-1]" {
		t.Errorf("live nodes %v, want only gw-1", ids)
	}
}
