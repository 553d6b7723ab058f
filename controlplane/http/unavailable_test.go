package http_test

import (
	"database/sql"
	"net/http"
	"net/url"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/internal/testenv"
)

// TestPostgresRefusing: while Postgres refuses the control plane's
// connections (its database closed to connections and its sessions
// terminated, as in a failover or a maintenance window), API calls answer
// 503 problem+json with Retry-After, not 500, whether authenticated by a
// session or a token, reading or writing; once it accepts them again the
// API answers as before.
func TestPostgresRefusing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	admin := e.login("admin")
	admin.must(http.StatusCreated, "POST", "/api/v1/namespaces", map[string]string{"name": "shop"})
	bot := e.token(admin, sluice.RoleAdmin)

	u, err := url.Parse(e.db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	root, err := sql.Open("pgx", testenv.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	exec := func(q string) {
		t.Helper()
		if _, err := root.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`ALTER DATABASE "` + name + `" ALLOW_CONNECTIONS false`)
	reopened := false
	reopen := func() {
		if !reopened {
			reopened = true
			exec(`ALTER DATABASE "` + name + `" ALLOW_CONNECTIONS true`)
		}
	}
	defer reopen()
	exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '` + name + `' AND pid <> pg_backend_pid()`)

	for _, tc := range []struct {
		desc   string
		c      *client
		method string
		path   string
		body   any
	}{
		{"token, read", bot, "GET", "/api/v1/namespaces", nil},
		{"session, read", admin, "GET", "/api/v1/namespaces/shop/changes", nil},
		{"token, write", bot, "POST", "/api/v1/namespaces", map[string]string{"name": "other"}},
		{"login", e.anon(), "POST", "/api/v1/auth/login", map[string]string{"username": "admin", "password": password}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := tc.c.must(http.StatusServiceUnavailable, tc.method, tc.path, tc.body)
			p := r.problem(t)
			if p.Code != sluice.EUNAVAILABLE || r.header.Get("Retry-After") == "" {
				t.Fatalf("problem %+v, Retry-After %q", p, r.header.Get("Retry-After"))
			}
		})
	}
	reopen()
	bot.must(http.StatusOK, "GET", "/api/v1/namespaces", nil)
}
