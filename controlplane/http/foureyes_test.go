package http_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

// userID returns the id of the user c is logged in as.
func (c *client) userID() int64 {
	c.t.Helper()
	var me struct{ User sluice.User }
	c.must(http.StatusOK, "GET", "/api/v1/me", nil).decode(c.t, &me)
	if me.User.ID == 0 {
		c.t.Fatal("/api/v1/me names no user id")
	}
	return me.User.ID
}

// openChange opens a change of the draft of ns as c.
func (c *client) openChange(ns, title string) *sluice.Change {
	c.t.Helper()
	var ch sluice.Change
	c.must(http.StatusCreated, "POST", "/api/v1/namespaces/"+ns+"/changes", map[string]string{"title": title}).decode(c.t, &ch)
	return &ch
}

func changePath(ns string, id int64) string {
	return fmt.Sprintf("/api/v1/namespaces/%s/changes/%d", ns, id)
}

// TestFourEyesCoversDraftEditors: whoever wrote a change's content cannot
// approve it, even when someone else opened the change.
func TestFourEyesCoversDraftEditors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	admin, ed, ap := e.mustShop()
	ap2 := e.mustUser(admin, "ap2", sluice.RoleApprover)
	edID, apID := ed.userID(), ap.userID()
	const limitYAML = "algorithm: token_bucket\nrate: 10\nkey: [ip]\nroutes: [a]\n"

	// The exploit: the approver writes the whole draft, an editor opens the
	// change, the approver approves it alone.
	rs, etag := ap.draft("shop")
	rs.Routes = []api.Route{route("a")}
	ap.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag)
	ch := ed.openChange("shop", "a")
	if !slices.Contains(ch.Contributors, apID) || !slices.Contains(ch.Contributors, edID) || len(ch.Contributors) != 2 {
		t.Fatalf("contributors %v, want ap (%d) and ed (%d)", ch.Contributors, apID, edID)
	}
	p := ap.must(http.StatusForbidden, "POST", changePath("shop", ch.ID)+"/approve", map[string]string{"comment": "lgtm"}).problem(t)
	if p.Code != sluice.EFORBIDDEN || p.Detail != "you edited this change's draft; someone else must approve it" {
		t.Fatalf("approval by the draft's editor: %+v", p)
	}
	var got sluice.Change
	ed.must(http.StatusOK, "GET", changePath("shop", ch.ID), nil).decode(t, &got)
	if got.State != sluice.ChangeOpen || len(got.Contributors) != 2 {
		t.Fatalf("after the refused approval: %+v", got)
	}
	// A third person can approve; the draft's editor may still publish it.
	ap2.must(http.StatusOK, "POST", changePath("shop", ch.ID)+"/approve", nil)
	ap.must(http.StatusCreated, "POST", changePath("shop", ch.ID)+"/publish", nil)

	// Per-rule writes count too: a put...
	ap.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft/limits/per-ip", limitYAML, "Content-Type: application/yaml")
	ch = ed.openChange("shop", "a limit")
	ap.must(http.StatusForbidden, "POST", changePath("shop", ch.ID)+"/approve", nil)
	ap2.must(http.StatusOK, "POST", changePath("shop", ch.ID)+"/approve", nil)
	ap2.must(http.StatusCreated, "POST", changePath("shop", ch.ID)+"/publish", nil)
	// ...and a delete.
	ap.must(http.StatusOK, "DELETE", "/api/v1/namespaces/shop/draft/limits/per-ip", nil)
	ch = ed.openChange("shop", "no limit")
	ap.must(http.StatusForbidden, "POST", changePath("shop", ch.ID)+"/approve", nil)

	// Reopening keeps the contributors: the content has not changed.
	ap2.must(http.StatusOK, "POST", changePath("shop", ch.ID)+"/reject", nil)
	ed.must(http.StatusOK, "POST", changePath("shop", ch.ID)+"/reopen", nil)
	ap.must(http.StatusForbidden, "POST", changePath("shop", ch.ID)+"/approve", nil)
	ap2.must(http.StatusOK, "POST", changePath("shop", ch.ID)+"/approve", nil)
	ap2.must(http.StatusCreated, "POST", changePath("shop", ch.ID)+"/publish", nil)

	// After a publish that leaves the draft equal to the published rules,
	// the earlier editors are forgotten: a change the editor alone wrote can
	// be approved by the approver who edited before.
	rs, etag = ed.draft("shop")
	rs.Routes = append(rs.Routes, route("b"))
	ed.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag)
	ch = ed.openChange("shop", "b")
	if len(ch.Contributors) != 1 || ch.Contributors[0] != edID {
		t.Fatalf("contributors %v, want only ed (%d)", ch.Contributors, edID)
	}
	ap.must(http.StatusOK, "POST", changePath("shop", ch.ID)+"/approve", nil)
	ap.must(http.StatusCreated, "POST", changePath("shop", ch.ID)+"/publish", nil)

	// A draft that differs from what was published keeps its contributors.
	rs, etag = ap.draft("shop")
	rs.Routes = append(rs.Routes, route("c"))
	etag = ap.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag).header.Get("ETag")
	first := ed.openChange("shop", "c")
	rs.Routes = append(rs.Routes, route("d"))
	ed.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag)
	ap2.must(http.StatusOK, "POST", changePath("shop", first.ID)+"/approve", nil)
	ap2.must(http.StatusCreated, "POST", changePath("shop", first.ID)+"/publish", nil)
	ch = ed.openChange("shop", "d")
	if !slices.Contains(ch.Contributors, apID) {
		t.Fatalf("contributors %v lost ap (%d), whose edit c is published but who also wrote the draft d builds on", ch.Contributors, apID)
	}
	ap.must(http.StatusForbidden, "POST", changePath("shop", ch.ID)+"/approve", nil)
}

