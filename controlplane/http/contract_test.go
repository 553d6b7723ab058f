package http_test

import (
	"net/http"
	"strings"
	"testing"

	sluice "github.com/sluicegw/sluice/controlplane"
)

// TestDraftContract sends rule documents that the JSON Schema and
// api.Validate now judge alike (issue 9, items 11 and 15) through the real
// server: each refused one is a 400 naming the field, and nothing is stored.
func TestDraftContract(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	admin := e.login("admin")
	admin.must(http.StatusCreated, "POST", "/api/v1/namespaces", map[string]string{"name": "shop"})
	ed := e.mustUser(admin, "ed", sluice.RoleEditor)
	doc := func(match, url string) string {
		return `{"namespace":"shop","routes":[{"id":"a","match":` + match + `,"upstream":{"targets":[{"url":"` + url + `"}]}}]}`
	}
	tests := []struct {
		desc string
		body string
		yaml bool
		path string // "" for a document that is accepted
		msg  string
	}{
		{"regex program too large", doc(`{"pathRegex":"(.*a){1000}"}`, "http://127.0.0.1:1"), false, "routes[0].match.pathRegex", "5002 RE2 instructions; the limit is 2000"},
		{"regex repeat over RE2's cap", doc(`{"pathRegex":"^/a{1001}$"}`, "http://127.0.0.1:1"), false, "routes[0].match.pathRegex", "invalid repeat count"},
		{"null field", doc(`null`, "http://127.0.0.1:1"), false, "routes[0].match", "null is not a value here"},
		{"empty optional string", doc(`{"pathPrefix":""}`, "http://127.0.0.1:1"), false, "routes[0].match.pathPrefix", "is empty"},
		{"yaml empty value", "namespace: shop\nroutes:\n", true, "routes", "null is not a value here"},
		{"target port above 65535", doc(`{}`, "http://127.0.0.1:99999"), false, "routes[0].upstream.targets[0].url", "port 1-65535"},
		{"header value with CR", doc(`{"headers":{"X-A":"a\rb"}}`, "http://127.0.0.1:1"), false, "routes[0].match.headers.X-A", "CR, LF or NUL"},
		{"upper-case scheme is fine", doc(`{"pathPrefix":"/a"}`, "HTTP://127.0.0.1:1"), false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			hdr := []string{"If-Match: *"}
			if tt.yaml {
				hdr = append(hdr, "Content-Type: application/yaml")
			}
			r := ed.do("PUT", "/api/v1/namespaces/shop/draft", tt.body, hdr...)
			if tt.path == "" {
				if r.status != http.StatusOK {
					t.Fatalf("status %d, want 200: %s", r.status, r.body)
				}
				return
			}
			if r.status != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", r.status, r.body)
			}
			p := r.problem(t)
			for _, f := range p.Errors {
				if f.Path == tt.path && strings.Contains(f.Message, tt.msg) {
					return
				}
			}
			t.Fatalf("problem does not name %s with %q: %+v", tt.path, tt.msg, p.Errors)
		})
	}
	// One rule through PUT .../draft/{kind}/{id}: the same strict decoding.
	r := ed.do("PUT", "/api/v1/namespaces/shop/draft/limits/l1", `{"algorithm":"token_bucket","rate":1,"cost":null}`)
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "null is not a value here") {
		t.Fatalf("rule with a null field: status %d: %s", r.status, r.body)
	}
}
