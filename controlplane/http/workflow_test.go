package http_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

func TestWorkflow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	admin := e.login("admin")
	admin.must(http.StatusCreated, "POST", "/api/v1/namespaces", map[string]string{"name": "shop", "description": "the shop"})
	alice := e.mustUser(admin, "alice", sluice.RoleEditor)
	bob := e.mustUser(admin, "bob", sluice.RoleApprover)
	viewer := e.mustUser(admin, "vera", sluice.RoleViewer)

	// Edit the draft: the whole document with If-Match, then one rule.
	rs, etag := alice.draft("shop")
	if etag == "" || rs.Namespace != "shop" {
		t.Fatalf("draft %+v etag %q", rs, etag)
	}
	rs.Routes = []api.Route{route("orders")}
	noCSRF := *alice
	noCSRF.csrf = ""
	if p := noCSRF.must(http.StatusForbidden, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag).problem(t); p.Code != sluice.EFORBIDDEN {
		t.Fatalf("without CSRF: %+v", p)
	}
	alice.must(http.StatusPreconditionRequired, "PUT", "/api/v1/namespaces/shop/draft", rs)
	r := alice.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag)
	etag2 := r.header.Get("ETag")
	if etag2 == etag {
		t.Fatal("ETag did not change")
	}
	alice.must(http.StatusPreconditionFailed, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag)
	limitYAML := "algorithm: token_bucket\nrate: 10\nkey: [ip]\nroutes: [orders]\n"
	r = alice.do("PUT", "/api/v1/namespaces/shop/draft/limits/per-ip", limitYAML, "Content-Type: application/yaml")
	if r.status != http.StatusOK {
		t.Fatalf("put rule: %d %s", r.status, r.body)
	}
	alice.must(http.StatusNotModified, "GET", "/api/v1/namespaces/shop/draft", nil, "If-None-Match: "+r.header.Get("ETag"))
	viewer.must(http.StatusForbidden, "PUT", "/api/v1/namespaces/shop/draft/limits/per-ip", limitYAML, "Content-Type: application/yaml")

	// Open a change; its diff lists both rules as added.
	var ch sluice.Change
	alice.must(http.StatusCreated, "POST", "/api/v1/namespaces/shop/changes", map[string]string{"title": "orders and its limit"}).decode(t, &ch)
	if ch.State != sluice.ChangeOpen || ch.Diff == nil || ch.Diff.Added != 2 || ch.Author != "alice" {
		t.Fatalf("change %+v diff %+v", ch, ch.Diff)
	}
	base := fmt.Sprintf("/api/v1/namespaces/shop/changes/%d", ch.ID)
	// Four eyes: the author cannot approve; an editor or viewer cannot either.
	if p := alice.must(http.StatusForbidden, "POST", base+"/approve", map[string]string{"comment": "mine"}).problem(t); !strings.Contains(p.Detail, "approver") && !strings.Contains(p.Detail, "role") {
		t.Logf("editor approving: %s", p.Detail)
	}
	aliceAsAdmin := e.mustUser(admin, "alice2", sluice.RoleAdmin)
	var mine sluice.Change
	aliceAsAdmin.must(http.StatusCreated, "POST", "/api/v1/namespaces/shop/changes", map[string]string{"title": "an admin's own change"}).decode(t, &mine)
	if p := aliceAsAdmin.must(http.StatusForbidden, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/approve", mine.ID), nil).problem(t); !strings.Contains(p.Detail, "four eyes") {
		t.Fatalf("self-approval by an admin: %+v", p)
	}
	viewer.must(http.StatusForbidden, "POST", base+"/approve", nil)
	bob.must(http.StatusConflict, "POST", base+"/publish", nil) // not approved yet
	bob.must(http.StatusOK, "POST", base+"/approve", map[string]string{"comment": "lgtm"})
	var v sluice.Version
	start := time.Now()
	bob.must(http.StatusCreated, "POST", base+"/publish", nil).decode(t, &v)
	if v.Number != 1 || v.Publication == nil {
		t.Fatalf("version %+v", v)
	}
	p := e.waitPublished("shop", 1, 10*time.Second)
	t.Logf("publish → etcd in %s", time.Since(start))
	if p.Checksum != v.Checksum || p.PublishedBy != "bob" || len(p.Rules.Routes) != 1 || len(p.Rules.Limits) != 1 {
		t.Fatalf("etcd holds %+v", p)
	}
	// The API shows the publication's state and revision.
	deadline := time.Now().Add(5 * time.Second)
	for {
		var vs struct{ Items []sluice.Version }
		viewer.must(http.StatusOK, "GET", "/api/v1/namespaces/shop/versions", nil).decode(t, &vs)
		pub := vs.Items[0].Publication
		if pub.State == sluice.PublicationPublished && pub.EtcdRevision != nil && pub.Attempts == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("publication %+v", pub)
		}
		time.Sleep(20 * time.Millisecond)
	}
	r = viewer.must(http.StatusOK, "GET", "/api/v1/namespaces/shop/versions/1", nil)
	if r.header.Get("ETag") != `"`+v.Checksum+`"` {
		t.Fatalf("version ETag %q", r.header.Get("ETag"))
	}
	got, err := api.Decode(r.body)
	if err != nil || got.Checksum() != v.Checksum {
		t.Fatalf("version document: %v", err)
	}
	var d api.Diff
	viewer.must(http.StatusOK, "GET", "/api/v1/namespaces/shop/versions/0/diff/1", nil).decode(t, &d)
	if d.Added != 2 {
		t.Fatalf("diff 0..1 %+v", d)
	}
	viewer.must(http.StatusNotFound, "GET", "/api/v1/namespaces/shop/versions/1/diff/7", nil)

	// The audit log holds the story, and its chain verifies.
	var audit struct{ Items []sluice.AuditEvent }
	admin.must(http.StatusOK, "GET", "/api/v1/audit?namespace=shop&action=change.publish", nil).decode(t, &audit)
	if len(audit.Items) != 1 || audit.Items[0].Actor != "bob" || audit.Items[0].RequestID == "" || audit.Items[0].ClientAddr == "" {
		t.Fatalf("audit %+v", audit.Items)
	}
	var ver sluice.AuditVerification
	admin.must(http.StatusOK, "GET", "/api/v1/audit/verify", nil).decode(t, &ver)
	if !ver.OK || ver.Checked < 10 {
		t.Fatalf("verify %+v", ver)
	}
	// Metrics name the publication.
	m := e.anon().must(http.StatusOK, "GET", "/metrics", nil)
	for _, name := range []string{"sluice_admin_http_requests_total", "sluice_admin_outbox_depth", "sluice_admin_publish_lag_seconds_count 1"} {
		if !strings.Contains(string(m.body), name) {
			t.Errorf("metrics lack %s", name)
		}
	}
	e.waitReady()
	e.anon().must(http.StatusOK, "GET", "/healthz", nil)
	e.anon().must(http.StatusOK, "GET", "/", nil)
	// Logout ends the session.
	alice.must(http.StatusNoContent, "POST", "/api/v1/auth/logout", nil)
	alice.must(http.StatusUnauthorized, "GET", "/api/v1/me", nil)
}

func TestStaleChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	_, ed, ap := e.mustShop()

	// Two changes from the same base.
	rs, etag := ed.draft("shop")
	rs.Routes = []api.Route{route("a")}
	etag = ed.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag).header.Get("ETag")
	var first, second sluice.Change
	ed.must(http.StatusCreated, "POST", "/api/v1/namespaces/shop/changes", map[string]string{"title": "a"}).decode(t, &first)
	rs.Routes = append(rs.Routes, route("b"))
	ed.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag)
	ed.must(http.StatusCreated, "POST", "/api/v1/namespaces/shop/changes", map[string]string{"title": "a and b"}).decode(t, &second)
	ap.must(http.StatusOK, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/approve", second.ID), nil)
	ap.must(http.StatusOK, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/approve", first.ID), nil)
	ap.must(http.StatusCreated, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/publish", first.ID), nil)

	// The second is now stale: it cannot be published until reopened.
	var got sluice.Change
	ed.must(http.StatusOK, "GET", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d", second.ID), nil).decode(t, &got)
	if !got.Stale {
		t.Fatalf("change %+v is not stale", got)
	}
	if p := ap.must(http.StatusConflict, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/publish", second.ID), nil).problem(t); !strings.Contains(p.Detail, "stale") {
		t.Fatalf("publishing a stale change: %+v", p)
	}
	ed.must(http.StatusOK, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/reopen", second.ID), map[string]string{"comment": "rebase"}).decode(t, &got)
	if got.Stale || got.State != sluice.ChangeOpen || got.BaseVersion != 1 || got.Diff.Added != 1 {
		t.Fatalf("reopened %+v diff %+v", got, got.Diff)
	}
	ap.must(http.StatusConflict, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/publish", second.ID), nil) // needs a fresh approval
	ap.must(http.StatusOK, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/approve", second.ID), nil)
	var v sluice.Version
	ap.must(http.StatusCreated, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/publish", second.ID), nil).decode(t, &v)
	if v.Number != 2 {
		t.Fatalf("version %d", v.Number)
	}
	e.waitPublished("shop", 2, 10*time.Second)
	// A rejected change stays rejected.
	var third sluice.Change
	rs.Routes = append(rs.Routes, route("c"))
	_, etag = ed.draft("shop")
	ed.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag)
	ed.must(http.StatusCreated, "POST", "/api/v1/namespaces/shop/changes", map[string]string{"title": "c"}).decode(t, &third)
	ap.must(http.StatusOK, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/reject", third.ID), map[string]string{"comment": "no"})
	ap.must(http.StatusConflict, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/approve", third.ID), nil)
}

func TestRollback(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	admin, ed, ap := e.mustShop()
	v1 := publishRoutes(t, "shop", ed, ap, "a")
	publishRoutes(t, "shop", ed, ap, "a", "b")

	// A rollback is a change with version 1's content, reviewed as usual.
	var rb struct{ Change *sluice.Change }
	ed.must(http.StatusCreated, "POST", "/api/v1/namespaces/shop/versions/1/rollback", map[string]any{"reason": "b is broken"}).decode(t, &rb)
	if rb.Change == nil || rb.Change.Checksum != v1.Checksum || *rb.Change.RollbackOf != 1 || rb.Change.State != sluice.ChangeOpen {
		t.Fatalf("rollback change %+v", rb.Change)
	}
	ed.must(http.StatusForbidden, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/approve", rb.Change.ID), nil)
	ap.must(http.StatusOK, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/approve", rb.Change.ID), nil)
	var v3 sluice.Version
	ap.must(http.StatusCreated, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/publish", rb.Change.ID), nil).decode(t, &v3)
	if v3.Number != 3 || v3.Checksum != v1.Checksum {
		t.Fatalf("v3 %+v", v3)
	}
	e.waitPublished("shop", 3, 10*time.Second)

	// Emergency rollback: admins only, with a reason; published at once and
	// flagged in the audit log.
	ap.must(http.StatusForbidden, "POST", "/api/v1/namespaces/shop/versions/2/rollback", map[string]any{"reason": "now", "emergency": true})
	if p := admin.must(http.StatusBadRequest, "POST", "/api/v1/namespaces/shop/versions/2/rollback", map[string]any{"emergency": true}).problem(t); len(p.Errors) != 1 || p.Errors[0].Path != "reason" {
		t.Fatalf("no reason: %+v", p)
	}
	var em struct{ Version *sluice.Version }
	admin.must(http.StatusCreated, "POST", "/api/v1/namespaces/shop/versions/2/rollback", map[string]any{"reason": "incident 42", "emergency": true}).decode(t, &em)
	if em.Version == nil || em.Version.Number != 4 || !em.Version.Emergency || *em.Version.RollbackOf != 2 {
		t.Fatalf("emergency version %+v", em.Version)
	}
	pub := e.waitPublished("shop", 4, 10*time.Second)
	if len(pub.Rules.Routes) != 2 {
		t.Fatalf("etcd holds %+v", pub.Rules)
	}
	var audit struct{ Items []sluice.AuditEvent }
	admin.must(http.StatusOK, "GET", "/api/v1/audit?action="+sluice.ActionRollbackEmergent, nil).decode(t, &audit)
	if len(audit.Items) != 1 || !audit.Items[0].Emergency || !strings.Contains(string(audit.Items[0].After), "incident 42") {
		t.Fatalf("audit %+v", audit.Items)
	}
	// Rolling back to what is already newest has nothing to review.
	ed.must(http.StatusConflict, "POST", "/api/v1/namespaces/shop/versions/4/rollback", map[string]any{"reason": "again"})
	ed.must(http.StatusNotFound, "POST", "/api/v1/namespaces/shop/versions/99/rollback", map[string]any{"reason": "x"})
}

func TestAuditTamperingIsDetected(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	admin := e.login("admin")
	admin.must(http.StatusCreated, "POST", "/api/v1/namespaces", map[string]string{"name": "shop"})
	e.mustUser(admin, "ed", sluice.RoleEditor)
	var ver sluice.AuditVerification
	admin.must(http.StatusOK, "GET", "/api/v1/audit/verify", nil).decode(t, &ver)
	if !ver.OK {
		t.Fatalf("fresh log: %+v", ver)
	}
	ctx := context.Background()
	db := e.db.SQL()
	// The trigger refuses changes...
	if _, err := db.ExecContext(ctx, "UPDATE audit_events SET actor = 'mallory' WHERE id = 3"); err == nil {
		t.Fatal("UPDATE of an audit event was allowed")
	}
	if _, err := db.ExecContext(ctx, "DELETE FROM audit_events WHERE id = 3"); err == nil {
		t.Fatal("DELETE of an audit event was allowed")
	}
	// ...and a superuser who disables it is caught by the chain.
	for _, q := range []string{
		"ALTER TABLE audit_events DISABLE TRIGGER audit_events_append_only",
		"UPDATE audit_events SET actor = 'mallory' WHERE id = 3",
		"ALTER TABLE audit_events ENABLE TRIGGER audit_events_append_only",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	admin.must(http.StatusOK, "GET", "/api/v1/audit/verify", nil).decode(t, &ver)
	if ver.OK || ver.FirstBroken == nil || *ver.FirstBroken != 3 {
		t.Fatalf("after tampering: %+v", ver)
	}
}

func TestConcurrentEditors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	admin := e.login("admin")
	admin.must(http.StatusCreated, "POST", "/api/v1/namespaces", map[string]string{"name": "shop"})
	ed := e.token(e.mustUser(admin, "ed", sluice.RoleEditor), sluice.RoleEditor)
	const editors = 50

	// Everyone read the same ETag: exactly one write wins, the rest get 412.
	_, etag := ed.draft("shop")
	statuses := make([]int, editors)
	var wg sync.WaitGroup
	for i := range editors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs := &api.RuleSet{Namespace: "shop", Routes: []api.Route{route(fmt.Sprintf("first-%d", i))}}
			statuses[i] = ed.do("PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag).status
		}()
	}
	wg.Wait()
	won := 0
	for _, s := range statuses {
		switch s {
		case http.StatusOK:
			won++
		case http.StatusPreconditionFailed:
		default:
			t.Fatalf("status %d", s)
		}
	}
	if won != 1 {
		t.Fatalf("%d writers won with the same ETag, want 1", won)
	}

	// Read-modify-write with retries: every editor's route lands, none lost.
	var mu sync.Mutex
	conflicts := 0
	for i := range editors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for attempt := 0; attempt < 500; attempt++ {
				r := ed.do("GET", "/api/v1/namespaces/shop/draft", nil)
				rs, err := api.Decode(r.body)
				if err != nil {
					t.Error(err)
					return
				}
				rs.Routes = append(rs.Routes, route(fmt.Sprintf("r-%d", i)))
				switch st := ed.do("PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+r.header.Get("ETag")).status; st {
				case http.StatusOK:
					return
				case http.StatusPreconditionFailed:
					mu.Lock()
					conflicts++
					mu.Unlock()
				default:
					t.Errorf("status %d", st)
					return
				}
			}
			t.Error("gave up after 500 attempts")
		}()
	}
	wg.Wait()
	rs, _ := ed.draft("shop")
	if len(rs.Routes) != editors+1 {
		t.Fatalf("draft has %d routes, want %d: an update was lost", len(rs.Routes), editors+1)
	}
	t.Logf("%d conflicts (412) were retried", conflicts)
}
