package http_test

import (
	"net/http"
	"testing"

	sluice "github.com/sluicegw/sluice/controlplane"
)

// TestDraftCheck: POST …/draft/check answers what a save would refuse, the
// warnings and the diff from the newest version, and stores nothing.
func TestDraftCheck(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	_, ed, ap := e.mustShop()
	publishRoutes(t, "shop", ed, ap, "a")
	rs, etag := ed.draft("shop")
	const path = "/api/v1/namespaces/shop/draft/check"

	var same sluice.DraftCheck
	ed.must(http.StatusOK, "POST", path, rs).decode(t, &same)
	if same.Version != 1 || len(same.Errors) != 0 || same.Diff == nil || !same.Diff.Empty() {
		t.Fatalf("the published rules checked: %+v", same)
	}

	rs.Routes = append(rs.Routes, route("b"))
	var added sluice.DraftCheck
	ed.must(http.StatusOK, "POST", path, rs).decode(t, &added)
	if len(added.Errors) != 0 || added.Diff == nil || added.Diff.Added != 1 {
		t.Fatalf("a route added: %+v", added)
	}

	rs.Routes[1].Upstream.Targets = nil
	var bad sluice.DraftCheck
	ed.must(http.StatusOK, "POST", path, rs).decode(t, &bad)
	if len(bad.Errors) == 0 || bad.Errors[0].Path == "" || bad.Diff != nil {
		t.Fatalf("an invalid route: %+v", bad)
	}
	var unknown sluice.DraftCheck
	ed.must(http.StatusOK, "POST", path, `{"namespace":"shop","limitz":[]}`).decode(t, &unknown)
	if len(unknown.Errors) == 0 {
		t.Fatalf("an unknown field: %+v", unknown)
	}

	ed.must(http.StatusNotFound, "POST", "/api/v1/namespaces/nope/draft/check", rs)
	if _, after := ed.draft("shop"); after != etag {
		t.Fatalf("check stored something: ETag %s → %s", etag, after)
	}
}

// TestDraftReset: POST …/draft/reset puts the newest version's rules back
// in the draft, honours If-Match, and is audited.
func TestDraftReset(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	_, ed, ap := e.mustShop()
	publishRoutes(t, "shop", ed, ap, "a")
	rs, etag := ed.draft("shop")
	rs.Routes = append(rs.Routes, route("b"))
	edited := ed.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag).header.Get("ETag")

	const path = "/api/v1/namespaces/shop/draft/reset"
	ed.must(http.StatusPreconditionFailed, "POST", path, nil, "If-Match: "+etag)
	ed.must(http.StatusOK, "POST", path, nil, "If-Match: "+edited)
	after, _ := ed.draft("shop")
	if len(after.Routes) != 1 || after.Routes[0].ID != "a" {
		t.Fatalf("reset draft routes = %+v, want [a]", after.Routes)
	}
	var evs struct{ Items []sluice.AuditEvent }
	ap.must(http.StatusOK, "GET", "/api/v1/audit?namespace=shop&action="+sluice.ActionDraftReset, nil).decode(t, &evs)
	if len(evs.Items) != 1 || evs.Items[0].Actor != "ed" {
		t.Fatalf("audit of the reset = %+v", evs.Items)
	}
}
