package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
)

// previewStatus is the preview part of a node's /status.
type previewStatus struct {
	Components struct {
		Preview struct {
			Change              string `json:"change"`
			SignatureRejections int64  `json:"signatureRejections"`
			LastError           string `json:"lastError"`
		} `json:"preview"`
	} `json:"components"`
}

func (g *gateway) previewStatus() (previewStatus, error) {
	var st previewStatus
	res, err := statusClient.Get("http://" + g.admin + "/status")
	if err != nil {
		return st, err
	}
	defer res.Body.Close()
	return st, json.NewDecoder(res.Body).Decode(&st)
}

// TestPreviewOnLiveTraffic: two real gateways follow etcd under loose live
// rules (a per-user bucket of 1000 an hour), with a real control plane. An
// unsigned (forged) preview value is refused like any other forged value
// and never runs. A change ten times tighter (100 an hour) is previewed
// through the API (POST …/changes/{id}/preview). Traffic through both
// nodes: no request is rejected, and the control plane's GET sums the
// nodes' reports into the preview's figures, which equal what the same
// change rejects once approved and published, on the same traffic (one
// user's requests, 150 per node). DELETE stops the preview on every node
// within a report interval, and GET then answers the figures kept when it
// stopped.
func TestPreviewOnLiveTraffic(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.createNamespace()
	live := h.mustPublish(h.rules(1000), "live: 1000 an hour")
	var gws []*gateway
	for _, id := range []string{"p1", "p2"} {
		g := &gateway{id: id, listen: freeAddr(t), admin: freeAddr(t), stateDir: filepath.Join(h.dir, "state-"+id)}
		g.p = &proc{name: "sluice-gateway " + id, bin: filepath.Join(h.bins, "sluice-gateway"), log: filepath.Join(h.dir, "gateway-"+id+".log"),
			args: []string{"--etcd", h.etcd.Addr(), "--namespace", ns, "--node-id", id, "--labels", "node=" + id,
				"--state-dir", g.stateDir, "--listen", g.listen, "--admin", g.admin, "--trust-keys", h.trustFile,
				"--shutdown-timeout", "5s", "--log-level", "info", "--report-interval", "300ms"}}
		h.gateways[id] = g
		h.procs = append(h.procs, g.p)
		gws = append(gws, h.startGateway(id))
	}
	h.waitVersion(live, 30*time.Second, gws...)
	c := h.etcdClient()
	key := api.Keys{}.Preview(ns)
	value := func(until time.Time) []byte {
		b, err := json.Marshal(api.Preview{Change: "42", Checksum: "sha256:tight", Rules: json.RawMessage(h.rules(100)), Until: until})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	put := func(v []byte) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := c.Put(ctx, key, string(v)); err != nil {
			t.Fatal(err)
		}
	}

	// A forged preview: refused, counted, never run.
	put(value(time.Now().Add(10 * time.Minute)))
	for _, g := range gws {
		waitFor(t, 10*time.Second, g.id+" refuses the unsigned preview", func() error {
			st, err := g.previewStatus()
			if err != nil {
				return err
			}
			if p := st.Components.Preview; p.SignatureRejections < 1 || p.Change != "" {
				return fmt.Errorf("preview status %+v", p)
			}
			return nil
		})
	}

	// The change, previewed through the control plane's API: it signs the
	// value (replacing the forged one) and the nodes run it.
	base := "/api/v1/namespaces/" + ns
	r := h.author.must(http.StatusOK, "GET", base+"/draft", nil)
	h.author.must(http.StatusOK, "PUT", base+"/draft", h.rules(100), "If-Match: "+r.header.Get("ETag"))
	var ch struct {
		ID int64 `json:"id"`
	}
	if err := h.author.must(http.StatusCreated, "POST", base+"/changes", map[string]string{"title": "tight: 100 an hour"}).decode(&ch); err != nil {
		t.Fatal(err)
	}
	previewPath := fmt.Sprintf("%s/changes/%d/preview", base, ch.ID)
	h.author.must(http.StatusOK, "POST", previewPath, map[string]string{"duration": "10m"})
	for _, g := range gws {
		waitFor(t, 10*time.Second, g.id+" runs the preview", func() error {
			st, err := g.previewStatus()
			if err != nil {
				return err
			}
			if st.Components.Preview.Change != fmt.Sprint(ch.ID) {
				return fmt.Errorf("preview status %+v", st.Components.Preview)
			}
			return nil
		})
	}
	const perNode = 150
	traffic := func(user string) (rejected int) {
		for _, g := range gws {
			for range perNode {
				code, err := g.get(user)
				if err != nil {
					t.Fatal(err)
				}
				switch code {
				case http.StatusOK:
				case http.StatusTooManyRequests:
					rejected++
				default:
					t.Fatalf("%s: status %d", g.id, code)
				}
			}
		}
		return rejected
	}
	if n := traffic(freshUser()); n != 0 {
		t.Fatalf("%d requests rejected under the live rules while the preview ran, want 0", n)
	}
	reports := func(want func(id string, r *api.Report) error) {
		for _, g := range gws {
			waitFor(t, 10*time.Second, g.id+"'s report", func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				res, err := c.Get(ctx, api.Keys{}.Report(ns, g.id))
				if err != nil || len(res.Kvs) == 0 {
					return fmt.Errorf("no report (%v)", err)
				}
				var r api.Report
				if err := json.Unmarshal(res.Kvs[0].Value, &r); err != nil {
					return err
				}
				return want(g.id, &r)
			})
		}
	}
	// The control plane sums the nodes' reports.
	var previewRejected int64
	waitFor(t, 15*time.Second, "the control plane's preview figures", func() error {
		var p struct {
			State string   `json:"state"`
			Nodes []string `json:"nodes"`
			Rules []struct {
				Rule    string `json:"rule"`
				Preview struct {
					Allowed, Rejected int64
				} `json:"preview"`
				TopKeys []api.PreviewKey `json:"topKeys"`
			} `json:"rules"`
		}
		if err := h.author.must(http.StatusOK, "GET", previewPath, nil).decode(&p); err != nil {
			return err
		}
		if p.State != "running" || len(p.Nodes) != 2 || len(p.Rules) != 1 || p.Rules[0].Preview.Allowed+p.Rules[0].Preview.Rejected != 2*perNode ||
			len(p.Rules[0].TopKeys) == 0 || len(p.Rules[0].TopKeys) > 2 || len(p.Rules[0].TopKeys[0].Key) > api.MaxPreviewKeyText {
			return fmt.Errorf("preview %+v", p)
		}
		previewRejected = p.Rules[0].Preview.Rejected
		return nil
	})

	// Stopping it through the API reaches every node.
	h.author.must(http.StatusNoContent, "DELETE", previewPath, nil)
	reports(func(id string, r *api.Report) error {
		if r.Preview != nil {
			return fmt.Errorf("the report still carries the preview %+v", r.Preview.Change)
		}
		return nil
	})
	// The control plane kept the figures it summed when the preview
	// stopped, and the distinct clients the nodes counted (one user, seen
	// by each node: approximate, since two nodes counted).
	var kept struct {
		State, Reason string
		Nodes         []string
		Rules         []struct {
			Preview struct{ Rejected int64 } `json:"preview"`
			Clients *struct {
				Count       int64
				Approximate bool
			} `json:"clientsAffected"`
		}
	}
	if err := h.author.must(http.StatusOK, "GET", previewPath, nil).decode(&kept); err != nil {
		t.Fatal(err)
	}
	if len(kept.Rules) != 1 {
		t.Fatalf("kept preview %+v, want one rule", kept)
	}
	if kept.State != "finished" || kept.Reason != "stopped" || len(kept.Nodes) != 2 ||
		kept.Rules[0].Preview.Rejected != previewRejected || kept.Rules[0].Clients == nil || kept.Rules[0].Clients.Count < 1 || kept.Rules[0].Clients.Count > 2 {
		t.Fatalf("kept preview %+v (clients %+v), want finished, stopped, 2 nodes, %d rejected, 1 or 2 clients", kept, kept.Rules[0].Clients, previewRejected)
	}

	// The same change, approved and published, on the same traffic (a
	// fresh user).
	tight, err := h.approveAndPublish(ch.ID)
	if err != nil {
		t.Fatal(err)
	}
	h.waitVersion(tight, 30*time.Second, gws...)
	if n := traffic(freshUser()); int64(n) != previewRejected || n == 0 {
		t.Fatalf("published, the tight rules rejected %d; the preview reported %d", n, previewRejected)
	}
}
