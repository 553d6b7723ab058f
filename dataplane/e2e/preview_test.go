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
// rules (a per-user bucket of 1000 an hour). A signed preview of a limit ten
// times tighter (100 an hour) is written at the namespace's preview key, as
// the control plane writes it (the test signs it with the control plane's
// key). Traffic through both nodes: no request is rejected, and the nodes'
// reports carry the preview's counts, which equal what the same tight rules
// reject once published, on the same traffic. An unsigned (forged) preview
// is refused like any other forged value and never runs; deleting the key
// stops the preview on every node within a report interval.
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

	// The signed preview runs on both nodes.
	signed, err := h.signer().Sign(key, value(time.Now().Add(10*time.Minute)))
	if err != nil {
		t.Fatal(err)
	}
	put(signed)
	for _, g := range gws {
		waitFor(t, 10*time.Second, g.id+" runs the preview", func() error {
			st, err := g.previewStatus()
			if err != nil {
				return err
			}
			if st.Components.Preview.Change != "42" {
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
	var previewRejected int64
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
	reports(func(id string, r *api.Report) error {
		p := r.Preview
		if p == nil || p.Change != "42" || len(p.Limits) != 1 || p.Limits[0].Allowed+p.Limits[0].Rejected != perNode {
			return fmt.Errorf("report's preview %+v", p)
		}
		if len(p.Limits[0].TopKeys) == 0 || len(p.Limits[0].TopKeys[0].Key) > api.MaxPreviewKeyText {
			return fmt.Errorf("preview top keys %+v", p.Limits[0].TopKeys)
		}
		previewRejected += p.Limits[0].Rejected
		return nil
	})

	// Deleting the key stops the preview on every node.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	reports(func(id string, r *api.Report) error {
		if r.Preview != nil {
			return fmt.Errorf("the report still carries the preview %+v", r.Preview.Change)
		}
		return nil
	})

	// The same rules, published, on the same traffic (a fresh user).
	tight := h.mustPublish(h.rules(100), "tight: 100 an hour")
	h.waitVersion(tight, 30*time.Second, gws...)
	if n := traffic(freshUser()); int64(n) != previewRejected || n == 0 {
		t.Fatalf("published, the tight rules rejected %d; the preview reported %d", n, previewRejected)
	}
}
