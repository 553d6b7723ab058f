package gateway

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicegw/sluice/dataplane/identity/identitytest"
)

// TestIdentityThroughNode runs the bad-token table of issue 28 through a
// running node on each HTTP/1.1 engine (the default first): every bad
// token is answered 401 with WWW-Authenticate: Bearer
// error="invalid_token" (a huge one may be refused 431 by the engine's
// header limit instead), a JWKS served over HTTP verifies good tokens of
// every algorithm, and the per-user limit keys on the verified sub.
func TestIdentityThroughNode(t *testing.T) {
	t.Parallel()
	is := identitytest.NewIssuer(t, "https://idp.test")
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(is.JWKS(t)) }))
	t.Cleanup(jwks.Close) // subtests run in parallel, after this function returns
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(up.Close)
	file := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(file, is.JWKS(t), 0o600); err != nil {
		t.Fatal(err)
	}
	rules := fmt.Sprintf(`namespace: t
routes:
  - {id: api, match: {pathPrefix: /api}, upstream: {targets: [{url: %q}]}}
  - {id: files, match: {pathPrefix: /files}, upstream: {targets: [{url: %q}]}}
identities:
  - id: users
    routes: [api]
    jwt: {jwks: {url: %q, refresh: 1m}, issuer: "https://idp.test", audiences: [shop-api], algorithms: [RS256, ES256, EdDSA]}
  - id: files
    routes: [files]
    jwt: {from: {cookie: session}, jwks: {file: %q}, issuer: "https://idp.test", algorithms: [ES256], required: true}
limits:
  - {id: per-user, routes: [api], key: [jwt:sub], algorithm: token_bucket, rate: 2, period: 1h}
`, up.URL, up.URL, jwks.URL, file)
	n, base, _ := MustStartConfig(t, rules, Config{})
	if ids := n.Status().Identities; len(ids) != 2 || ids[0].ID != "users" || ids[0].Keys != 3 || ids[1].Keys != 3 {
		t.Fatalf("status identities %+v", ids)
	}
	do := func(path string, h http.Header) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		for k, vs := range h {
			req.Header[k] = vs
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	now := time.Now()
	for _, bt := range is.BadTokens(t, "shop-api", now) {
		h := http.Header{"Authorization": {"Bearer " + bt.Token}}
		if bt.Twice {
			h.Add("Authorization", "Bearer "+bt.Token)
		}
		res := do("/api/x", h)
		if res.StatusCode == http.StatusRequestHeaderFieldsTooLarge && bt.Desc == "huge token" {
			continue
		}
		if res.StatusCode != http.StatusUnauthorized || res.Header.Get("Www-Authenticate") != `Bearer error="invalid_token"` {
			t.Errorf("%s: status %d, WWW-Authenticate %q", bt.Desc, res.StatusCode, res.Header.Get("Www-Authenticate"))
		}
	}
	for i, c := range []struct {
		kid, sub string
		want     int
	}{{"rsa1", "alice", 200}, {"ec1", "alice", 200}, {"ed1", "alice", 429}, {"ed1", "bob", 200}} {
		tok := is.Sign(t, c.kid, is.Claims(c.sub, "shop-api", now, nil))
		if res := do("/api/x", http.Header{"Authorization": {"Bearer " + tok}}); res.StatusCode != c.want {
			t.Errorf("good token %d (%s, %s): status %d, want %d", i, c.kid, c.sub, res.StatusCode, c.want)
		}
	}
	// The cookie identity requires a token.
	if res := do("/files/x", nil); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("files without a token: %d", res.StatusCode)
	}
	tok := is.Sign(t, "ec1", is.Claims("carol", "any", now, nil))
	if res := do("/files/x", http.Header{"Cookie": {"session=" + tok}}); res.StatusCode != 200 {
		t.Errorf("files with a cookie token: %d", res.StatusCode)
	}
}
