package http_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	sluice "github.com/sluicegw/sluice/controlplane"
)

func TestBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	admin := e.login("admin")
	admin.must(http.StatusCreated, "POST", "/api/v1/namespaces", map[string]string{"name": "shop"})
	ed := e.mustUser(admin, "ed", sluice.RoleEditor)
	_, etag := ed.draft("shop")
	badDoc := `{"namespace":"shop","routes":[{"id":"Bad_ID","match":{"pathPrefix":"/x"},"upstream":{"targets":[]}}],
		"limits":[{"id":"l","algorithm":"token_bucket","rate":-1}]}`
	big := append([]byte(`{"namespace":"shop","routes":[],"x":"`), bytes.Repeat([]byte("a"), 5<<20)...)

	tests := []struct {
		desc   string
		c      *client
		method string
		path   string
		body   any
		hdr    []string
		status int
		code   string
		paths  []string // field paths the problem must name
	}{
		{desc: "malformed JSON", c: admin, method: "POST", path: "/api/v1/namespaces", body: `{"name": "x",`, status: 400, code: sluice.EINVALID},
		{desc: "unknown field", c: admin, method: "POST", path: "/api/v1/namespaces", body: `{"name": "x", "nmae": 1}`, status: 400, code: sluice.EINVALID, paths: []string{"nmae"}},
		{desc: "bad namespace name", c: admin, method: "POST", path: "/api/v1/namespaces", body: `{"name": "x'; DROP TABLE users; --"}`, status: 400, code: sluice.EINVALID, paths: []string{"name"}},
		{desc: "body over the limit", c: ed, method: "PUT", path: "/api/v1/namespaces/shop/draft", body: big, hdr: []string{"If-Match: " + etag}, status: 413, code: sluice.ETOOLARGE},
		{desc: "every wrong field listed", c: ed, method: "PUT", path: "/api/v1/namespaces/shop/draft", body: badDoc, hdr: []string{"If-Match: " + etag}, status: 400, code: sluice.EINVALID,
			paths: []string{"routes[0].id", "routes[0].upstream.targets", "limits[0].rate"}},
		{desc: "YAML syntax error", c: ed, method: "PUT", path: "/api/v1/namespaces/shop/draft", body: "namespace: [shop", hdr: []string{"If-Match: " + etag, "Content-Type: application/yaml"}, status: 400, code: sluice.EINVALID},
		{desc: "wrong media type", c: ed, method: "PUT", path: "/api/v1/namespaces/shop/draft", body: "x", hdr: []string{"If-Match: " + etag, "Content-Type: text/html"}, status: 415, code: sluice.EUNSUPPORTED},
		{desc: "other namespace in document", c: ed, method: "PUT", path: "/api/v1/namespaces/shop/draft", body: `{"namespace":"other"}`, hdr: []string{"If-Match: " + etag}, status: 400, code: sluice.EINVALID, paths: []string{"namespace"}},
		{desc: "bad rule", c: ed, method: "PUT", path: "/api/v1/namespaces/shop/draft/limits/l1", body: `{"algorithm":"nope","rate":1}`, status: 400, code: sluice.EINVALID, paths: []string{"limits[0].algorithm"}},
		{desc: "rule id mismatch", c: ed, method: "PUT", path: "/api/v1/namespaces/shop/draft/limits/l1", body: `{"id":"l2","algorithm":"token_bucket","rate":1}`, status: 400, code: sluice.EINVALID, paths: []string{"id"}},
		{desc: "unknown kind", c: ed, method: "PUT", path: "/api/v1/namespaces/shop/draft/widgets/w", body: `{}`, status: 404, code: sluice.ENOTFOUND},
		{desc: "invalid rule id", c: ed, method: "DELETE", path: "/api/v1/namespaces/shop/draft/routes/" + url.PathEscape("a' OR '1'='1"), status: 400, code: sluice.EINVALID},
		{desc: "missing rule", c: ed, method: "DELETE", path: "/api/v1/namespaces/shop/draft/routes/nope", status: 404, code: sluice.ENOTFOUND},
		{desc: "SQL in namespace path", c: ed, method: "GET", path: "/api/v1/namespaces/" + url.PathEscape("shop' OR 1=1 --") + "/draft", status: 400, code: sluice.EINVALID},
		{desc: "SQL in change id", c: ed, method: "GET", path: "/api/v1/namespaces/shop/changes/" + url.PathEscape("1 OR 1=1"), status: 400, code: sluice.EINVALID},
		{desc: "negative version", c: ed, method: "GET", path: "/api/v1/namespaces/shop/versions/-1", status: 400, code: sluice.EINVALID},
		{desc: "huge version", c: ed, method: "GET", path: "/api/v1/namespaces/shop/versions/99999999999999999999", status: 400, code: sluice.EINVALID},
		{desc: "unknown namespace", c: ed, method: "GET", path: "/api/v1/namespaces/nope/draft", status: 404, code: sluice.ENOTFOUND},
		{desc: "bad state filter", c: ed, method: "GET", path: "/api/v1/namespaces/shop/changes?state=" + url.QueryEscape("open' --"), status: 400, code: sluice.EINVALID, paths: []string{"state"}},
		{desc: "bad time filter", c: admin, method: "GET", path: "/api/v1/audit?since=yesterday", status: 400, code: sluice.EINVALID, paths: []string{"since"}},
		{desc: "unknown role", c: admin, method: "POST", path: "/api/v1/users", body: map[string]string{"username": "x", "password": password, "role": "root"}, status: 400, code: sluice.EINVALID, paths: []string{"role"}},
		{desc: "short password", c: admin, method: "POST", path: "/api/v1/users", body: map[string]string{"username": "x", "password": "short", "role": "viewer"}, status: 400, code: sluice.EINVALID, paths: []string{"password"}},
		{desc: "token with unknown role", c: admin, method: "POST", path: "/api/v1/tokens", body: map[string]string{"name": "x", "role": "superuser"}, status: 400, code: sluice.EINVALID, paths: []string{"role"}},
		{desc: "token above own role", c: ed, method: "POST", path: "/api/v1/tokens", body: map[string]string{"name": "x", "role": "admin"}, status: 403, code: sluice.EFORBIDDEN},
		{desc: "token expiring in the past", c: ed, method: "POST", path: "/api/v1/tokens", body: map[string]string{"name": "x", "role": "viewer", "expiresAt": "2001-01-01T00:00:00Z"}, status: 400, code: sluice.EINVALID, paths: []string{"expiresAt"}},
		{desc: "empty change title", c: ed, method: "POST", path: "/api/v1/namespaces/shop/changes", body: map[string]string{"title": " "}, status: 400, code: sluice.EINVALID, paths: []string{"title"}},
		{desc: "unknown API path", c: ed, method: "GET", path: "/api/v1/nope", status: 404, code: sluice.ENOTFOUND},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			r := tt.c.do(tt.method, tt.path, tt.body, tt.hdr...)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			if tt.code == "" {
				return
			}
			p := r.problem(t)
			if p.Code != tt.code || p.Status != tt.status || p.Detail == "" {
				t.Fatalf("problem %+v", p)
			}
			got := map[string]bool{}
			for _, f := range p.Errors {
				got[f.Path] = true
			}
			for _, want := range tt.paths {
				if !got[want] {
					t.Errorf("problem does not name %q: %+v", want, p.Errors)
				}
			}
		})
	}

	// Nothing was stored: the draft is at its first revision, and SQL in a
	// filter is only a string.
	rs, etag2 := ed.draft("shop")
	if etag2 != etag || len(rs.Routes) != 0 {
		t.Fatalf("draft changed: %s %+v", etag2, rs)
	}
	var users struct{ Items []sluice.User }
	admin.must(http.StatusOK, "GET", "/api/v1/users", nil).decode(t, &users)
	if len(users.Items) != 2 {
		t.Fatalf("users: %+v", users.Items)
	}
	var audit struct{ Items []sluice.AuditEvent }
	admin.must(http.StatusOK, "GET", "/api/v1/audit?actor="+url.QueryEscape("' OR 1=1 --")+"&namespace="+url.QueryEscape("%"), nil).decode(t, &audit)
	if len(audit.Items) != 0 {
		t.Fatalf("SQL in a filter matched %d events", len(audit.Items))
	}
}

func TestTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	admin := e.login("admin")
	ed := e.mustUser(admin, "ed", sluice.RoleEditor)

	// A token works without CSRF, at its own (lesser) role.
	var created struct {
		ID    int64  `json:"id"`
		Token string `json:"token"`
		Role  string `json:"role"`
	}
	ed.must(http.StatusCreated, "POST", "/api/v1/tokens", map[string]string{"name": "ci", "role": "viewer"}).decode(t, &created)
	if !strings.HasPrefix(created.Token, "slt_") || created.Role != "viewer" {
		t.Fatalf("token %+v", created)
	}
	tok := e.anon()
	tok.bearer = created.Token
	var me struct {
		Role       string `json:"role"`
		AuthMethod string `json:"authMethod"`
	}
	tok.must(http.StatusOK, "GET", "/api/v1/me", nil).decode(t, &me)
	if me.Role != "viewer" || me.AuthMethod != "token" {
		t.Fatalf("me %+v", me)
	}
	// A token cannot mint tokens (a child would outlive its parent).
	if p := tok.must(http.StatusForbidden, "POST", "/api/v1/tokens", map[string]string{"name": "child", "role": "viewer"}).problem(t); p.Code != sluice.EFORBIDDEN {
		t.Fatalf("token minting a token: %+v", p)
	}
	tok.must(http.StatusForbidden, "POST", "/api/v1/namespaces/shop/changes", map[string]string{"title": "x"})
	// The secret is stored hashed and never listed.
	var stored string
	if err := e.db.SQL().QueryRowContext(context.Background(), "SELECT hash FROM api_tokens WHERE id = $1", created.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored == created.Token || strings.Contains(stored, "slt_") {
		t.Fatal("the token is stored in clear")
	}
	if l := ed.must(http.StatusOK, "GET", "/api/v1/tokens", nil); strings.Contains(string(l.body), created.Token) {
		t.Fatal("the token list shows the secret")
	}
	// Revoked: 401 from then on; others cannot revoke it.
	other := e.mustUser(admin, "other", sluice.RoleEditor)
	other.must(http.StatusNotFound, "DELETE", fmt.Sprintf("/api/v1/tokens/%d", created.ID), nil)
	ed.must(http.StatusNoContent, "DELETE", fmt.Sprintf("/api/v1/tokens/%d", created.ID), nil)
	if p := tok.must(http.StatusUnauthorized, "GET", "/api/v1/me", nil).problem(t); p.Code != sluice.EUNAUTHORIZED {
		t.Fatalf("revoked: %+v", p)
	}
	// Expired: make one that expires in a second and wait for the database
	// clock to pass it.
	ed.must(http.StatusCreated, "POST", "/api/v1/tokens", map[string]string{"name": "short", "role": "viewer",
		"expiresAt": time.Now().Add(time.Second).UTC().Format(time.RFC3339)}).decode(t, &created)
	tok.bearer = created.Token
	time.Sleep(2100 * time.Millisecond)
	tok.must(http.StatusUnauthorized, "GET", "/api/v1/me", nil)
	// Garbage tokens and schemes.
	tok.bearer = "slt_" + strings.Repeat("A", 43)
	tok.must(http.StatusUnauthorized, "GET", "/api/v1/me", nil)
	tok.bearer = ""
	tok.must(http.StatusUnauthorized, "GET", "/api/v1/me", nil, "Authorization: Basic YWRtaW46YWRtaW4=")
	// A disabled user's token stops working.
	var u struct{ ID int64 }
	admin.must(http.StatusCreated, "POST", "/api/v1/users", map[string]any{"username": "gone", "password": password, "role": "editor"}).decode(t, &u)
	gone := e.token(e.login("gone"), sluice.RoleEditor)
	gone.must(http.StatusOK, "GET", "/api/v1/me", nil)
	admin.must(http.StatusOK, "PATCH", fmt.Sprintf("/api/v1/users/%d", u.ID), map[string]any{"disabled": true})
	gone.must(http.StatusUnauthorized, "GET", "/api/v1/me", nil)
	// The last admin cannot be demoted.
	admin.must(http.StatusConflict, "PATCH", "/api/v1/users/1", map[string]any{"role": "viewer"})
}

