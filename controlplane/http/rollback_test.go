package http_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

// TestEmergencyRollbackAfterAbortedCanary is issue 26's sequence: v1 good,
// v2 bad published, the rollback to v1 published as canary v3, the canary
// aborted (the fleet back on the bad v2). The newest version, v3, holds
// v1's rules, but the fleet runs v2: an emergency rollback to 1 (or to 3)
// is judged against what the fleet runs and publishes v1's rules, never
// answered 409 "nothing to review". Once the fleet runs them, a further
// emergency rollback to them is the no-op that is refused.
func TestEmergencyRollbackAfterAbortedCanary(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{watch: true})
	admin, ed, ap := e.mustShop()
	v1 := publishRoutes(t, "shop", ed, ap, "good")
	publishRoutes(t, "shop", ed, ap, "good", "bad")
	e.waitPublished("shop", 2, 10*time.Second)
	lease := e.register("shop", api.NodeStatus{NodeID: "gw-1", Address: "10.0.0.1:8080", Build: "test", Labels: map[string]string{"zone": "a"},
		StartedAt: time.Now().UTC(), Version: 2, Checksum: "x", AppliedAt: time.Now().UTC()})

	var rb struct{ Change *sluice.Change }
	ed.must(http.StatusCreated, "POST", "/api/v1/namespaces/shop/versions/1/rollback", map[string]any{"reason": "bad is broken"}).decode(t, &rb)
	ap.must(http.StatusOK, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/approve", rb.Change.ID), nil)
	var v3 sluice.Version
	ap.must(http.StatusCreated, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/publish", rb.Change.ID),
		map[string]any{"canary": map[string]any{"selector": map[string]string{"zone": "b"}}}).decode(t, &v3)
	if v3.Number != 3 || v3.Checksum != v1.Checksum {
		t.Fatalf("canary v3 %+v", v3)
	}
	ap.must(http.StatusOK, "POST", "/api/v1/namespaces/shop/canary/abort", map[string]string{"reason": "zone b is quiet"})

	// The fleet runs v2: a rollback to v1's rules is reviewable again...
	var again struct{ Change *sluice.Change }
	ed.must(http.StatusCreated, "POST", "/api/v1/namespaces/shop/versions/1/rollback", map[string]any{"reason": "still broken"}).decode(t, &again)
	if again.Change == nil || again.Change.Checksum != v1.Checksum {
		t.Fatalf("rollback change %+v", again.Change)
	}
	// ... and an emergency rollback publishes them fleet-wide.
	for _, target := range []int64{1, 3} {
		var em struct{ Version *sluice.Version }
		admin.must(http.StatusCreated, "POST", fmt.Sprintf("/api/v1/namespaces/shop/versions/%d/rollback", target),
			map[string]any{"reason": "incident 7", "emergency": true}).decode(t, &em)
		if em.Version == nil || !em.Version.Emergency || em.Version.Checksum != v1.Checksum || *em.Version.RollbackOf != target {
			t.Fatalf("emergency rollback to %d: %+v", target, em.Version)
		}
		pub := e.waitPublished("shop", em.Version.Number, 10*time.Second)
		if len(pub.Rules.Routes) != 1 || pub.Rules.Routes[0].ID != "good" {
			t.Fatalf("etcd's rule set after the emergency rollback to %d: %+v", target, pub.Rules.Routes)
		}
	}
	// Every node now reports version 5 (v1's rules, published fleet-wide):
	// rolling back to them again has nothing to do.
	e.update("shop", api.NodeStatus{NodeID: "gw-1", Address: "10.0.0.1:8080", Build: "test", Labels: map[string]string{"zone": "a"},
		StartedAt: time.Now().UTC(), Version: 5, Checksum: v1.Checksum, AppliedAt: time.Now().UTC()}, lease)
	eventually(t, 10*time.Second, func() string {
		var nodes struct{ Items []sluice.Node }
		admin.must(http.StatusOK, "GET", "/api/v1/namespaces/shop/nodes", nil).decode(t, &nodes)
		if len(nodes.Items) != 1 || nodes.Items[0].Version != 5 {
			return fmt.Sprintf("nodes %+v", nodes.Items)
		}
		return ""
	})
	p := admin.must(http.StatusConflict, "POST", "/api/v1/namespaces/shop/versions/1/rollback", map[string]any{"reason": "again", "emergency": true}).problem(t)
	if p.Code != sluice.ECONFLICT {
		t.Errorf("no-op emergency rollback: %+v", p)
	}
}
