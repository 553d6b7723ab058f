package http_test

import (
	"context"
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

// TestPreviewKeepsExpiredFigures: a preview that reaches its until leaves
// the nodes' reports (each node's timer drops it) before the sweep notices;
// the sweep stops it (reason expired) and keeps the last figures it saw
// from the nodes, which GET answers as finished. A change never previewed
// is still 404. One node's distinct clients are exact.
func TestPreviewKeepsExpiredFigures(t *testing.T) {
	t.Parallel()
	fleet := &fakeFleet{reports: map[string]*api.Report{}}
	var mu sync.Mutex
	clock := time.Now().UTC()
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	var previews *etcd.PreviewService
	e := newEnv(t, envOptions{settings: func(s *sluicehttp.Settings) {
		n := s.Nodes.(*etcd.NodeService)
		changes := s.Changes.(*postgres.ChangeService)
		previews = &etcd.PreviewService{Client: n.Client, Keys: n.Keys, Changes: changes, Results: changes, Audit: s.Audit, Fleet: fleet, Now: now}
		s.Previews = previews
	}})
	_, ed, _ := e.mustShop()
	rs, etag := ed.draft("shop")
	rs.Routes = []api.Route{route("api")}
	rs.Limits = []api.Limit{{ID: "per-ip", Routes: []string{"api"}, Key: []string{"ip"}, Algorithm: api.TokenBucket, Rate: 10, Period: api.Duration(time.Second)}}
	ed.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag)
	var ch sluice.Change
	ed.must(http.StatusCreated, "POST", "/api/v1/namespaces/shop/changes", map[string]string{"title": "t"}).decode(t, &ch)
	path := fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/preview", ch.ID)
	ed.must(http.StatusNotFound, "GET", path, nil)
	ed.must(http.StatusOK, "POST", path, map[string]string{"duration": "1m"})

	fleet.mu.Lock()
	fleet.reports["n1"] = &api.Report{NodeID: "n1", Preview: &api.PreviewReport{Change: fmt.Sprint(ch.ID), Checksum: ch.Checksum,
		Limits: []api.PreviewCounts{{Rule: "per-ip", Allowed: 90, Rejected: 30, Clients: 7}}}}
	fleet.mu.Unlock()
	if why, err := previews.EndStalePreview(context.Background(), "shop"); err != nil || why != "" {
		t.Fatalf("sweep of a running preview: %q %v", why, err)
	}
	// Until passes; the node drops the preview from its report.
	fleet.mu.Lock()
	fleet.reports["n1"] = &api.Report{NodeID: "n1"}
	fleet.mu.Unlock()
	mu.Lock()
	clock = clock.Add(61 * time.Second)
	mu.Unlock()
	if why, err := previews.EndStalePreview(context.Background(), "shop"); err != nil || why != sluice.PreviewEndExpired {
		t.Fatalf("sweep of an expired preview: %q %v", why, err)
	}
	var p sluice.Preview
	ed.must(http.StatusOK, "GET", path, nil).decode(t, &p)
	if p.State != sluice.PreviewFinished || p.Reason != sluice.PreviewEndExpired || p.EndedAt == nil || !p.EndedAt.Equal(now()) ||
		fmt.Sprint(p.Nodes) != "[n1]" || len(p.Rules) != 1 || p.Rules[0].Preview.Allowed != 90 || p.Rules[0].Preview.Rejected != 30 ||
		p.Rules[0].ClientsAffected == nil || *p.Rules[0].ClientsAffected != (sluice.PreviewClients{Count: 7}) {
		t.Fatalf("expired preview %+v", p)
	}
}
