package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
)

// signatureStatus is the part of a node's /status about signatures.
type signatureStatus struct {
	Components struct {
		Signatures struct {
			TrustedKeys []string `json:"trustedKeys"`
			Rejections  int64    `json:"rejections"`
		} `json:"signatures"`
	} `json:"components"`
}

func (g *gateway) rejections() (int64, error) {
	var st signatureStatus
	res, err := statusClient.Get("http://" + g.admin + "/status")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		return 0, err
	}
	return st.Components.Signatures.Rejections, nil
}

// waitRejections waits until g has refused more than n values for their
// signature, and returns the new count.
func waitRejections(tb testing.TB, g *gateway, n int64) int64 {
	tb.Helper()
	var got int64
	waitFor(tb, 10*time.Second, fmt.Sprintf("%s refuses a value for its signature", g.id), func() error {
		var err error
		if got, err = g.rejections(); err != nil {
			return err
		}
		if got <= n {
			return fmt.Errorf("%d signature rejections", got)
		}
		return nil
	})
	return got
}

// forged is a well-formed published value (right checksum, valid rules) of
// rules as version v by mallory, unsigned.
func (h *harness) forged(rules string, v int64) []byte {
	h.tb.Helper()
	rs, err := api.Decode([]byte(rules))
	if err != nil {
		h.tb.Fatal(err)
	}
	b, err := json.Marshal(api.Published{Version: v, Checksum: rs.Checksum(), PublishedAt: time.Now().UTC(), PublishedBy: "mallory", Rules: rs})
	if err != nil {
		h.tb.Fatal(err)
	}
	return b
}

func mustPutRaw(tb testing.TB, c *clientv3.Client, key string, val []byte) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, key, string(val)); err != nil {
		tb.Fatal(err)
	}
}

// waitRepaired waits until the ruleset key holds version v signed by the
// control plane again.
func (h *harness) waitRepaired(c *clientv3.Client, v int64) {
	h.tb.Helper()
	verifier := h.signer().Verifier()
	key := api.Keys{}.RuleSet(ns)
	waitFor(h.tb, 15*time.Second, fmt.Sprintf("the control plane rewrites version %d over the forgery", v), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		res, err := c.Get(ctx, key)
		if err != nil || len(res.Kvs) == 0 {
			return fmt.Errorf("reading %s: %v", key, err)
		}
		payload, _, err := verifier.Open(key, res.Kvs[0].Value)
		if err != nil {
			return err
		}
		p, err := api.DecodePublished(payload)
		if err != nil {
			return err
		}
		if p.Version != v {
			return fmt.Errorf("etcd holds version %d", p.Version)
		}
		return nil
	})
}

