package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
)

// approvedChange sets the draft's routes (and degrade rules), opens a change
// as author and approves it as approver.
func approvedChange(t testing.TB, ns string, author, approver *client, routes []string, degrades ...string) int64 {
	t.Helper()
	rs, etag := author.draft(ns)
	rs.Routes, rs.Degrades = nil, nil
	for _, id := range routes {
		rs.Routes = append(rs.Routes, route(id))
	}
	for _, id := range degrades {
		rs.Degrades = append(rs.Degrades, api.Degrade{ID: id, Routes: routes[:1], Mode: api.DegradeMode("manual")})
	}
	author.must(http.StatusOK, "PUT", "/api/v1/namespaces/"+ns+"/draft", rs, "If-Match: "+etag)
	var ch sluice.Change
	author.must(http.StatusCreated, "POST", "/api/v1/namespaces/"+ns+"/changes", map[string]string{"title": "routes " + strings.Join(routes, ",")}).decode(t, &ch)
	approver.must(http.StatusOK, "POST", fmt.Sprintf("/api/v1/namespaces/%s/changes/%d/approve", ns, ch.ID), map[string]string{"comment": "lgtm"})
	return ch.ID
}

// register writes a node's registration bound to a new lease, as a gateway
// does, and returns the lease.
func (e *env) register(ns string, s api.NodeStatus) clientv3.LeaseID {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease, err := e.etcd.Grant(ctx, 60)
	if err != nil {
		e.t.Fatal(err)
	}
	e.update(ns, s, lease.ID)
	return lease.ID
}

// update rewrites a node's registration on its lease.
func (e *env) update(ns string, s api.NodeStatus, lease clientv3.LeaseID) {
	e.t.Helper()
	s.Namespace = ns
	s.UpdatedAt = time.Now().UTC()
	b, _ := json.Marshal(s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := e.etcd.Put(ctx, e.keys.Node(ns, s.NodeID), string(b), clientv3.WithLease(lease)); err != nil {
		e.t.Fatal(err)
	}
}

// eventually retries check every 20ms until it returns "" or within passes.
func eventually(t testing.TB, within time.Duration, check func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		msg := check()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *client) nodes(ns string) map[string]sluice.Node {
	c.t.Helper()
	var out struct{ Items []sluice.Node }
	c.must(http.StatusOK, "GET", "/api/v1/namespaces/"+ns+"/nodes", nil).decode(c.t, &out)
	m := map[string]sluice.Node{}
	for _, n := range out.Items {
		m[n.NodeID] = n
	}
	return m
}

func TestNodesLiveAndGone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{watch: true})
	admin := e.login("admin")
	admin.must(http.StatusCreated, "POST", "/api/v1/namespaces", map[string]string{"name": "shop"})
	viewer := e.mustUser(admin, "vera", sluice.RoleViewer)

	start := time.Now().UTC()
	l1 := e.register("shop", api.NodeStatus{NodeID: "n1", Address: "10.0.0.1:9000", Labels: map[string]string{"zone": "a"}, Build: "test"})
	e.register("shop", api.NodeStatus{NodeID: "n2", Address: "10.0.0.2:9000", Build: "test"})
	got := viewer.nodes("shop")
	if len(got) != 2 || !got["n1"].Live || !got["n2"].Live || got["n1"].Address != "10.0.0.1:9000" || got["n1"].Labels["zone"] != "a" {
		t.Fatalf("nodes %+v", got)
	}

	// The watcher records both, then sees n1's lease revoked.
	eventually(t, 10*time.Second, func() string {
		recs, err := e.history.FindNodeRecords(context.Background(), "shop", start)
		if err != nil || len(recs) != 2 {
			return fmt.Sprintf("history %v %v", recs, err)
		}
		return ""
	})
	if _, err := e.etcd.Revoke(context.Background(), l1); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() string {
		got = viewer.nodes("shop")
		n1 := got["n1"]
		if len(got) != 2 || n1.Live || !got["n2"].Live {
			return fmt.Sprintf("nodes %+v", got)
		}
		return ""
	})
	n1 := got["n1"]
	if n1.LastSeen.Before(start) || n1.LastSeen.After(time.Now().Add(time.Second)) || n1.Address != "10.0.0.1:9000" || n1.FirstSeen.After(n1.LastSeen) {
		t.Fatalf("gone node %+v (test started %s)", n1, start)
	}
	// A gone node is listed only within the window asked for.
	var out struct{ Items []sluice.Node }
	viewer.must(http.StatusOK, "GET", "/api/v1/namespaces/shop/nodes?goneSince="+time.Now().Add(time.Minute).UTC().Format(time.RFC3339), nil).decode(t, &out)
	if len(out.Items) != 1 || out.Items[0].NodeID != "n2" {
		t.Fatalf("nodes gone since a minute from now: %+v", out.Items)
	}
	viewer.must(http.StatusBadRequest, "GET", "/api/v1/namespaces/shop/nodes?goneSince=yesterday", nil)
}

