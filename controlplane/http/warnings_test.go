package http_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

func warningCodes(ws []api.Warning) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Code)
	}
	return out
}

// TestChangeWarnings: every change the API returns carries the server's
// review warnings — the rule-only ones of api.Warnings against the
// published version, and, for a cluster limit, the one from the namespace's
// live nodes (whose registrations do not report Redis).
func TestChangeWarnings(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{watch: true})
	_, ed, ap := e.mustShop()

	// Version 1: one route with a limit of 100/s.
	rs, etag := ed.draft("shop")
	rs.Routes = []api.Route{route("orders")}
	rs.Limits = []api.Limit{{ID: "per-ip", Routes: []string{"orders"}, Key: []string{"ip"}, Algorithm: api.TokenBucket, Rate: 100}}
	etag = ed.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag).header.Get("ETag")
	var ch sluice.Change
	ed.must(http.StatusCreated, "POST", "/api/v1/namespaces/shop/changes", map[string]string{"title": "v1"}).decode(t, &ch)
	if ch.Warnings == nil || len(ch.Warnings) != 0 {
		t.Fatalf("first change's warnings: %#v", ch.Warnings)
	}
	ap.must(http.StatusOK, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/approve", ch.ID), nil)
	ap.must(http.StatusCreated, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/publish", ch.ID), nil)

	// A live node runs version 1, which has no cluster limit.
	e.register("shop", api.NodeStatus{NodeID: "gw-1", Version: 1, Address: "127.0.0.1:9000"})
	eventually(t, 5*time.Second, func() string {
		if n, ok := ap.nodes("shop")["gw-1"]; !ok || !n.Live {
			return "gw-1 is not live yet"
		}
		return ""
	})

	// The change: rate ÷ 10, a cluster limit, a twitchy breaker, a
	// metadata upstream.
	rs.Limits[0].Rate = 10
	rs.Limits = append(rs.Limits, api.Limit{ID: "shared", Algorithm: api.TokenBucket, Rate: 1000, Scope: api.ScopeCluster})
	rs.Breakers = []api.Breaker{{ID: "b", Routes: []string{"orders"}, Window: api.Duration(10 * time.Second), OpenFor: api.Duration(time.Second), ErrorRatio: 0.5, MinRequests: 2}}
	rs.Routes[0].Upstream.Targets = append(rs.Routes[0].Upstream.Targets, api.Target{URL: "http://169.254.169.254/"})
	ed.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag)
	want := []string{api.WarnUpstreamMetadata, api.WarnClusterLimitAdded, api.WarnLimitTightened, api.WarnBreakerMinRequestsLow, sluice.WarnClusterLimitWithoutRedis}
	check := func(where string, ws []api.Warning) {
		t.Helper()
		got := warningCodes(ws)
		slices.Sort(got)
		w := slices.Clone(want)
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Fatalf("%s: warnings %q, want %q", where, got, w)
		}
		for _, w := range ws {
			if w.Code == sluice.WarnClusterLimitWithoutRedis && (!strings.Contains(w.Message, "gw-1") || w.Path != "limits[shared].scope") {
				t.Fatalf("%s: %+v", where, w)
			}
			if w.Code == api.WarnLimitTightened && w.Path != "limits[per-ip].rate" {
				t.Fatalf("%s: %+v", where, w)
			}
		}
	}
	ed.must(http.StatusCreated, "POST", "/api/v1/namespaces/shop/changes", map[string]string{"title": "risky"}).decode(t, &ch)
	check("POST /changes", ch.Warnings)
	var got sluice.Change
	ap.must(http.StatusOK, "GET", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d", ch.ID), nil).decode(t, &got)
	check("GET /changes/{id}", got.Warnings)
	var listed struct{ Items []sluice.Change }
	ap.must(http.StatusOK, "GET", "/api/v1/namespaces/shop/changes", nil).decode(t, &listed)
	if len(listed.Items) != 2 || listed.Items[0].ID != ch.ID || listed.Items[1].Warnings == nil {
		t.Fatalf("list: %+v", listed.Items)
	}
	check("GET /changes", listed.Items[0].Warnings)
}
