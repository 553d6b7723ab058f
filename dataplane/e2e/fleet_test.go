package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
)

// fleetRules: a per-user limit on route echo, a manual degrade rule on it,
// and a breaker on route flaky (an upstream that fails on demand) that
// opens after 3 consecutive failures and probes after 1s.
func fleetRules(up, flaky string, extra string) string {
	return fmt.Sprintf(`{"namespace": %q,
  "routes": [
    {"id": "echo", "match": {"pathPrefix": "/"}, "upstream": {"targets": [{"url": %q}], "timeout": "5s"}},
    {"id": "flaky", "match": {"pathPrefix": "/flaky"}, "upstream": {"targets": [{"url": %q}], "timeout": "5s"}}],
  "limits": [{"id": "per-user", "routes": ["echo"], "key": ["header:X-User"], "algorithm": "token_bucket", "rate": 5, "period": "1h", "burst": 5}%s],
  "breakers": [{"id": "flaky-breaker", "routes": ["flaky"], "window": "10s", "consecutiveFailures": 3, "openFor": "1s", "maxOpenFor": "1s", "halfOpenProbes": 1}],
  "degrades": [{"id": "echo-degrade", "routes": ["echo"], "mode": "manual", "level": 0, "fallback": {"status": 503}}]}`,
		ns, up, flaky, extra)
}

// forgeReports writes, as someone who can write the report keys but not
// the registrations, a report of gw-zz (never registered) and one under
// gw-a's key, each bound to a lease of the forger's.
func forgeReports(t *testing.T, h *harness, version int64) {
	t.Helper()
	c := h.etcdClient()
	defer c.Close()
	ctx := context.Background()
	lease, err := c.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for _, f := range []struct {
		node                  string
		total, rejected, e5xx int64
	}{{"gw-zz", 380047, 266033, 0}, {"gw-a", 1450000, 0, 1305000}} {
		r := &api.Report{NodeID: f.node, BootID: "forged", BootAt: now.Add(-time.Hour), Seq: 1, At: now, IntervalSeconds: 1, Version: version,
			Requests: api.RequestCounts{Total: f.total, Rejected: f.rejected, Class4xx: f.rejected, Class5xx: f.e5xx, Class2xx: f.total - f.rejected - f.e5xx},
			Limits:   []api.LimitCounts{{Rule: "per-user", Allowed: f.total - f.rejected, Rejected: f.rejected}}}
		b, _ := json.Marshal(r)
		if _, err := c.Put(ctx, api.Keys{}.Report(ns, f.node), string(b), clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
	}
}

// refusedReports reads sluice_admin_reports_refused_total{reason} from
// the control plane's /metrics.
func (h *harness) refusedReports(reason string) (int64, error) {
	res, err := statusClient.Get(h.adminURL + "/metrics")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	prefix := `sluice_admin_reports_refused_total{reason="` + reason + `"} `
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			f, err := strconv.ParseFloat(v, 64)
			return int64(f), err
		}
	}
	return 0, sc.Err()
}

// limitDecisions reads sluice_limit_decisions_total{rule,decision} from a
// gateway's /metrics, summed over the series' other labels (class,
// variant).
func (g *gateway) limitDecisions(rule, decision string) (int64, error) {
	res, err := statusClient.Get("http://" + g.admin + "/metrics")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	wantRule, wantDecision := fmt.Sprintf(`rule=%q`, rule), fmt.Sprintf(`decision=%q`, decision)
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var sum float64
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "sluice_limit_decisions_total{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		found := 0
		for _, l := range strings.Split(labels, ",") {
			if l == wantRule || l == wantDecision {
				found++
			}
		}
		if found != 2 {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return 0, err
		}
		sum += f
	}
	return int64(sum), sc.Err()
}

type statsResp struct {
	Series []struct {
		Rule   string      `json:"rule"`
		Kind   string      `json:"kind"`
		Node   string      `json:"node"`
		Points [][]float64 `json:"points"`
	} `json:"series"`
}