func TestRollout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{watch: true})
	_, ed, ap := e.mustShop()
	v := publishRoutes(t, "shop", ed, ap, "a")
	p := e.waitPublished("shop", v.Number, 10*time.Second)

	leases := map[string]clientv3.LeaseID{}
	for _, id := range []string{"n1", "n2", "n3"} {
		leases[id] = e.register("shop", api.NodeStatus{NodeID: id, Address: "127.0.0.1:9000"})
	}
	time.Sleep(30 * time.Millisecond) // the nodes apply a little after the publication
	for _, id := range []string{"n1", "n2"} {
		e.update("shop", api.NodeStatus{NodeID: id, Address: "127.0.0.1:9000", Version: v.Number, Checksum: p.Checksum, AppliedAt: time.Now().UTC()}, leases[id])
	}
	var r sluice.Rollout
	eventually(t, 10*time.Second, func() string {
		r = sluice.Rollout{}
		ap.must(http.StatusOK, "GET", fmt.Sprintf("/api/v1/namespaces/shop/versions/%d/rollout", v.Number), nil).decode(t, &r)
		if len(r.Applied) != 2 {
			return fmt.Sprintf("rollout %+v", r)
		}
		return ""
	})
	if r.PublishedAt == nil || r.RuleSetAt == nil || !r.PublishedAt.Equal(p.PublishedAt) || r.CanaryAt != nil || r.Checksum != v.Checksum {
		t.Fatalf("rollout times %+v; etcd publishedAt %s", r, p.PublishedAt)
	}
	for _, a := range r.Applied {
		if a.DelaySeconds == nil || *a.DelaySeconds < 0.03 || *a.DelaySeconds > 10 || !a.Live || !a.Current || a.AppliedAt == nil || a.Checksum != p.Checksum {
			t.Fatalf("applied %+v (delay %v)", a, a.DelaySeconds)
		}
	}
	if len(r.Waiting) != 1 || r.Waiting[0].NodeID != "n3" || r.Waiting[0].Version != 0 {
		t.Fatalf("waiting %+v", r.Waiting)
	}
	ap.must(http.StatusNotFound, "GET", "/api/v1/namespaces/shop/versions/9/rollout", nil)
}

