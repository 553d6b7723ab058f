package http_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/etcd"
	sluicehttp "github.com/sluicegw/sluice/controlplane/http"
	"github.com/sluicegw/sluice/controlplane/postgres"
)

// fakeFleet is the nodes' last reports, by node.
type fakeFleet struct {
	mu      sync.Mutex
	reports map[string]*api.Report
}

func (f *fakeFleet) LiveNodes(string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for n := range f.reports {
		out = append(out, n)
	}
	return out
}

func (f *fakeFleet) LastReport(_, node string) (*api.Report, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.reports[node]
	return r, ok
}

// TestPreviewEndpoints: an editor previews an open change: the namespace's
// preview key holds the change's rules, signed with the control plane's
// key, for the duration asked; a viewer may read it but not start it; a
// duration over 30 minutes is refused naming the field; another change
// cannot be previewed meanwhile; GET sums the reports of the nodes that
// carry the preview (and only those); DELETE removes the key; start and
// stop are audited.
func TestPreviewEndpoints(t *testing.T) {
	t.Parallel()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, err := api.NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	fleet := &fakeFleet{reports: map[string]*api.Report{}}
	var keys api.Keys
	e := newEnv(t, envOptions{settings: func(s *sluicehttp.Settings) {
		n := s.Nodes.(*etcd.NodeService)
		keys = n.Keys
		changes := s.Changes.(*postgres.ChangeService)
		s.Previews = &etcd.PreviewService{Client: n.Client, Keys: n.Keys, Changes: changes, Results: changes, Audit: s.Audit,
			Fleet: fleet, Signer: signer}
	}})
	admin, ed, _ := e.mustShop()
	viewer := e.mustUser(admin, "vi", sluice.RoleViewer)
	rs, etag := ed.draft("shop")
	rs.Routes = []api.Route{route("api")}
	rs.Limits = []api.Limit{{ID: "per-ip", Routes: []string{"api"}, Key: []string{"ip"}, Algorithm: api.TokenBucket, Rate: 10, Period: api.Duration(time.Second)}}
	rs.Degrades = []api.Degrade{{ID: "shed", Routes: []string{"api"}, Mode: api.DegradeManual, Level: 1}}
	ed.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag)
	var ch sluice.Change
	ed.must(http.StatusCreated, "POST", "/api/v1/namespaces/shop/changes", map[string]string{"title": "tighter"}).decode(t, &ch)
	path := fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/preview", ch.ID)

	viewer.must(http.StatusForbidden, "POST", path, map[string]string{"duration": "5m"})
	if p := ed.must(http.StatusBadRequest, "POST", path, map[string]string{"duration": "31m"}).problem(t); len(p.Errors) != 1 || p.Errors[0].Path != "duration" {
		t.Fatalf("31m: %+v", p)
	}
	viewer.must(http.StatusNotFound, "GET", path, nil)
	start := time.Now()
	var p sluice.Preview
	ed.must(http.StatusOK, "POST", path, map[string]any{"duration": "5m", "selector": map[string]string{"zone": "a"}}).decode(t, &p)
	if p.Change != ch.ID || p.State != sluice.PreviewRunning || p.Checksum != ch.Checksum || p.Until.Before(start.Add(5*time.Minute-time.Second)) || p.Selector["zone"] != "a" {
		t.Fatalf("started preview %+v", p)
	}

	// The value the nodes follow: signed, the change's rules, until.
	res, err := e.etcd.Get(context.Background(), keys.Preview("shop"))
	if err != nil || len(res.Kvs) != 1 {
		t.Fatalf("preview key: %v %v", res, err)
	}
	payload, _, err := signer.Verifier().Open(keys.Preview("shop"), res.Kvs[0].Value)
	if err != nil {
		t.Fatalf("the preview value does not verify: %v", err)
	}
	pv, v, err := api.DecodePreview(payload)
	if err != nil || pv.Change != fmt.Sprint(ch.ID) || pv.Checksum != ch.Checksum || len(v.Rules().Limits) != 1 || v.Rules().Limits[0].Rate != 10 {
		t.Fatalf("preview value %+v, %v", pv, err)
	}

	// One preview per namespace.
	rs.Limits[0].Rate = 5
	rs.Degrades = nil
	_, etag = ed.draft("shop")
	ed.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag)
	var other sluice.Change
	ed.must(http.StatusCreated, "POST", "/api/v1/namespaces/shop/changes", map[string]string{"title": "tighter still"}).decode(t, &other)
	ed.must(http.StatusConflict, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/preview", other.ID), map[string]string{"duration": "5m"})

	// GET sums the reports carrying this preview.
	mk := func(node string, change string, allowed, rejected int64, key string) *api.Report {
		return &api.Report{NodeID: node, Limits: []api.LimitCounts{{Rule: "per-ip", Allowed: 1000, Rejected: 1}},
			Degrades: []api.DegradeState{{Rule: "shed", Level: 0, Shed: 3}},
			Preview: &api.PreviewReport{Change: change, Checksum: ch.Checksum, Limits: []api.PreviewCounts{{Rule: "per-ip", Allowed: allowed, Rejected: rejected, Clients: rejected / 10,
				TopKeys: []api.PreviewKey{{Key: key, Rejected: rejected}}}},
				Degrades: []api.PreviewDegrade{{Rule: "shed", Level: int(allowed / 50), Shed: rejected}}}}
	}
	fleet.mu.Lock()
	fleet.reports["n1"] = mk("n1", fmt.Sprint(ch.ID), 100, 40, "ip=192.0.2.1")
	fleet.reports["n2"] = mk("n2", fmt.Sprint(ch.ID), 50, 10, "ip=192.0.2.1")
	fleet.reports["n3"] = mk("n3", "999", 7, 7, "ip=198.51.100.9") // another preview: not counted
	fleet.reports["n4"] = &api.Report{NodeID: "n4"}                // runs none
	fleet.mu.Unlock()
	viewer.must(http.StatusOK, "GET", path, nil).decode(t, &p)
	if len(p.Nodes) != 2 || p.Nodes[0] != "n1" || p.Nodes[1] != "n2" || len(p.Rules) != 2 {
		t.Fatalf("aggregated preview %+v", p)
	}
	// The degrade plan: sheds summed, the highest level of the nodes.
	if d := p.Rules[1]; d.Rule != "shed" || d.Kind != "degrade" || d.Preview.Shed != 50 || d.Preview.Level != 2 || d.Live.Shed != 6 || d.Live.Level != 0 {
		t.Fatalf("aggregated degrade %+v", d)
	}
	r := p.Rules[0]
	if r.Rule != "per-ip" || r.Preview.Allowed != 150 || r.Preview.Rejected != 50 || r.Live.Allowed != 2000 || r.Live.Rejected != 2 ||
		len(r.TopKeys) != 1 || r.TopKeys[0].Key != "ip=192.0.2.1" || r.TopKeys[0].Rejected != 50 {
		t.Fatalf("aggregated rule %+v", r)
	}
	// Distinct clients: summed (4 + 1), approximate since two nodes rejected
	// some (a client may hit both); a degrade plan has none.
	if c := r.ClientsAffected; c == nil || c.Count != 5 || !c.Approximate || p.Rules[1].ClientsAffected != nil {
		t.Fatalf("clients affected %+v, degrade's %+v", c, p.Rules[1].ClientsAffected)
	}

	viewer.must(http.StatusForbidden, "DELETE", path, nil)
	ed.must(http.StatusNoContent, "DELETE", path, nil)
	if res, err := e.etcd.Get(context.Background(), keys.Preview("shop")); err != nil || len(res.Kvs) != 0 {
		t.Fatalf("preview key after DELETE: %v %v", res.Kvs, err)
	}
	// GET answers the figures kept when it stopped, though the nodes
	// dropped it.
	fleet.mu.Lock()
	clear(fleet.reports)
	fleet.mu.Unlock()
	var done sluice.Preview
	viewer.must(http.StatusOK, "GET", path, nil).decode(t, &done)
	if done.State != sluice.PreviewFinished || done.Reason != sluice.PreviewEndStopped || done.EndedAt == nil || done.EndedAt.Before(start) ||
		fmt.Sprint(done.Nodes) != "[n1 n2]" || done.Selector["zone"] != "a" || !done.Since.Equal(p.Since) || len(done.Rules) != 2 ||
		done.Rules[0].Preview != r.Preview || done.Rules[0].Live != r.Live || *done.Rules[0].ClientsAffected != *r.ClientsAffected || len(done.Rules[0].TopKeys) != 1 || done.Rules[1].Preview.Shed != 50 {
		t.Fatalf("finished preview %+v", done)
	}
	ed.must(http.StatusNotFound, "DELETE", path, nil)
	// The other change may be previewed now.
	ed.must(http.StatusOK, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/preview", other.ID), map[string]string{"duration": "1m"})

	var audit struct {
		Items []struct {
			Action string          `json:"action"`
			Object string          `json:"object"`
			After  json.RawMessage `json:"after"`
		} `json:"items"`
	}
	admin.must(http.StatusOK, "GET", "/api/v1/audit", nil).decode(t, &audit)
	seen := map[string]int{}
	for _, ev := range audit.Items {
		seen[ev.Action]++
	}
	if seen[sluice.ActionPreviewStart] != 2 || seen[sluice.ActionPreviewStop] != 1 {
		t.Fatalf("audit actions %v, want 2 preview starts and 1 stop", seen)
	}
}
