package http_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/etcd"
	sluicehttp "github.com/sluicegw/sluice/controlplane/http"
	"github.com/sluicegw/sluice/controlplane/postgres"
)

// fleetEnv is an env with the fleet services: a Fleet fed by report
// watchers (replicas of sluice-admin), events in Postgres, the stream hub
// and its event feed.
type fleetEnv struct {
	*env
	fleet  *sluice.Fleet
	events *postgres.EventService
	hub    *sluice.Hub
	lease  clientv3.LeaseID
	raw    *httptest.Server // the API without the spec checker (which buffers): for the stream
}

func newFleetEnv(t *testing.T, replicas int) *fleetEnv {
	t.Helper()
	f := &fleetEnv{hub: &sluice.Hub{}}
	var versions *postgres.VersionService
	f.fleet = sluice.NewFleet(sluice.FleetSettings{Rules: func(ctx context.Context, ns string, n int64) (*api.RuleSet, error) {
		v, err := versions.FindVersion(ctx, ns, n)
		if err != nil {
			return nil, err
		}
		return sluice.DecodeDocument(v.Document)
	}})
	f.env = newEnv(t, envOptions{settings: func(s *sluicehttp.Settings) {
		s.Stats, s.Stream, s.Events = f.fleet, f.hub, lateEvents{f}
	}})
	versions = postgres.NewVersionService(f.db)
	f.events = postgres.NewEventService(f.db)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	namespaces := postgres.NewNamespaceService(f.db)
	names := func(ctx context.Context) ([]string, error) {
		nss, err := namespaces.FindNamespaces(ctx)
		var out []string
		for _, ns := range nss {
			out = append(out, ns.Name)
		}
		return out, err
	}
	for range replicas {
		w := etcd.NewReportWatcher(etcd.ReportSettings{Client: f.etcd, Fleet: f.fleet, Events: f.events, Hub: f.hub,
			Namespaces: names, Keys: f.keys, Logger: logger, Rescan: 100 * time.Millisecond})
		w.Start(context.Background())
		t.Cleanup(w.Close)
	}
	feed := &sluice.EventFeed{Source: f.events, Hub: f.hub, Every: 50 * time.Millisecond, Logger: logger}
	feed.Start(context.Background())
	t.Cleanup(feed.Close)
	g, err := f.etcd.Grant(context.Background(), 60)
	if err != nil {
		t.Fatal(err)
	}
	f.lease = g.ID
	return f
}

// lateEvents is the env's event service, made once the env's database is
// open (after the server's settings).
type lateEvents struct{ f *fleetEnv }

func (l lateEvents) RecordEvents(ctx context.Context, evs []*sluice.Event) ([]*sluice.Event, error) {
	return l.f.events.RecordEvents(ctx, evs)
}

func (l lateEvents) FindEvents(ctx context.Context, f sluice.EventFilter) ([]*sluice.Event, int64, error) {
	return l.f.events.FindEvents(ctx, f)
}

func (l lateEvents) PruneEvents(ctx context.Context, before time.Time) (int64, error) {
	return l.f.events.PruneEvents(ctx, before)
}

