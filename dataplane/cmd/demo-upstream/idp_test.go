package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/identity"
)

// TestDemoIdentityProvider checks the demo's identity provider against the
// demo rules' identity: the key is created once and read back, the JWKS
// served at /.well-known/jwks.json loads, and the two printed tokens
// verify with the claims the demo's tiers match (alice pro, bob free).
func TestDemoIdentityProvider(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../../deploy/rules/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := api.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(rs.Identities) != 1 {
		t.Fatalf("demo identities: %d", len(rs.Identities))
	}
	id := rs.Identities[0]
	path := filepath.Join(t.TempDir(), "idp.key")
	priv, err := loadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	again, err := loadOrCreateKey(path)
	if err != nil || !again.Equal(priv) {
		t.Fatalf("the key was not read back: %v", err)
	}
	srv := httptest.NewServer(withJWKS(handler("demo"), jwksHandler(priv)))
	defer srv.Close()
	if !strings.HasPrefix(id.JWT.JWKS.URL, "http://127.0.0.1:8081"+jwksPath) {
		t.Fatalf("the demo identity reads %s, not the demo upstream's JWKS", id.JWT.JWKS.URL)
	}
	id.JWT.JWKS.URL = srv.URL + jwksPath
	ks := identity.NewKeySource(identity.KeySettings{Source: id.JWT.JWKS})
	if err := ks.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	v := identity.New(identity.Settings{Identity: id, Keys: ks})
	var out strings.Builder
	now := time.Now()
	if err := printTokens(&out, priv, now); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("printed %q", out.String())
	}
	for _, line := range lines {
		f := strings.Fields(line)
		res, c, reason := v.Check(http.Header{"Authorization": {"Bearer " + f[2]}}, now.UnixNano())
		if res != identity.Valid {
			t.Fatalf("%s: %s", f[0], reason)
		}
		if sub, _ := c.Get("sub"); sub != f[0] {
			t.Errorf("sub %q, want %q", sub, f[0])
		}
		if plan, _ := c.Get("plan"); plan != f[1] {
			t.Errorf("plan %q, want %q", plan, f[1])
		}
	}
	// Other paths still echo.
	res, err := http.Get(srv.URL + "/api/x")
	if err != nil || res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("echo: %v %v", res, err)
	}
	res.Body.Close()
}
