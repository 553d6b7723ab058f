package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// The limit bursts of the scenario: a generous one, a tight one, and the one
// published while etcd is down.
const (
	generous = 20
	tight    = 2
	offline  = 6
)

// TestGatewaysFollowEtcd runs the whole path: sluice-admin (Postgres) →
// etcd → two sluice-gateway processes, through publish, a tighter limit, a
// rollback, an etcd outage with a node restart and a publication queued
// during it, and an operator override that reaches one node.
func TestGatewaysFollowEtcd(t *testing.T) {
	start := time.Now()
	h := newHarness(t)
	t.Logf("harness up in %s", time.Since(start).Round(time.Millisecond))

	// 1. Publish a generous limit, reviewed by a second user; both nodes run it.
	h.createNamespace()
	v1 := h.mustPublish(h.rules(generous), "generous limit")
	if v1 != 1 {
		t.Fatalf("first version is %d", v1)
	}
	// A node needs a published rule set to start (see
	// TestGatewayStartsBeforeFirstPublish).
	h.waitPublished(v1, 10*time.Second)
	a := h.startGateway("gw-a")
	b := h.startGateway("gw-b")
	h.waitVersion(v1, 10*time.Second, a, b)
	for _, g := range []*gateway{a, b} {
		expectBurst(t, g, generous)
		st, err := g.status()
		if err != nil || st.Components.Etcd.State != "connected" || st.LastApplyError != "" {
			t.Fatalf("%s status %+v, %v", g.id, st, err)
		}
	}
	t.Logf("step 1 (publish, both nodes serve) done at %s", time.Since(start).Round(time.Millisecond))

	// 2. Tighten the limit; both nodes enforce it.
	v2 := h.mustPublish(h.rules(tight), "tight limit")
	h.waitVersion(v2, 10*time.Second, a, b)
	for _, g := range []*gateway{a, b} {
		expectBurst(t, g, tight)
	}
	t.Logf("step 2 (tighten) done at %s", time.Since(start).Round(time.Millisecond))

	// 3. Roll back to version 1: a change like any other.
	var rb struct {
		Change *struct {
			ID int64 `json:"id"`
		} `json:"change"`
	}
	if err := h.author.must(http.StatusCreated, "POST", fmt.Sprintf("/api/v1/namespaces/%s/versions/%d/rollback", ns, v1),
		map[string]any{"reason": "too tight"}).decode(&rb); err != nil || rb.Change == nil {
		t.Fatalf("rollback: %v %+v", err, rb)
	}
	v3, err := h.approveAndPublish(rb.Change.ID)
	if err != nil {
		t.Fatal(err)
	}
	h.waitVersion(v3, 10*time.Second, a, b)
	for _, g := range []*gateway{a, b} {
		expectBurst(t, g, generous)
	}
	t.Logf("step 3 (rollback) done at %s", time.Since(start).Round(time.Millisecond))

	// 4. etcd goes away: both nodes keep serving and enforcing version 3.
	etcdDown := time.Now()
	h.etcd.Stop()
	for _, g := range []*gateway{a, b} {
		expectBurst(t, g, generous)
		if st, err := g.status(); err != nil || st.Version != v3 {
			t.Fatalf("%s status %+v, %v while etcd is down, want version %d", g.id, st, err, v3)
		}
	}
	t.Logf("step 4 (etcd down, nodes serve) done at %s", time.Since(start).Round(time.Millisecond))

	// 5. One node restarts while etcd is down: it boots from its state dir.
	if !b.p.stop(10 * time.Second) {
		t.Errorf("%s did not exit within 10s of SIGTERM", b.id)
	}
	b = h.startGateway("gw-b")
	st, err := b.status()
	if err != nil {
		t.Fatal(err)
	}
	if st.Version != v3 || st.Components.Etcd.State != "booted-from-cache" {
		t.Fatalf("restarted %s: version %d, etcd state %q; want %d, booted-from-cache", b.id, st.Version, st.Components.Etcd.State, v3)
	}
	expectBurst(t, b, generous)
	expectBurst(t, a, generous)
	t.Logf("step 5 (restart from the state dir) done at %s", time.Since(start).Round(time.Millisecond))

	// 6. A publication made while etcd is down stays pending, then lands.
	v4 := h.mustPublish(h.rules(offline), "published during the outage")
	if p := h.publicationOf(v4); p.State != "pending" {
		t.Fatalf("version %d publication %+v while etcd is down, want pending", v4, p)
	}
	// Give the publisher a moment to fail against the dead etcd, so the
	// pending state is the outcome of an attempt and not only of the queue.
	waitFor(t, 15*time.Second, "the publisher tries and fails", func() error {
		p := h.publicationOf(v4)
		if p.State != "pending" {
			t.Fatalf("version %d publication %+v while etcd is down, want pending", v4, p)
		}
		if p.Attempts == 0 {
			return fmt.Errorf("%+v", p)
		}
		return nil
	})
	for _, g := range []*gateway{a, b} {
		if st, err := g.status(); err != nil || st.Version != v3 {
			t.Fatalf("%s status %+v, %v, want version %d", g.id, st, err, v3)
		}
	}
	// By now the watch of gw-a has been silent long enough to count as broken
	// (three missed heartbeats); gw-b never reached etcd since it booted.
	waitFor(t, 20*time.Second, "gw-a reports etcd reconnecting", func() error {
		st, err := a.status()
		if err != nil {
			return err
		}
		if st.Components.Etcd.State != "reconnecting" {
			return fmt.Errorf("etcd state %q", st.Components.Etcd.State)
		}
		return nil
	})
	if st, err := b.status(); err != nil || st.Components.Etcd.State != "booted-from-cache" {
		t.Fatalf("gw-b status %+v, %v; want etcd booted-from-cache", st, err)
	}
	t.Logf("etcd down for %s", time.Since(etcdDown).Round(time.Millisecond))
	h.etcd.Restart()
	h.waitVersion(v4, 45*time.Second, a, b)
	waitFor(t, 10*time.Second, "publication recorded", func() error {
		if p := h.publicationOf(v4); p.State != "published" {
			return fmt.Errorf("%+v", p)
		}
		return nil
	})
	for _, g := range []*gateway{a, b} {
		expectBurst(t, g, offline)
		waitFor(t, 10*time.Second, g.id+" reports etcd connected", func() error {
			st, err := g.status()
			if err != nil {
				return err
			}
			if st.Components.Etcd.State != "connected" {
				return fmt.Errorf("etcd state %q", st.Components.Etcd.State)
			}
			return nil
		})
	}
	t.Logf("step 6 (pending publication lands after etcd restarts) done at %s", time.Since(start).Round(time.Millisecond))

	// The registry lists both nodes with the applied version.
	waitFor(t, 15*time.Second, "both nodes listed with version 4", func() error {
		r, err := h.author.expect(http.StatusOK, "GET", "/api/v1/namespaces/"+ns+"/nodes", nil)
		if err != nil {
			return err
		}
		var nodes struct {
			Items []struct {
				NodeID  string `json:"nodeId"`
				Version int64  `json:"version"`
			} `json:"items"`
		}
		if err := json.Unmarshal(r.body, &nodes); err != nil {
			return err
		}
		got := map[string]int64{}
		for _, n := range nodes.Items {
			got[n.NodeID] = n.Version
		}
		if len(got) != 2 || got["gw-a"] != v4 || got["gw-b"] != v4 {
			return fmt.Errorf("nodes %s", r.body)
		}
		return nil
	})

	// 7. An override drains gw-a only; clearing it makes gw-a ready again.
	h.approver.must(http.StatusOK, "PUT", "/api/v1/namespaces/"+ns+"/nodes/gw-a/override", map[string]any{"drain": true, "reason": "e2e"})
	waitFor(t, 10*time.Second, "gw-a drained", func() error {
		code, err := a.readyz()
		if err != nil {
			return err
		}
		if code != http.StatusServiceUnavailable {
			return fmt.Errorf("gw-a /readyz %d", code)
		}
		return nil
	})
	if code, err := b.readyz(); err != nil || code != http.StatusOK {
		t.Fatalf("gw-b /readyz %d, %v while gw-a is drained", code, err)
	}
	if code, err := a.get(freshUser()); err != nil || code != http.StatusOK {
		t.Fatalf("drained gw-a still serves what arrives: %d, %v", code, err)
	}
	// DELETE clears an override; a control plane without it takes an empty PUT.
	ovr := "/api/v1/namespaces/" + ns + "/nodes/gw-a/override"
	if r, err := h.approver.call("DELETE", ovr, nil); err != nil {
		t.Fatal(err)
	} else if r.status == http.StatusNotFound || r.status == http.StatusMethodNotAllowed {
		h.approver.must(http.StatusOK, "PUT", ovr, map[string]any{})
	} else if r.status/100 != 2 {
		t.Fatalf("DELETE %s: status %d: %s", ovr, r.status, r.body)
	}
	waitFor(t, 10*time.Second, "gw-a ready again", func() error {
		code, err := a.readyz()
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("gw-a /readyz %d", code)
		}
		return nil
	})
	if code, err := b.readyz(); err != nil || code != http.StatusOK {
		t.Fatalf("gw-b /readyz %d, %v", code, err)
	}
	t.Logf("step 7 (override) done at %s", time.Since(start).Round(time.Millisecond))
}