// statsTotals sums a rule's allowed and rejected over every point of the
// last hour, failing on a negative point.
func (h *harness) statsTotals(rule, node string) (allowed, rejected int64, err error) {
	path := "/api/v1/namespaces/" + ns + "/stats?rule=" + rule
	if node != "" {
		path += "&node=" + node
	}
	r, err := h.author.expect(http.StatusOK, "GET", path, nil)
	if err != nil {
		return 0, 0, err
	}
	var st statsResp
	if err := r.decode(&st); err != nil {
		return 0, 0, err
	}
	for _, s := range st.Series {
		if s.Rule != rule || s.Node != node {
			continue
		}
		for _, p := range s.Points {
			for i, v := range p[1:] {
				if v < 0 {
					return 0, 0, fmt.Errorf("negative point %v (column %d) in %s", p, i+1, r.body)
				}
			}
			allowed += int64(p[1])
			rejected += int64(p[2])
		}
	}
	return allowed, rejected, nil
}

type event struct {
	ID     int64  `json:"id"`
	Kind   string `json:"kind"`
	Node   string `json:"node"`
	Rule   string `json:"rule"`
	From   string `json:"from"`
	To     string `json:"to"`
	Actor  string `json:"actor"`
	Detail json.RawMessage
}

func (h *harness) events(kind string) ([]event, error) {
	r, err := h.author.expect(http.StatusOK, "GET", "/api/v1/namespaces/"+ns+"/events?limit=1000&kind="+kind, nil)
	if err != nil {
		return nil, err
	}
	var out struct {
		Items []event `json:"items"`
	}
	return out.Items, r.decode(&out)
}

// sse is a stream client: it records every message it reads.
type sse struct {
	mu     sync.Mutex
	events []event // `event` messages, in order
	types  map[string]int
	cancel context.CancelFunc
	done   chan struct{}
}

// openStream connects to the stream (resuming after lastID when not 0).
func (h *harness) openStream(tb testing.TB, lastID int64) *sse {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", h.adminURL+"/api/v1/namespaces/"+ns+"/stream", nil)
	if lastID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
	}
	c := &http.Client{Jar: h.author.http.Jar}
	res, err := c.Do(req)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(res.Body)
		cancel()
		tb.Fatalf("stream: %s %s: %s", res.Status, res.Header.Get("Content-Type"), b)
	}
	s := &sse{types: map[string]int{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		var typ, data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				s.mu.Lock()
				s.types[typ]++
				if typ == "event" {
					var e event
					if json.Unmarshal([]byte(data), &e) == nil {
						s.events = append(s.events, e)
					}
				}
				s.mu.Unlock()
				typ, data = "", ""
			case strings.HasPrefix(line, "event: "):
				typ = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				data = line[len("data: "):]
			}
		}
	}()
	return s
}

func (s *sse) close() { s.cancel(); <-s.done }

func (s *sse) snapshot() ([]event, map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	types := map[string]int{}
	for k, v := range s.types {
		types[k] = v
	}
	return append([]event(nil), s.events...), types
}

// publishCanary publishes doc as a canary for selector with analysis.
func (h *harness) publishCanary(tb testing.TB, doc, title string, selector map[string]string, analysis map[string]any) int64 {
	tb.Helper()
	base := "/api/v1/namespaces/" + ns
	r := h.author.must(http.StatusOK, "GET", base+"/draft", nil)
	h.author.must(http.StatusOK, "PUT", base+"/draft", doc, "If-Match: "+r.header.Get("ETag"))
	var ch struct {
		ID int64 `json:"id"`
	}
	if err := h.author.must(http.StatusCreated, "POST", base+"/changes", map[string]string{"title": title}).decode(&ch); err != nil {
		tb.Fatal(err)
	}
	cb := fmt.Sprintf("%s/changes/%d", base, ch.ID)
	h.approver.must(http.StatusOK, "POST", cb+"/approve", map[string]string{"comment": "e2e"})
	var v struct {
		Number int64 `json:"number"`
	}
	body := map[string]any{"canary": map[string]any{"selector": selector, "analysis": analysis}}
	if err := h.approver.must(http.StatusCreated, "POST", cb+"/publish", body).decode(&v); err != nil {
		tb.Fatal(err)
	}
	return v.Number
}