// put writes a node report under the env's lease (or none); under the
// lease, it first registers the node with it (a report counts only from a
// node registered under the same lease).
func (f *fleetEnv) put(t testing.TB, ns string, r *api.Report, lease bool) {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var opts []clientv3.OpOption
	if lease {
		opts = append(opts, clientv3.WithLease(f.lease))
		reg, _ := json.Marshal(api.NodeStatus{Address: "10.0.0.1:9000", Version: r.Version})
		if _, err := f.etcd.Put(context.Background(), f.keys.Node(ns, r.NodeID), string(reg), opts...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.etcd.Put(context.Background(), f.keys.Report(ns, r.NodeID), string(b), opts...); err != nil {
		t.Fatal(err)
	}
}

// waitWatching waits until the fleet's report watcher follows ns: it
// rescans the namespaces every 100 ms, and one that starts after a test's
// reports were written sees only each key's last value (as a replica that
// starts late does). It writes a report of node "gw-probe" with no
// requests, for version.
func (f *fleetEnv) waitWatching(t *testing.T, ns string, version int64) {
	t.Helper()
	f.put(t, ns, report("gw-probe", "probe", 1, time.Now(), version, 0, 0), true)
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(f.fleet.LiveNodes(ns), "gw-probe") {
		if time.Now().After(deadline) {
			t.Fatalf("the report watcher does not follow namespace %s", ns)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func report(node, boot string, seq int64, at time.Time, version int64, allowed, rejected int64) *api.Report {
	return &api.Report{NodeID: node, BootID: boot, Seq: seq, At: at.UTC(), IntervalSeconds: 1, Version: version,
		Requests: api.RequestCounts{Total: allowed + rejected, Rejected: rejected, Class2xx: allowed, Class4xx: rejected},
		Limits:   []api.LimitCounts{{Rule: "per-ip", Allowed: allowed, Rejected: rejected}},
		Degrades: []api.DegradeState{{Rule: "coupon", Level: 0}}}
}

func fleetRuleSet() *api.RuleSet {
	return &api.RuleSet{Namespace: "shop", Routes: []api.Route{route("orders")},
		Limits:   []api.Limit{{ID: "per-ip", Key: []string{"ip"}, Algorithm: "token_bucket", Rate: 10, Period: api.Duration(time.Second)}},
		Degrades: []api.Degrade{{ID: "coupon", Routes: []string{"orders"}, Mode: "manual"}}}
}

type statsBody struct {
	Step   string `json:"step"`
	Series []struct {
		Rule   string      `json:"rule"`
		Kind   string      `json:"kind"`
		Node   string      `json:"node"`
		Points [][]float64 `json:"points"`
	} `json:"series"`
}

func sumRule(s statsBody, rule string) (allowed, rejected float64) {
	for _, x := range s.Series {
		if x.Rule == rule {
			for _, p := range x.Points {
				allowed += p[1]
				rejected += p[2]
			}
		}
	}
	return
}

// TestFleetStatsAndRefusals: valid reports are summed as deltas of their
// cumulative counters (a new boot from zero); a report naming an unknown
// rule, from the future, without a lease, with a negative counter or going
// backwards within its boot is refused and counted, never stored.
func TestFleetStatsAndRefusals(t *testing.T) {
	t.Parallel()
	f := newFleetEnv(t, 1)
	admin, ed, ap := f.mustShop()
	rs, etag := ed.draft("shop")
	*rs = *fleetRuleSet()
	ed.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag)
	var ch sluice.Change
	ed.must(http.StatusCreated, "POST", "/api/v1/namespaces/shop/changes", map[string]string{"title": "fleet"}).decode(t, &ch)
	ap.must(http.StatusOK, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/approve", ch.ID), map[string]string{"comment": "ok"})
	var v sluice.Version
	ap.must(http.StatusCreated, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/publish", ch.ID), nil).decode(t, &v)
	f.waitWatching(t, "shop", v.Number)

	now := time.Now()
	f.put(t, "shop", report("gw-1", "boot1", 1, now.Add(-3*time.Second), v.Number, 10, 2), true)
	f.put(t, "shop", report("gw-1", "boot1", 2, now.Add(-2*time.Second), v.Number, 25, 4), true)
	f.put(t, "shop", report("gw-2", "boot9", 1, now.Add(-2*time.Second), v.Number, 7, 0), true)
	// A restart of gw-2: a new boot counts from zero.
	f.put(t, "shop", report("gw-2", "boot10", 1, now.Add(-time.Second), v.Number, 3, 1), true)

	bad := []struct {
		desc string
		r    *api.Report
		// lease: write under the lease.
		lease bool
	}{
		{"unknown rule", func() *api.Report {
			r := report("gw-3", "b", 1, now, v.Number, 100, 100)
			r.Limits[0].Rule = "no-such-limit"
			return r
		}(), true},
		{"from the future", report("gw-4", "b", 1, now.Add(10*time.Minute), v.Number, 100, 100), true},
		{"without a lease", report("gw-5", "b", 1, now, v.Number, 100, 100), false},
		{"negative counter", report("gw-6", "b", 1, now, v.Number, -5, 100), true},
		{"backwards within a boot", report("gw-1", "boot1", 3, now, v.Number, 20, 4), true},
	}
	for _, tc := range bad {
		f.put(t, "shop", tc.r, tc.lease)
	}
	want := float64(10 + 15 + 7 + 3)
	var st statsBody
	deadline := time.Now().Add(10 * time.Second)
	for {
		admin.must(http.StatusOK, "GET", "/api/v1/namespaces/shop/stats", nil).decode(t, &st)
		a, r := sumRule(st, "per-ip")
		_, refused := f.fleet.Counts()
		total := int64(0)
		for _, n := range refused {
			total += n
		}
		if a == want && r == 2+2+0+1 && total == int64(len(bad)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats allowed %v rejected %v (want %v and 5), refused %v (want %d)", a, r, want, refused, len(bad))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st.Step != "5s" {
		t.Errorf("step %q, want 5s", st.Step)
	}
	_, refused := f.fleet.Counts()
	for _, reason := range []string{sluice.RefusedUnknownRules, sluice.RefusedBackwards, sluice.RefusedInvalid} {
		if refused[reason] == 0 {
			t.Errorf("no report refused as %s: %v", reason, refused)
		}
	}
	// One node's series.
	var one statsBody
	admin.must(http.StatusOK, "GET", "/api/v1/namespaces/shop/stats?node=gw-1&step=1m", nil).decode(t, &one)
	if a, r := sumRule(one, "per-ip"); a != 25 || r != 4 {
		t.Errorf("gw-1: allowed %v rejected %v, want 25 and 4: %+v", a, r, one)
	}
	for _, s := range one.Series {
		if s.Node != "gw-1" {
			t.Errorf("series of node %q in gw-1's stats", s.Node)
		}
	}
	for _, tc := range []struct{ desc, query, path string }{
		{"a step that is not a multiple of 5s", "step=7s", "step"},
		{"a step that is no duration", "step=soon", "step"},
		{"a bad node id", "node=gw:1", "node"},
		{"a bad since", "since=yesterday", "since"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p := admin.must(http.StatusBadRequest, "GET", "/api/v1/namespaces/shop/stats?"+tc.query, nil).problem(t)
			if len(p.Errors) != 1 || p.Errors[0].Path != tc.path {
				t.Errorf("errors %+v, want one at %s", p.Errors, tc.path)
			}
		})
	}
	admin.must(http.StatusNotFound, "GET", "/api/v1/namespaces/nope/stats", nil)
}

// TestFleetEventsOnce: two replicas follow the same reports; a degrade
// transition and a node joining are stored once each, and a publish is an
// event (from its audit); the events list filters by kind and pages.
func TestFleetEventsOnce(t *testing.T) {
	t.Parallel()
	f := newFleetEnv(t, 2)
	admin, ed, ap := f.mustShop()
	rs, etag := ed.draft("shop")
	*rs = *fleetRuleSet()
	ed.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag)
	var ch sluice.Change
	ed.must(http.StatusCreated, "POST", "/api/v1/namespaces/shop/changes", map[string]string{"title": "fleet"}).decode(t, &ch)
	ap.must(http.StatusOK, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/approve", ch.ID), map[string]string{"comment": "ok"})
	var v sluice.Version
	ap.must(http.StatusCreated, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/publish", ch.ID), nil).decode(t, &v)

	type evs struct {
		Items []sluice.Event `json:"items"`
		Next  int64          `json:"next"`
	}
	// waitKind waits until the events hold one of kind: a node reports about
	// once a second, so a replica sees each report before the next (put
	// back to back, a replica that starts late sees only the last, and no
	// transition is before it).
	waitKind := func(kind sluice.EventKind) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			var got evs
			admin.must(http.StatusOK, "GET", "/api/v1/namespaces/shop/events?kind="+string(kind), nil).decode(t, &got)
			if len(got.Items) > 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s event", kind)
			}
		}
	}
	now := time.Now()
	r1 := report("gw-1", "boot1", 1, now.Add(-2*time.Second), v.Number, 1, 0)
	f.put(t, "shop", r1, true)
	waitKind(sluice.EventNodeJoined)
	r2 := report("gw-1", "boot1", 2, now.Add(-time.Second), v.Number, 2, 0)
	r2.Degrades[0] = api.DegradeState{Rule: "coupon", Level: 1, Transitions: []api.Transition{{From: "0", To: "1", Count: 1}}}
	f.put(t, "shop", r2, true)
	waitKind(sluice.EventDegrade)
	r3 := report("gw-1", "boot1", 3, now, v.Number, 3, 0)
	r3.Degrades[0] = api.DegradeState{Rule: "coupon", Level: 0, Transitions: []api.Transition{{From: "0", To: "1", Count: 1}, {From: "1", To: "0", Count: 1}}}
	r3.ApplyErrors, r3.LastApplyError = 1, "version 9: limits[0].rate: must be > 0"
	f.put(t, "shop", r3, true)

	var got evs
	deadline := time.Now().Add(10 * time.Second)
	for {
		admin.must(http.StatusOK, "GET", "/api/v1/namespaces/shop/events", nil).decode(t, &got)
		kinds := map[sluice.EventKind]int{}
		for _, e := range got.Items {
			kinds[e.Kind]++
		}
		if kinds[sluice.EventDegrade] == 2 && kinds[sluice.EventNodeJoined] == 1 && kinds[sluice.EventPublish] == 1 && kinds[sluice.EventApplyError] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("events %+v", got.Items)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the second replica has had its chance to write them again
	var again evs
	admin.must(http.StatusOK, "GET", "/api/v1/namespaces/shop/events", nil).decode(t, &again)
	if len(again.Items) != len(got.Items) {
		t.Errorf("%d events, then %d: a replica stored one twice: %+v", len(got.Items), len(again.Items), again.Items)
	}
	var deg evs
	admin.must(http.StatusOK, "GET", "/api/v1/namespaces/shop/events?kind=degrade", nil).decode(t, &deg)
	if len(deg.Items) != 2 || deg.Items[0].From != "1" || deg.Items[0].To != "0" || deg.Items[0].Node != "gw-1" || deg.Items[0].Rule != "coupon" {
		t.Errorf("degrade events (newest first) %+v", deg.Items)
	}
	var applyErr evs
	admin.must(http.StatusOK, "GET", "/api/v1/namespaces/shop/events?kind=apply_error&node=gw-1", nil).decode(t, &applyErr)
	if len(applyErr.Items) != 1 || !strings.Contains(string(applyErr.Items[0].Detail), "limits[0].rate") {
		t.Errorf("apply_error events %+v", applyErr.Items)
	}
	var page evs
	admin.must(http.StatusOK, "GET", "/api/v1/namespaces/shop/events?limit=1", nil).decode(t, &page)
	if len(page.Items) != 1 || page.Next == 0 {
		t.Fatalf("first page %+v", page)
	}
	var next evs
	admin.must(http.StatusOK, "GET", "/api/v1/namespaces/shop/events?limit=1&before="+strconv.FormatInt(page.Next, 10), nil).decode(t, &next)
	if len(next.Items) != 1 || next.Items[0].ID >= page.Items[0].ID {
		t.Errorf("second page %+v after %+v", next.Items, page.Items)
	}
	p := admin.must(http.StatusBadRequest, "GET", "/api/v1/namespaces/shop/events?kind=weather", nil).problem(t)
	if len(p.Errors) != 1 || p.Errors[0].Path != "kind" || !strings.Contains(p.Errors[0].Message, "weather") {
		t.Errorf("bad kind: %+v", p.Errors)
	}

	// The stream: a client reconnecting with Last-Event-ID gets what it
	// missed, then the live events.
	first := got.Items[len(got.Items)-1].ID // the oldest
	raw := httptest.NewServer(f.api.Handler())
	defer raw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", raw.URL+"/api/v1/namespaces/shop/stream", nil)
	req.Header.Set("Authorization", "Bearer "+f.token(admin, sluice.RoleViewer).bearer)
	req.Header.Set("Last-Event-ID", strconv.FormatInt(first, 10))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	ids := make(chan int64, 100)
	go func() {
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				ids <- n
			}
		}
		close(ids)
	}()
	var seen []int64
	for range len(got.Items) - 1 {
		select {
		case id := <-ids:
			seen = append(seen, id)
		case <-time.After(5 * time.Second):
			t.Fatalf("replayed ids %v, want the %d after %d", seen, len(got.Items)-1, first)
		}
	}
	for i, id := range seen {
		if id != got.Items[len(got.Items)-2-i].ID {
			t.Fatalf("replayed ids %v, want %+v in order after %d", seen, got.Items, first)
		}
	}
	// A live event: gw-1 leaves.
	if _, err := f.etcd.Delete(context.Background(), f.keys.Report("shop", "gw-1")); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-ids:
		if id <= seen[len(seen)-1] {
			t.Errorf("live event id %d not after %v", id, seen)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no live event after the node left")
	}
	admin.must(http.StatusBadRequest, "GET", "/api/v1/namespaces/shop/stream?lastEventId=x", nil)
}
