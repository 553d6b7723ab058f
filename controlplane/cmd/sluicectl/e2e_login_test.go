package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLoginReplacesToken, against a real sluice-admin: sluicectl login
// mints a token that expires (30 days by default, --token-ttl), and a
// second login revokes the token it replaces in the token file when it is
// the same user's; another user's token there is left alone.
func TestLoginReplacesToken(t *testing.T) {
	p := startPlane(t)
	var me struct {
		TokenID int64 `json:"tokenId"`
	}
	if err := json.Unmarshal(p.call(t, p.adminToken, "GET", "/api/v1/me", "", http.StatusOK), &me); err != nil {
		t.Fatal(err)
	}
	expiry := func(token string, id int64) time.Time {
		t.Helper()
		var list struct {
			Items []struct {
				ID        int64     `json:"id"`
				ExpiresAt time.Time `json:"expiresAt"`
			} `json:"items"`
		}
		if err := json.Unmarshal(p.call(t, token, "GET", "/api/v1/tokens", "", http.StatusOK), &list); err != nil {
			t.Fatal(err)
		}
		for _, it := range list.Items {
			if it.ID == id {
				return it.ExpiresAt
			}
		}
		t.Fatalf("token %d not listed", id)
		return time.Time{}
	}
	if got, want := expiry(p.adminToken, me.TokenID), time.Now().Add(30*24*time.Hour); got.Before(want.Add(-time.Hour)) || got.After(want.Add(time.Hour)) {
		t.Fatalf("login's token expires at %s, want about %s", got, want)
	}

	// A second login as admin revokes the first token.
	r := p.ctl(t, []string{"XDG_CONFIG_HOME=" + p.adminHome}, adminPassword+"\n", "login", "--username", "admin", "--server", p.url, "--token-ttl", "1h").ok(t)
	if !strings.Contains(r.stdout, "revoked the token it replaces") {
		t.Errorf("login said %q", r.stdout)
	}
	p.call(t, p.adminToken, "GET", "/api/v1/me", "", http.StatusUnauthorized)
	b, _ := os.ReadFile(filepath.Join(p.adminHome, "sluice", "token"))
	second := strings.TrimSpace(string(b))
	if err := json.Unmarshal(p.call(t, second, "GET", "/api/v1/me", "", http.StatusOK), &me); err != nil {
		t.Fatal(err)
	}
	if got, want := expiry(second, me.TokenID), time.Now().Add(time.Hour); got.Before(want.Add(-time.Minute)) || got.After(want.Add(time.Minute)) {
		t.Fatalf("--token-ttl 1h: expires at %s, want about %s", got, want)
	}

	// bob logging in where admin's token is saved leaves admin's token alone.
	p.ctl(t, []string{"XDG_CONFIG_HOME=" + p.adminHome}, "bobs password 1\n", "login", "--username", "bob", "--server", p.url).ok(t)
	p.call(t, second, "GET", "/api/v1/me", "", http.StatusOK)
}