func TestOverride(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	_, ed, ap := e.mustShop()

	// Before any publication no degrade rule can be forced.
	ap.must(http.StatusBadRequest, "PUT", "/api/v1/namespaces/shop/nodes/n1/override", map[string]any{"degradeLevels": map[string]int{"coupon": 1}})
	id := approvedChange(t, "shop", ed, ap, []string{"a"}, "coupon")
	ap.must(http.StatusCreated, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/publish", id), nil)
	e.waitPublished("shop", 1, 10*time.Second)

	get := func(node string) *api.Override {
		t.Helper()
		res, err := e.etcd.Get(context.Background(), e.keys.Override("shop", node))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Kvs) == 0 {
			return nil
		}
		var o api.Override
		if err := json.Unmarshal(res.Kvs[0].Value, &o); err != nil {
			t.Fatal(err)
		}
		return &o
	}
	for _, tc := range []struct {
		desc string
		node string
		body any
		path string // a field error expected
	}{
		{"unknown rule", "n1", map[string]any{"degradeLevels": map[string]int{"nope": 1}}, "degradeLevels.nope"},
		{"level too high", "n1", map[string]any{"degradeLevels": map[string]int{"coupon": 3}}, "degradeLevels.coupon"},
		{"negative level", "n1", map[string]any{"degradeLevels": map[string]int{"coupon": -1}}, "degradeLevels.coupon"},
		{"nothing to override", "n1", map[string]any{"reason": "?"}, "degradeLevels"},
		{"ttl and expires", "n1", map[string]any{"drain": true, "ttl": "5m", "expires": time.Now().Add(time.Hour).Format(time.RFC3339)}, "ttl"},
		{"bad ttl", "n1", map[string]any{"drain": true, "ttl": "soon"}, "ttl"},
		{"negative ttl", "n1", map[string]any{"drain": true, "ttl": "-5m"}, "ttl"},
		{"ttl too long", "n1", map[string]any{"drain": true, "ttl": "10000h"}, "ttl"},
		{"expired", "n1", map[string]any{"drain": true, "expires": "2001-01-01T00:00:00Z"}, "expires"},
		{"bad node id", "n%201", map[string]any{"drain": true}, "id"},
		{"unknown field", "n1", map[string]any{"drain": true, "level": 2}, "level"},
		{"long reason", "n1", map[string]any{"drain": true, "reason": strings.Repeat("x", 1001)}, "reason"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p := ap.must(http.StatusBadRequest, "PUT", "/api/v1/namespaces/shop/nodes/"+tc.node+"/override", tc.body).problem(t)
			found := false
			for _, f := range p.Errors {
				found = found || f.Path == tc.path
			}
			if p.Code != sluice.EINVALID || !found {
				t.Fatalf("problem %+v, want a field error at %q", p, tc.path)
			}
			if o := get("n1"); o != nil {
				t.Fatalf("written anyway: %+v", o)
			}
		})
	}
	ed.must(http.StatusForbidden, "PUT", "/api/v1/namespaces/shop/nodes/n1/override", map[string]any{"drain": true})
	ed.must(http.StatusForbidden, "DELETE", "/api/v1/namespaces/shop/nodes/n1/override", nil)

	before := time.Now()
	var written api.Override
	ap.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/nodes/n1/override",
		map[string]any{"degradeLevels": map[string]int{"coupon": 2}, "drain": true, "ttl": "15m", "reason": "incident 42"}).decode(t, &written)
	o := get("n1")
	if o == nil || o.DegradeLevels["coupon"] != 2 || len(o.DegradeLevels) != 1 || !o.Drain || o.By != "ap" || o.Reason != "incident 42" ||
		o.Expires == nil || o.Expires.Before(before.Add(15*time.Minute-time.Second)) || o.Expires.After(time.Now().Add(15*time.Minute)) {
		t.Fatalf("etcd holds %+v", o)
	}
	if written.Revision == 0 || !written.Expires.Equal(*o.Expires) {
		t.Fatalf("response %+v", written)
	}
	// A second write replaces it; the listing shows it.
	ap.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/nodes/n1/override", map[string]any{"degradeLevels": map[string]int{"coupon": 0}})
	if o := get("n1"); o == nil || o.Drain || o.Expires != nil || o.DegradeLevels["coupon"] != 0 {
		t.Fatalf("etcd holds %+v", o)
	}
	e.register("shop", api.NodeStatus{NodeID: "n1"})
	if n := ap.nodes("shop")["n1"]; n.Override == nil || n.Override.Revision == 0 {
		t.Fatalf("node %+v", n)
	}

	ap.must(http.StatusNoContent, "DELETE", "/api/v1/namespaces/shop/nodes/n1/override", nil)
	if o := get("n1"); o != nil {
		t.Fatalf("still in etcd: %+v", o)
	}
	ap.must(http.StatusNotFound, "DELETE", "/api/v1/namespaces/shop/nodes/n1/override", nil)

	for action, want := range map[string]int{sluice.ActionNodeOverride: 2, sluice.ActionNodeOverrideDel: 1} {
		var evs struct{ Items []sluice.AuditEvent }
		ap.must(http.StatusOK, "GET", "/api/v1/audit?action="+action, nil).decode(t, &evs)
		if len(evs.Items) != want {
			t.Fatalf("%s: %d events, want %d", action, len(evs.Items), want)
		}
		ev := evs.Items[0]
		if ev.Actor != "ap" || ev.Object != "namespace/shop/node/n1" || ev.Namespace != "shop" || len(ev.Before) == 0 {
			t.Fatalf("%s: %+v", action, ev)
		}
	}
}

