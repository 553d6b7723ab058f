package http_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	sluice "github.com/sluicegw/sluice/controlplane"
)

// TestTokenExpiry: a token may be given a lifetime (expiresIn) or an end
// (expiresAt), not both; a bad lifetime is a 400 naming expiresIn; an
// expired token is refused 401.
func TestTokenExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	admin := e.login("admin")
	before := time.Now()
	var tok struct {
		ID        int64     `json:"id"`
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expiresAt"`
	}
	admin.must(http.StatusCreated, "POST", "/api/v1/tokens", map[string]any{"name": "ci", "role": "viewer", "expiresIn": "30d"}).decode(t, &tok)
	if want := before.Add(30 * 24 * time.Hour); tok.ExpiresAt.Before(want) || tok.ExpiresAt.After(want.Add(time.Minute)) {
		t.Fatalf("expiresAt %s, want 30 days from %s", tok.ExpiresAt, before)
	}
	c := e.anon()
	c.bearer = tok.Token
	c.must(http.StatusOK, "GET", "/api/v1/me", nil)

	for _, tc := range []struct {
		desc string
		body map[string]any
	}{
		{"not a duration", map[string]any{"name": "x", "role": "viewer", "expiresIn": "soon"}},
		{"negative", map[string]any{"name": "x", "role": "viewer", "expiresIn": "-1h"}},
		{"too long", map[string]any{"name": "x", "role": "viewer", "expiresIn": "4000d"}},
		{"both", map[string]any{"name": "x", "role": "viewer", "expiresIn": "1h", "expiresAt": time.Now().Add(time.Hour).Format(time.RFC3339)}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p := admin.must(http.StatusBadRequest, "POST", "/api/v1/tokens", tc.body).problem(t)
			if len(p.Errors) != 1 || p.Errors[0].Path != "expiresIn" {
				t.Fatalf("problem %+v, want one naming expiresIn", p)
			}
		})
	}

	// Past its end the token is refused.
	if _, err := e.db.SQL().Exec("UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE id = $1", tok.ID); err != nil {
		t.Fatal(err)
	}
	p := c.must(http.StatusUnauthorized, "GET", "/api/v1/me", nil).problem(t)
	if p.Code != sluice.EUNAUTHORIZED || !strings.Contains(p.Detail, "expired") {
		t.Fatalf("expired token: %+v", p)
	}
}
