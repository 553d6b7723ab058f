package http_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	sluicehttp "github.com/sluicegw/sluice/controlplane/http"
)

// TestDraftPreconditions: If-Match is evaluated per RFC 9110 before the
// body is validated: a stale precondition wins with 412 over a bad body
// (before, the body's 400 came first), a weak tag never matches a strong
// comparison (before, W/"19" was accepted), and a list matches when any
// member does (before, "1", "19" was misread and refused).
func TestDraftPreconditions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	_, ed, _ := e.mustShop()
	rs, etag := ed.draft("shop")
	rs.Routes = []api.Route{route("orders")}
	etag = ed.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag).header.Get("ETag")
	rev, _ := strconv.Atoi(strings.Trim(etag, `"`))
	stale := fmt.Sprintf(`"%d"`, rev-1)
	valid := fmt.Sprintf(`{"namespace":"shop","routes":[{"id":"orders","match":{"pathPrefix":"/orders"},"upstream":{"targets":[{"url":"http://127.0.0.1:%d"}]}}]}`, 8081)
	invalid := `{"namespace":"shop","limits":[{"id":"x","rate":-1}]}`
	for _, tc := range []struct {
		desc, method, path string
		ifMatch            []string
		body               string
		status             int
		code               string
	}{
		{desc: "stale precondition beats a bad body", method: "PUT", path: "/draft", ifMatch: []string{stale}, body: invalid, status: 412, code: sluice.EPRECONDITION},
		{desc: "stale precondition beats a bad rule", method: "PUT", path: "/draft/limits/x", ifMatch: []string{stale}, body: `{"rate":-1}`, status: 412, code: sluice.EPRECONDITION},
		{desc: "current tag, bad body", method: "PUT", path: "/draft", ifMatch: []string{etag}, body: invalid, status: 400, code: sluice.EINVALID},
		{desc: "weak tag never matches strongly", method: "PUT", path: "/draft", ifMatch: []string{"W/" + etag}, body: valid, status: 412, code: sluice.EPRECONDITION},
		{desc: "weak delete", method: "DELETE", path: "/draft/routes/orders", ifMatch: []string{"W/" + etag}, status: 412, code: sluice.EPRECONDITION},
		{desc: "unquoted tag", method: "PUT", path: "/draft", ifMatch: []string{strings.Trim(etag, `"`)}, body: valid, status: 400, code: sluice.EINVALID},
		{desc: "unterminated tag", method: "PUT", path: "/draft", ifMatch: []string{`"` + strconv.Itoa(rev)}, body: valid, status: 400, code: sluice.EINVALID},
		{desc: "missing If-Match", method: "PUT", path: "/draft", body: valid, status: 428, code: sluice.EPRECONDITIONREQUIRED},
		{desc: "list with the current tag last", method: "PUT", path: "/draft", ifMatch: []string{`"1", ` + etag}, body: valid, status: 200},
		{desc: "list with the current tag first", method: "PUT", path: "/draft", ifMatch: []string{"CURRENT, \"1\""}, body: valid, status: 200},
		{desc: "list in two header lines", method: "PUT", path: "/draft", ifMatch: []string{`"1"`, "CURRENT"}, body: valid, status: 200},
		{desc: "list without the current tag", method: "PUT", path: "/draft", ifMatch: []string{`"1", "2"`}, body: valid, status: 412, code: sluice.EPRECONDITION},
		{desc: "star", method: "PUT", path: "/draft", ifMatch: []string{"*"}, body: valid, status: 200},
		{desc: "unknown namespace", method: "PUT", path: "/../nope/draft", ifMatch: []string{"*"}, body: valid, status: 404, code: sluice.ENOTFOUND},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ed.t = t
			_, cur := ed.draft("shop")
			path := "/api/v1/namespaces/shop" + tc.path
			if strings.HasPrefix(tc.path, "/../") {
				path = "/api/v1/namespaces/" + strings.TrimPrefix(tc.path, "/../")
			}
			req, err := http.NewRequest(tc.method, e.srv.URL+path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-CSRF-Token", ed.csrf)
			for _, v := range tc.ifMatch {
				req.Header.Add("If-Match", strings.ReplaceAll(v, "CURRENT", cur))
			}
			res, err := ed.http.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tc.status, b)
			}
			var p sluicehttp.Problem
			if tc.code != "" && (json.Unmarshal(b, &p) != nil || p.Code != tc.code) {
				t.Fatalf("body %s, want code %s", b, tc.code)
			}
		})
	}
}

// TestUnknownNamespaceNodes: the nodes of a namespace that does not exist
// are a 404 like every other route of it (they were 200 []).
func TestUnknownNamespaceNodes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	admin := e.login("admin")
	if p := admin.must(http.StatusNotFound, "GET", "/api/v1/namespaces/nope/nodes", nil).problem(t); p.Code != sluice.ENOTFOUND {
		t.Fatalf("problem %+v", p)
	}
	admin.must(http.StatusCreated, "POST", "/api/v1/namespaces", map[string]string{"name": "shop"})
	admin.must(http.StatusOK, "GET", "/api/v1/namespaces/shop/nodes", nil)
}