// canaryValue reads the canary key: nil when absent.
func (e *env) canaryValue(ns string, opts ...clientv3.OpOption) map[string]json.RawMessage {
	e.t.Helper()
	res, err := e.etcd.Get(context.Background(), e.keys.Canary(ns), opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(res.Kvs) == 0 {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(res.Kvs[0].Value, &m); err != nil {
		e.t.Fatal(err)
	}
	return m
}

// checkCanaryValue checks the documented shape: exactly version, selector
// and published, the last a valid api.Published of the same version.
func checkCanaryValue(t testing.TB, m map[string]json.RawMessage, version int64, selector map[string]string) {
	t.Helper()
	if len(m) != 3 {
		t.Fatalf("canary value has keys %v, want version, selector, published", m)
	}
	var v int64
	var sel map[string]string
	if json.Unmarshal(m["version"], &v) != nil || v != version || json.Unmarshal(m["selector"], &sel) != nil || fmt.Sprint(sel) != fmt.Sprint(selector) {
		t.Fatalf("canary value version %s selector %s", m["version"], m["selector"])
	}
	p, err := api.DecodePublished(m["published"])
	if err != nil || p.Version != version {
		t.Fatalf("canary's published document: %v %+v", err, p)
	}
}

func (e *env) waitCanary(ns string, present bool) map[string]json.RawMessage {
	e.t.Helper()
	var m map[string]json.RawMessage
	eventually(e.t, 10*time.Second, func() string {
		if m = e.canaryValue(ns); (m != nil) != present {
			return fmt.Sprintf("canary key present: %v", m != nil)
		}
		return ""
	})
	return m
}

func TestCanary(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	admin, ed, ap := e.mustShop()
	publishRoutes(t, "shop", ed, ap, "a")
	e.waitPublished("shop", 1, 10*time.Second)
	// No canary in progress is 204 (B4: not a 404 the console logs on every poll); no namespace is 404.
	ap.must(http.StatusNoContent, "GET", "/api/v1/namespaces/shop/canary", nil)
	ap.must(http.StatusNotFound, "GET", "/api/v1/namespaces/nope/canary", nil)
	ap.must(http.StatusNotFound, "POST", "/api/v1/namespaces/shop/canary/promote", nil)

	id := approvedChange(t, "shop", ed, ap, []string{"a", "b"})
	publish := fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/publish", id)
	for _, tc := range []struct {
		desc string
		body any
	}{
		{"empty selector", map[string]any{"canary": map[string]any{"selector": map[string]string{}}}},
		{"no selector", map[string]any{"canary": map[string]any{}}},
		{"bad label", map[string]any{"canary": map[string]any{"selector": map[string]string{"zone a": "x"}}}},
		{"bad value", map[string]any{"canary": map[string]any{"selector": map[string]string{"zone": "a,b"}}}},
		{"unknown field", map[string]any{"canary": map[string]any{"labels": map[string]string{"zone": "a"}}}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if p := ap.must(http.StatusBadRequest, "POST", publish, tc.body).problem(t); p.Code != sluice.EINVALID || len(p.Errors) == 0 {
				t.Fatalf("problem %+v", p)
			}
		})
	}
	ed.must(http.StatusForbidden, "POST", publish, map[string]any{"canary": map[string]any{"selector": map[string]string{"zone": "a"}}})

	sel := map[string]string{"zone": "a"}
	var v sluice.Version
	ap.must(http.StatusCreated, "POST", publish, map[string]any{"canary": map[string]any{"selector": sel}}).decode(t, &v)
	if v.Number != 2 || v.Publication == nil || v.Publication.Kind != sluice.PublishCanary || fmt.Sprint(v.Publication.Selector) != fmt.Sprint(sel) {
		t.Fatalf("version %+v publication %+v", v, v.Publication)
	}
	checkCanaryValue(t, e.waitCanary("shop", true), 2, sel)
	e.waitPublished("shop", 1, time.Second) // the ruleset key is unchanged

	// The canary view lists the live nodes its selector matches.
	e.register("shop", api.NodeStatus{NodeID: "a1", Labels: map[string]string{"zone": "a"}, Version: 2})
	e.register("shop", api.NodeStatus{NodeID: "a2", Labels: map[string]string{"zone": "a", "rack": "7"}, Version: 1, LastApplyError: "boom"})
	e.register("shop", api.NodeStatus{NodeID: "b1", Labels: map[string]string{"zone": "b"}, Version: 1})
	var view struct {
		sluice.Canary
		Nodes []struct {
			NodeID         string
			Version        int64
			Applied        bool
			LastApplyError string
		}
	}
	ap.must(http.StatusOK, "GET", "/api/v1/namespaces/shop/canary", nil).decode(t, &view)
	if view.Version != 2 || view.State != sluice.CanaryActive || view.CreatedBy != "ap" || len(view.Nodes) != 2 ||
		view.Nodes[0].NodeID != "a1" || !view.Nodes[0].Applied || view.Nodes[1].NodeID != "a2" || view.Nodes[1].Applied || view.Nodes[1].LastApplyError != "boom" {
		t.Fatalf("canary view %+v", view)
	}
	if view.Publication == nil || view.Publication.State != sluice.PublicationPublished {
		t.Fatalf("canary publication %+v", view.Publication)
	}

	// One canary at a time; no plain publication over it either.
	id3 := approvedChange(t, "shop", ed, ap, []string{"a", "b", "c"})
	publish3 := fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/publish", id3)
	for _, body := range []any{map[string]any{"canary": map[string]any{"selector": map[string]string{"zone": "b"}}}, nil} {
		if p := ap.must(http.StatusConflict, "POST", publish3, body).problem(t); !strings.Contains(p.Detail, "canary") {
			t.Fatalf("409 detail %q", p.Detail)
		}
	}

	// Promote: the ruleset key gets version 2 and the canary key goes, in
	// one transaction.
	var ended sluice.Canary
	ap.must(http.StatusOK, "POST", "/api/v1/namespaces/shop/canary/promote", map[string]string{"reason": "zone a is fine"}).decode(t, &ended)
	if ended.State != sluice.CanaryPromoted || ended.EndedBy != "ap" || ended.Reason != "zone a is fine" || ended.Publication.Kind != sluice.PublishPromote {
		t.Fatalf("promoted %+v", ended)
	}
	p := e.waitPublished("shop", 2, 10*time.Second)
	if p.Checksum != v.Checksum {
		t.Fatalf("ruleset %+v", p)
	}
	e.waitCanary("shop", false)
	ap.must(http.StatusNoContent, "GET", "/api/v1/namespaces/shop/canary", nil)
	ap.must(http.StatusNotFound, "POST", "/api/v1/namespaces/shop/canary/abort", nil)

	// Abort: the change opened on version 2 is now publishable as a canary;
	// aborting deletes the key and leaves the ruleset key at version 2.
	ap.must(http.StatusCreated, "POST", publish3, map[string]any{"canary": map[string]any{"selector": map[string]string{"zone": "b"}}})
	checkCanaryValue(t, e.waitCanary("shop", true), 3, map[string]string{"zone": "b"})
	ed.must(http.StatusForbidden, "POST", "/api/v1/namespaces/shop/canary/abort", nil)
	ap.must(http.StatusOK, "POST", "/api/v1/namespaces/shop/canary/abort", nil).decode(t, &ended)
	if ended.State != sluice.CanaryAborted || ended.Version != 3 {
		t.Fatalf("aborted %+v", ended)
	}
	e.waitCanary("shop", false)
	e.waitPublished("shop", 2, time.Second)
	var r sluice.Rollout
	ap.must(http.StatusOK, "GET", "/api/v1/namespaces/shop/versions/3/rollout", nil).decode(t, &r)
	if r.CanaryAt == nil || r.RuleSetAt != nil || !r.PublishedAt.Equal(*r.CanaryAt) {
		t.Fatalf("rollout of the aborted canary %+v", r)
	}

	for _, action := range []string{sluice.ActionCanaryStart, sluice.ActionCanaryPromote, sluice.ActionCanaryAbort} {
		var evs struct{ Items []sluice.AuditEvent }
		ap.must(http.StatusOK, "GET", "/api/v1/audit?namespace=shop&action="+action, nil).decode(t, &evs)
		if len(evs.Items) == 0 || evs.Items[0].Object != "namespace/shop/canary" || evs.Items[0].Actor != "ap" {
			t.Fatalf("%s: %+v", action, evs.Items)
		}
	}

	// An emergency rollback publishes to every node and ends a canary in
	// progress (its key deleted after the ruleset write).
	id4 := approvedChange(t, "shop", ed, ap, []string{"a", "d"})
	ap.must(http.StatusCreated, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/publish", id4), map[string]any{"canary": map[string]any{"selector": sel}})
	e.waitCanary("shop", true)
	admin.must(http.StatusCreated, "POST", "/api/v1/namespaces/shop/versions/1/rollback", map[string]any{"reason": "all bad", "emergency": true})
	e.waitPublished("shop", 5, 10*time.Second)
	e.waitCanary("shop", false)
	ap.must(http.StatusNoContent, "GET", "/api/v1/namespaces/shop/canary", nil)
	var evs struct{ Items []sluice.AuditEvent }
	ap.must(http.StatusOK, "GET", "/api/v1/audit?namespace=shop&action="+sluice.ActionCanaryAbort, nil).decode(t, &evs)
	if len(evs.Items) != 2 || evs.Items[0].Actor != "admin" || !strings.Contains(string(evs.Items[0].After), "emergency rollback") {
		t.Fatalf("canary ended by the rollback: %+v", evs.Items)
	}
	var verify sluice.AuditVerification
	ap.must(http.StatusOK, "GET", "/api/v1/audit/verify", nil).decode(t, &verify)
	if !verify.OK {
		t.Fatalf("audit chain %+v", verify)
	}
}

func TestCanaryWhileEtcdIsDown(t *testing.T) {
	t.Parallel()
	emb := etcdtest.Start(t)
	e := newEnv(t, envOptions{endpoints: emb.Endpoints, opTimeout: 500 * time.Millisecond})
	_, ed, ap := e.mustShop()
	publishRoutes(t, "shop", ed, ap, "a")
	e.waitPublished("shop", 1, 10*time.Second)

	emb.Stop()
	id := approvedChange(t, "shop", ed, ap, []string{"a", "b"})
	sel := map[string]string{"zone": "a"}
	ap.must(http.StatusCreated, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/publish", id), map[string]any{"canary": map[string]any{"selector": sel}})
	var can sluice.Canary
	eventually(t, 10*time.Second, func() string {
		ap.must(http.StatusOK, "GET", "/api/v1/namespaces/shop/canary", nil).decode(t, &can)
		if p := can.Publication; p.State != sluice.PublicationPending || p.Attempts == 0 || p.LastError == "" {
			return fmt.Sprintf("canary publication %+v", p)
		}
		return ""
	})
	ap.must(http.StatusOK, "POST", "/api/v1/namespaces/shop/canary/promote", nil).decode(t, &can)
	if can.Publication.State != sluice.PublicationPending || can.Publication.Kind != sluice.PublishPromote {
		t.Fatalf("promotion %+v", can.Publication)
	}

	emb.Restart()
	e.waitPublished("shop", 2, 30*time.Second)
	e.waitCanary("shop", false)
	// In order: the canary key held version 2 just before the promotion
	// wrote the ruleset key and deleted it. The outcome is recorded in
	// Postgres just after the write that waitPublished saw.
	var vs struct{ Items []sluice.Version }
	eventually(t, 10*time.Second, func() string {
		ap.must(http.StatusOK, "GET", "/api/v1/namespaces/shop/versions", nil).decode(t, &vs)
		if p := vs.Items[0].Publication; p.State != sluice.PublicationPublished {
			return fmt.Sprintf("version %d's publication %+v", vs.Items[0].Number, p)
		}
		return ""
	})
	pub := vs.Items[0].Publication
	if vs.Items[0].Number != 2 || pub.Kind != sluice.PublishPromote || pub.State != sluice.PublicationPublished || pub.EtcdRevision == nil {
		t.Fatalf("version 2's publication %+v", pub)
	}
	checkCanaryValue(t, e.canaryValue("shop", clientv3.WithRev(*pub.EtcdRevision-1)), 2, sel)
}