// TestGatewayStartsBeforeFirstPublish starts a node on a namespace that has
// nothing published yet (a new namespace, or the moment between a publish
// call and the publisher's etcd write): it should wait for etcd like
// source.Etcd.Run does after ErrNoState, and apply version 1 when it lands.
func TestGatewayStartsBeforeFirstPublish(t *testing.T) {
	h := newHarness(t)
	h.createNamespace()
	g := &gateway{id: "gw-early", listen: freeAddr(t), admin: freeAddr(t), stateDir: t.TempDir()}
	g.p = &proc{name: "sluice-gateway gw-early", bin: filepath.Join(h.bins, "sluice-gateway"), log: filepath.Join(h.dir, "gateway-gw-early.log"),
		args: []string{"--etcd", h.etcd.Addr(), "--namespace", ns, "--node-id", g.id, "--state-dir", g.stateDir,
			"--trust-keys", h.trustFile, "--listen", g.listen, "--admin", g.admin, "--shutdown-timeout", "5s"}}
	h.procs = append(h.procs, g.p)
	g.p.start(t)
	h.waitHTTP(g.p, "http://"+g.admin+"/healthz", 10*time.Second)
	if code, err := g.readyz(); err != nil || code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before any rule set: %d, %v; want 503", code, err)
	}
	v := h.mustPublish(h.rules(generous), "first")
	h.waitVersion(v, 10*time.Second, g)
	expectBurst(t, g, generous)
}