// TestForgedPublicationsRefused writes what someone with etcd access but no
// signing key could: an unsigned value by mallory, one signed by mallory's
// own key, a real signature over an altered value, and an override that
// drains a node. Both real gateways refuse every one, count it in /status and
// their registration, and keep enforcing the published version; the control
// plane rewrites the ruleset key with the real version.
func TestForgedPublicationsRefused(t *testing.T) {
	h := newHarness(t)
	h.createNamespace()
	v1 := h.mustPublish(h.rules(generous), "generous limit")
	h.waitPublished(v1, 10*time.Second)
	a, b := h.startGateway("gw-a"), h.startGateway("gw-b")
	h.waitVersion(v1, 10*time.Second, a, b)
	c := h.etcdClient()
	key := api.Keys{}.RuleSet(ns)

	mallory, _, _ := mustKeyPair(t, h.dir, "mallory")
	malSigner, err := api.NewSigner(mallory)
	if err != nil {
		t.Fatal(err)
	}
	byMallory, err := malSigner.Sign(key, h.forged(h.rules(tight), v1+1))
	if err != nil {
		t.Fatal(err)
	}
	// A real signature (of version v1) around mallory's value.
	real, err := h.signer().Sign(key, h.forged(h.rules(generous), v1))
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(real, &env); err != nil {
		t.Fatal(err)
	}
	env["payload"] = h.forged(h.rules(tight), v1+1)
	altered, _ := json.Marshal(env)

	counts := map[string]int64{}
	for _, tc := range []struct {
		desc  string
		value []byte
	}{
		{"unsigned, publishedBy mallory", h.forged(h.rules(tight), v1+1)},
		{"signed by a key the nodes do not trust", byMallory},
		{"a real signature over an altered value", altered},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			mustPutRaw(t, c, key, tc.value)
			for _, g := range []*gateway{a, b} {
				counts[g.id] = waitRejections(t, g, counts[g.id])
				st, err := g.status()
				if err != nil || st.Version != v1 {
					t.Fatalf("%s runs version %d (%v) after the forgery, want %d", g.id, st.Version, err, v1)
				}
				expectBurst(t, g, generous)
			}
		})
	}
	h.waitRepaired(c, v1)

	// An unsigned override would drain gw-a: refused, gw-a stays ready.
	mustPutRaw(t, c, api.Keys{}.Override(ns, a.id), []byte(`{"drain":true,"by":"mallory"}`))
	counts[a.id] = waitRejections(t, a, counts[a.id])
	if code, err := a.readyz(); err != nil || code != http.StatusOK {
		t.Fatalf("gw-a /readyz %d, %v after a forged drain", code, err)
	}

	// The metric names what was refused and why.
	res, err := statusClient.Get("http://" + a.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, series := range []string{
		`sluice_signature_rejections_total{reason="unsigned",what="ruleset"} 1`,
		`sluice_signature_rejections_total{reason="unknown-key",what="ruleset"} 1`,
		`sluice_signature_rejections_total{reason="bad-signature",what="ruleset"} 1`,
		`sluice_signature_rejections_total{reason="unsigned",what="override"} 1`,
		`sluice_signature_rejections_total{reason="unsigned",what="state"} 0`,
	} {
		if !strings.Contains(string(metrics), series+"\n") {
			t.Errorf("gw-a /metrics has no %s", series)
		}
	}

	// The registrations carry the counts, for the control plane.
	waitFor(t, 15*time.Second, "registrations show the rejections", func() error {
		r, err := h.author.expect(http.StatusOK, "GET", "/api/v1/namespaces/"+ns+"/nodes", nil)
		if err != nil {
			return err
		}
		var nodes struct {
			Items []struct {
				NodeID              string `json:"nodeId"`
				SignatureRejections int64  `json:"signatureRejections"`
			} `json:"items"`
		}
		if err := json.Unmarshal(r.body, &nodes); err != nil {
			return err
		}
		for _, n := range nodes.Items {
			if n.SignatureRejections < counts[n.NodeID] {
				return fmt.Errorf("%s registered with %d rejections, want %d: %s", n.NodeID, n.SignatureRejections, counts[n.NodeID], r.body)
			}
		}
		if len(nodes.Items) != 2 {
			return fmt.Errorf("nodes %s", r.body)
		}
		return nil
	})
}