// TestFourEyesRollback: a rollback's contributor is who asked for it, not the
// draft's editors.
func TestFourEyesRollback(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	admin, ed, ap := e.mustShop()
	ap2 := e.mustUser(admin, "ap2", sluice.RoleApprover)
	publishRoutes(t, "shop", ed, ap, "a")
	publishRoutes(t, "shop", ed, ap, "a", "b")

	// The approver edits the draft; a rollback the editor asks for is still
	// the approver's to approve.
	rs, etag := ap.draft("shop")
	rs.Routes = append(rs.Routes, route("c"))
	ap.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag)
	var rb struct{ Change *sluice.Change }
	ed.must(http.StatusCreated, "POST", "/api/v1/namespaces/shop/versions/1/rollback", map[string]any{"reason": "b is broken"}).decode(t, &rb)
	if edID := ed.userID(); len(rb.Change.Contributors) != 1 || rb.Change.Contributors[0] != edID {
		t.Fatalf("rollback contributors %v, want only ed (%d)", rb.Change.Contributors, edID)
	}
	ap.must(http.StatusOK, "POST", changePath("shop", rb.Change.ID)+"/approve", nil)
	ap.must(http.StatusCreated, "POST", changePath("shop", rb.Change.ID)+"/publish", nil)
	// The draft (with c) differs from the published rules: the approver is
	// still among its contributors.
	ch := ed.openChange("shop", "c")
	ap.must(http.StatusForbidden, "POST", changePath("shop", ch.ID)+"/approve", nil)

	// An emergency rollback to the draft's content forgets the contributors.
	ap2.must(http.StatusOK, "POST", changePath("shop", ch.ID)+"/approve", nil)
	ap2.must(http.StatusCreated, "POST", changePath("shop", ch.ID)+"/publish", nil) // version 4: a, b, c
	rs, etag = ap.draft("shop")
	rs.Routes = rs.Routes[:1]
	ap.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag) // the draft is version 1's content
	admin.must(http.StatusCreated, "POST", "/api/v1/namespaces/shop/versions/1/rollback", map[string]any{"reason": "incident", "emergency": true})
	rs, etag = ed.draft("shop")
	rs.Routes = append(rs.Routes, route("d"))
	ed.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag)
	ch = ed.openChange("shop", "d")
	if len(ch.Contributors) != 1 {
		t.Fatalf("contributors %v after the emergency rollback, want only ed", ch.Contributors)
	}
	ap.must(http.StatusOK, "POST", changePath("shop", ch.ID)+"/approve", nil)
}