func TestRolesAndLogin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	admin := e.login("admin")
	admin.must(http.StatusCreated, "POST", "/api/v1/namespaces", map[string]string{"name": "shop"})
	viewer := e.mustUser(admin, "vera", sluice.RoleViewer)
	ed := e.mustUser(admin, "ed", sluice.RoleEditor)
	ap := e.mustUser(admin, "ap", sluice.RoleApprover)
	anon := e.anon()

	tests := []struct {
		c      *client
		method string
		path   string
		status int
	}{
		{anon, "GET", "/api/v1/namespaces", 401},
		{anon, "GET", "/api/v1/me", 401},
		{viewer, "GET", "/api/v1/namespaces/shop/draft", 200},
		{viewer, "PUT", "/api/v1/namespaces/shop/draft/routes/a", 403},
		{viewer, "POST", "/api/v1/namespaces/shop/changes", 403},
		{viewer, "GET", "/api/v1/audit", 403},
		{viewer, "POST", "/api/v1/namespaces", 403},
		{ed, "GET", "/api/v1/users", 403},
		{ed, "POST", "/api/v1/users", 403},
		{ed, "POST", "/api/v1/namespaces/shop/changes/1/approve", 403},
		{ed, "POST", "/api/v1/namespaces/shop/changes/1/publish", 403},
		{ed, "PUT", "/api/v1/namespaces/shop/nodes/n1/override", 403},
		{ap, "PATCH", "/api/v1/users/1", 403},
		{ap, "GET", "/api/v1/audit/verify", 200},
		{ap, "GET", "/api/v1/namespaces/shop/nodes", 200},
	}
	for _, tt := range tests {
		r := tt.c.do(tt.method, tt.path, `{}`)
		if r.status != tt.status {
			t.Errorf("%s %s: %d, want %d: %s", tt.method, tt.path, r.status, tt.status, r.body)
		}
	}

	// Failed logins are audited and throttled per user.
	for i := range 5 {
		r := anon.do("POST", "/api/v1/auth/login", map[string]string{"username": "ed", "password": fmt.Sprint("wrong", i)})
		if r.status != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d", i, r.status)
		}
	}
	r := anon.do("POST", "/api/v1/auth/login", map[string]string{"username": "ed", "password": password})
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("after 5 failures: %d %v", r.status, r.header)
	}
	var audit struct{ Items []sluice.AuditEvent }
	admin.must(http.StatusOK, "GET", "/api/v1/audit?action="+sluice.ActionLoginFailed, nil).decode(t, &audit)
	if len(audit.Items) != 5 || audit.Items[0].Object != "user/ed" {
		t.Fatalf("failed logins audited: %+v", audit.Items)
	}
	// The session cookie is HttpOnly and SameSite=Strict.
	res := e.anon().must(http.StatusOK, "POST", "/api/v1/auth/login", map[string]string{"username": "ap", "password": password})
	ck := res.header.Get("Set-Cookie")
	if !strings.Contains(ck, "HttpOnly") || !strings.Contains(ck, "SameSite=Strict") {
		t.Fatalf("cookie %q", ck)
	}
	// A node override is written to etcd and audited.
	ap.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/nodes/node-1/override", map[string]any{"drain": true, "reason": "maintenance"})
	got, err := e.etcd.Get(context.Background(), e.keys.Override("shop", "node-1"))
	if err != nil || len(got.Kvs) != 1 || !strings.Contains(string(got.Kvs[0].Value), `"by":"ap"`) {
		t.Fatalf("override in etcd: %v %v", got, err)
	}
	ap.must(http.StatusBadRequest, "PUT", "/api/v1/namespaces/shop/nodes/node-1/override", map[string]any{"degradeLevels": map[string]int{"x": 7}})
}