// TestForgedVersionDoesNotBlock writes a forged version 1000000 and checks
// that it blocks nothing: a real publish lands on the nodes, then (after a
// second forgery) an emergency rollback does; and a state file claiming
// version 1000000 is refused at boot, the node taking the real version from
// etcd.
func TestForgedVersionDoesNotBlock(t *testing.T) {
	h := newHarness(t)
	h.createNamespace()
	v1 := h.mustPublish(h.rules(generous), "generous limit")
	h.waitPublished(v1, 10*time.Second)
	a, b := h.startGateway("gw-a"), h.startGateway("gw-b")
	h.waitVersion(v1, 10*time.Second, a, b)
	c := h.etcdClient()
	key := api.Keys{}.RuleSet(ns)

	// 1. Forged version 1000000, then a real publish at once.
	mustPutRaw(t, c, key, h.forged(h.rules(offline), 1000000))
	v2 := h.mustPublish(h.rules(tight), "tight limit")
	h.waitPublished(v2, 10*time.Second)
	h.waitVersion(v2, 10*time.Second, a, b)
	for _, g := range []*gateway{a, b} {
		expectBurst(t, g, tight)
	}

	// 2. Forged again; an admin's emergency rollback to version 1 lands.
	mustPutRaw(t, c, key, h.forged(h.rules(offline), 1000000))
	var rb struct {
		Version *struct {
			Number int64 `json:"number"`
		} `json:"version"`
	}
	if err := h.author.must(http.StatusCreated, "POST", fmt.Sprintf("/api/v1/namespaces/%s/versions/%d/rollback", ns, v1),
		map[string]any{"reason": "forged rules in etcd", "emergency": true}).decode(&rb); err != nil || rb.Version == nil {
		t.Fatalf("emergency rollback: %v %+v", err, rb)
	}
	v3 := rb.Version.Number
	h.waitVersion(v3, 10*time.Second, a, b)
	for _, g := range []*gateway{a, b} {
		expectBurst(t, g, generous)
	}
	h.waitRepaired(c, v3)

	// 3. State files with a forged version are refused at boot: gw-a's
	// holds an unsigned version 1000000; gw-b's keeps its real signed
	// document but claims 1000000 as the published version.
	statePath := func(g *gateway) string { return filepath.Join(g.stateDir, ns+".json") }
	for _, g := range []*gateway{a, b} {
		if !g.p.stop(10 * time.Second) {
			t.Fatalf("%s did not stop", g.id)
		}
	}
	forgedState, _ := json.Marshal(map[string]any{"namespace": ns, "published": json.RawMessage(h.forged(h.rules(offline), 1000000)),
		"publishedVersion": 1000000, "savedAt": time.Now().UTC()})
	if err := os.WriteFile(statePath(a), forgedState, 0o600); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(statePath(b))
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]json.RawMessage
	if err := json.Unmarshal(raw, &st); err != nil || len(st["envelope"]) == 0 {
		t.Fatalf("gw-b's state file has no signed envelope (%v): %s", err, raw)
	}
	st["publishedVersion"] = json.RawMessage("1000000")
	raw, _ = json.Marshal(st)
	if err := os.WriteFile(statePath(b), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, g := range []*gateway{a, b} {
		h.startGateway(g.id)
	}
	h.waitVersion(v3, 10*time.Second, a, b)
	for _, g := range []*gateway{a, b} {
		if n, err := g.rejections(); err != nil || n != 1 {
			t.Fatalf("%s: %d signature rejections (%v) after booting on a forged state file, want 1", g.id, n, err)
		}
		expectBurst(t, g, generous)
	}
	// And the next real version still lands.
	v4 := h.mustPublish(h.rules(tight), "tight again")
	h.waitVersion(v4, 10*time.Second, a, b)
}

// TestKeyRotation rotates the control plane's signing key as docs/control-plane.md says:
// the nodes trust the old and the new key, sluice-admin restarts with the new
// key first and the old one kept; the next version is signed by the new key
// and applied, while a node that still trusts only the old key refuses it and
// keeps serving the version before.
func TestKeyRotation(t *testing.T) {
	h := newHarness(t)
	oldPub := h.trustFile
	next, nextKeyFile, nextPub := mustKeyPair(t, h.dir, "next")
	h.createNamespace()
	v1 := h.mustPublish(h.rules(generous), "generous limit")
	h.waitPublished(v1, 10*time.Second)
	h.trustFile = oldPub + "," + nextPub
	a := h.startGateway("gw-a")
	h.trustFile = oldPub
	stale := h.startGateway("gw-stale")
	h.waitVersion(v1, 10*time.Second, a, stale)

	// sluice-admin restarts signing with the new key, the old one kept.
	if !h.admin.stop(10 * time.Second) {
		t.Fatal("sluice-admin did not stop")
	}
	for i, arg := range h.admin.args {
		if arg == "--signing-key" {
			h.admin.args[i+1] = nextKeyFile + "," + h.signingFile
		}
	}
	h.admin.start(t)
	h.waitHTTP(h.admin, h.adminURL+"/readyz", 30*time.Second)
	h.author, h.approver = h.login("admin", h.password), h.login("approver", h.password)

	v2 := h.mustPublish(h.rules(tight), "tight limit")
	h.waitPublished(v2, 10*time.Second)
	h.waitVersion(v2, 10*time.Second, a)
	expectBurst(t, a, tight)
	c := h.etcdClient()
	res, err := c.Get(context.Background(), api.Keys{}.RuleSet(ns))
	if err != nil || len(res.Kvs) != 1 {
		t.Fatal(err)
	}
	rotated, _ := api.NewSigner(next, h.signingKey)
	if _, kid, err := rotated.Verifier().Open(api.Keys{}.RuleSet(ns), res.Kvs[0].Value); err != nil || kid != rotated.KeyID() {
		t.Fatalf("version %d signed by %q (%v), want the new key %s", v2, kid, err, rotated.KeyID())
	}
	waitRejections(t, stale, 0)
	if st, err := stale.status(); err != nil || st.Version != v1 {
		t.Fatalf("the node trusting only the old key runs version %d (%v), want %d", st.Version, err, v1)
	}
	expectBurst(t, stale, generous)
}