type auditItem struct {
	Actor  string          `json:"actor"`
	Action string          `json:"action"`
	After  json.RawMessage `json:"after"`
}

func (h *harness) audit(action string) ([]auditItem, error) {
	r, err := h.approver.expect(http.StatusOK, "GET", "/api/v1/audit?namespace="+ns+"&action="+action, nil)
	if err != nil {
		return nil, err
	}
	var out struct {
		Items []auditItem `json:"items"`
	}
	return out.Items, r.decode(&out)
}

// TestFleetReportsStatsEventsCanary: three gateways report to the control
// plane (--report-interval 1s); /stats counts per rule equal the gateways'
// own sluice_limit_decisions_total exactly, also across a node restart
// (which counts from zero, never negative); a degrade going to level 1 and
// back and a breaker opening and closing each appear once as events, with
// node and rule; the stream resumes with Last-Event-ID; a canary that
// rejects everything is aborted by the analysis within one window, and a
// harmless one is promoted (onPass: promote), both audited as sluice.
func TestFleetReportsStatsEventsCanary(t *testing.T) {
	t.Setenv("SLUICE_REPORT_INTERVAL", "1s")
	h := newHarness(t)
	var failing atomic.Bool
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	}))
	t.Cleanup(flaky.Close)
	h.createNamespace()
	v1 := h.mustPublish(fleetRules(h.upstream.URL, flaky.URL, ""), "fleet rules")
	gws := []*gateway{h.startGateway("gw-a"), h.startGateway("gw-b"), h.startGateway("gw-c")}
	h.waitVersion(v1, 30*time.Second, gws...)
	stream := h.openStream(t, 0)
	defer stream.close()

	// Traffic: 6 requests per user (5 allowed, 1 rejected), several users.
	traffic := func(g *gateway, users int) {
		for range users {
			u := freshUser()
			for range 6 {
				if _, err := g.get(u); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for i, g := range gws {
		traffic(g, 3+i)
	}
	// counters: what the gateways' own metrics say, plus the counts of
	// boots that ended (a restarted node's counters start from zero).
	var ended struct{ allow, reject int64 }
	counters := func() (allow, reject int64, err error) {
		allow, reject = ended.allow, ended.reject
		for _, g := range gws {
			a, err := g.limitDecisions("per-user", "allow")
			if err != nil {
				return 0, 0, err
			}
			r, err := g.limitDecisions("per-user", "reject")
			if err != nil {
				return 0, 0, err
			}
			allow, reject = allow+a, reject+r
		}
		return allow, reject, nil
	}
	statsMatch := func(what string) {
		t.Helper()
		waitFor(t, 30*time.Second, what, func() error {
			wa, wr, err := counters()
			if err != nil {
				return err
			}
			a, r, err := h.statsTotals("per-user", "")
			if err != nil {
				return err
			}
			if a != wa || r != wr {
				return fmt.Errorf("stats allowed %d rejected %d; gateways' sluice_limit_decisions_total allow %d reject %d", a, r, wa, wr)
			}
			return nil
		})
	}
	statsMatch("stats equal the gateways' counters")
	// The red team's forged reports, written straight to etcd: under a node
	// id that never registered (gw-zz: 380,047 requests, 70% rejected), and
	// under gw-a's report key bound to another lease (1.45 M requests at
	// 90% 5xx). The control plane refuses both, by reason; the stats still
	// equal the gateways' own counters.
	forgeReports(t, h, v1)
	waitFor(t, 15*time.Second, "the forged reports refused", func() error {
		for _, reason := range []string{"unregistered", "lease_mismatch"} {
			if n, err := h.refusedReports(reason); err != nil || n < 1 {
				return fmt.Errorf("sluice_admin_reports_refused_total{reason=%q} = %d (%v), want >= 1", reason, n, err)
			}
		}
		return nil
	})
	statsMatch("stats equal the gateways' counters after forged reports")
	if a, r, err := h.statsTotals("per-user", "gw-a"); err != nil || a != 15 || r != 3 {
		t.Errorf("gw-a's own series: allowed %d rejected %d (%v), want 15 and 3", a, r, err)
	}
	var nodes struct {
		Items []struct {
			NodeID       string `json:"nodeId"`
			VersionState string `json:"versionState"`
			Report       *struct {
				Seq int64 `json:"seq"`
			} `json:"report"`
		} `json:"items"`
	}
	if err := h.author.must(http.StatusOK, "GET", "/api/v1/namespaces/"+ns+"/nodes", nil).decode(&nodes); err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 3 {
		t.Fatalf("nodes %+v", nodes.Items)
	}
	for _, n := range nodes.Items {
		if n.VersionState != "current" || n.Report == nil || n.Report.Seq == 0 {
			t.Errorf("node %s: version state %q, report %+v", n.NodeID, n.VersionState, n.Report)
		}
	}

	// A node restart: its counters start from zero; stats keep the old boot.
	ca, _ := gws[2].limitDecisions("per-user", "allow")
	cr, _ := gws[2].limitDecisions("per-user", "reject")
	waitFor(t, 10*time.Second, "gw-c's last counts reported", func() error {
		a, r, err := h.statsTotals("per-user", "gw-c")
		if err == nil && (a != ca || r != cr) {
			err = fmt.Errorf("gw-c stats %d/%d, counters %d/%d", a, r, ca, cr)
		}
		return err
	})
	gws[2].p.stop(10 * time.Second)
	ended.allow, ended.reject = ca, cr
	h.startGateway("gw-c")
	traffic(gws[2], 2)
	traffic(gws[0], 1)
	statsMatch("stats equal the counters after gw-c restarted")

	// A degrade to level 1 and back on gw-a (an override), and a breaker
	// opening and closing on gw-b.
	ovr := "/api/v1/namespaces/" + ns + "/nodes/gw-a/override"
	h.approver.must(http.StatusOK, "PUT", ovr, map[string]any{"degradeLevels": map[string]int{"echo-degrade": 1}, "ttl": "10m", "reason": "e2e"})
	// (Level 1 sheds a share of clients by key; the test's one client
	// address may fall either side, so the level is checked in the events.)
	time.Sleep(2500 * time.Millisecond) // the override lands and a report at level 1 goes out
	h.approver.must(http.StatusNoContent, "DELETE", ovr, nil)
	failing.Store(true)
	for range 3 {
		req, _ := http.NewRequest("GET", "http://"+gws[1].listen+"/flaky", nil)
		if res, err := trafficClient.Do(req); err == nil {
			res.Body.Close()
		}
	}
	time.Sleep(1500 * time.Millisecond) // open for a report or two
	failing.Store(false)
	waitFor(t, 10*time.Second, "gw-b's breaker closes", func() error {
		req, _ := http.NewRequest("GET", "http://"+gws[1].listen+"/flaky", nil)
		res, err := trafficClient.Do(req)
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", res.StatusCode)
		}
		return nil
	})
	count := func(evs []event, kind, node, rule, from, to string) int {
		n := 0
		for _, e := range evs {
			if e.Kind == kind && e.Node == node && e.Rule == rule && e.From == from && e.To == to {
				n++
			}
		}
		return n
	}
	waitFor(t, 15*time.Second, "degrade and breaker events", func() error {
		evs, err := h.events("degrade,breaker")
		if err != nil {
			return err
		}
		for _, c := range []struct{ kind, node, rule, from, to string }{
			{"degrade", "gw-a", "echo-degrade", "0", "1"}, {"degrade", "gw-a", "echo-degrade", "1", "0"},
			{"breaker", "gw-b", "flaky-breaker", "closed", "open"}, {"breaker", "gw-b", "flaky-breaker", "half-open", "closed"},
		} {
			if n := count(evs, c.kind, c.node, c.rule, c.from, c.to); n != 1 {
				return fmt.Errorf("%d events %+v, want 1; events %+v", n, c, evs)
			}
		}
		if len(evs) != 5 { // closed→open, open→half-open, half-open→closed, 0→1, 1→0
			return fmt.Errorf("%d degrade and breaker events, want 5: %+v", len(evs), evs)
		}
		return nil
	})
	if evs, err := h.events("node_joined,node_left,override"); err != nil {
		t.Fatal(err)
	} else if j, l, o := count(evs, "node_joined", "gw-c", "", "", ""), count(evs, "node_left", "gw-c", "", "", ""), count(evs, "override", "gw-a", "", "", ""); j != 2 || l != 1 || o != 2 {
		t.Errorf("gw-c joined %d left %d, gw-a overrides %d; want 2, 1, 2: %+v", j, l, o, evs)
	}

	// The stream saw the events; a client that reconnects with
	// Last-Event-ID gets those it missed.
	waitFor(t, 10*time.Second, "the stream's events", func() error {
		evs, types := stream.snapshot()
		if count(evs, "breaker", "gw-b", "flaky-breaker", "half-open", "closed") != 1 || types["stats"] == 0 || types["node"] == 0 {
			return fmt.Errorf("types %v, events %+v", types, evs)
		}
		return nil
	})
	seen, _ := stream.snapshot()
	stream.close()
	last := seen[len(seen)-1].ID
	v2 := h.mustPublish(fleetRules(h.upstream.URL, flaky.URL, `, {"id": "extra", "routes": ["echo"], "key": ["ip"], "algorithm": "token_bucket", "rate": 1000, "period": "1s"}`), "while disconnected")
	h.waitVersion(v2, 30*time.Second, gws...)
	resumed := h.openStream(t, last)
	waitFor(t, 10*time.Second, "missed publish event after reconnecting", func() error {
		evs, _ := resumed.snapshot()
		for _, e := range evs {
			if e.ID <= last {
				return fmt.Errorf("replayed event %d at or before Last-Event-ID %d", e.ID, last)
			}
			if e.Kind == "publish" && e.Actor == "approver" {
				return nil
			}
		}
		return fmt.Errorf("events after %d: %+v", last, evs)
	})
	defer resumed.close()

	// Canaries, with traffic on every node meanwhile (fresh users: the
	// per-user limit rejects nothing).
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, g := range gws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = g.get(freshUser())
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	analysis := map[string]any{"window": "10s", "maxRejectRateIncrease": 0.05, "max5xxRateIncrease": 0.05, "minRequests": 20, "onPass": "promote"}
	bad := fleetRules(h.upstream.URL, flaky.URL, `, {"id": "everything", "routes": ["echo"], "key": ["global"], "algorithm": "fixed_window", "rate": 1, "period": "1h"}`)
	start := time.Now()
	h.publishCanary(t, bad, "rejects everything", map[string]string{"node": "gw-c"}, analysis)
	waitFor(t, 45*time.Second, "the rejecting canary aborted by the analysis", func() error {
		items, err := h.audit("canary.abort")
		if err != nil {
			return err
		}
		if len(items) != 1 || items[0].Actor != "sluice" || !strings.Contains(string(items[0].After), "rejectRateIncrease") {
			return fmt.Errorf("canary.abort audit %+v", items)
		}
		return nil
	})
	t.Logf("rejecting canary aborted %s after publishing (window 10s)", time.Since(start).Round(time.Second))
	if _, types := resumed.snapshot(); types["publication"] == 0 {
		t.Errorf("the stream sent no publication message for the canary's publications: %v", types)
	}
	if evs, err := h.events("canary"); err != nil || count(evs, "canary", "", "", "", "abort") != 1 {
		t.Errorf("canary events %+v %v, want one abort", evs, err)
	}
	good := fleetRules(h.upstream.URL, flaky.URL, `, {"id": "roomy", "routes": ["echo"], "key": ["ip"], "algorithm": "token_bucket", "rate": 100000, "period": "1s"}`)
	v4 := h.publishCanary(t, good, "harmless", map[string]string{"node": "gw-c"}, analysis)
	waitFor(t, 45*time.Second, "the harmless canary promoted by the analysis", func() error {
		items, err := h.audit("canary.promote")
		if err != nil {
			return err
		}
		if len(items) != 1 || items[0].Actor != "sluice" {
			return fmt.Errorf("canary.promote audit %+v", items)
		}
		return nil
	})
	h.waitVersion(v4, 30*time.Second, gws...)
}
