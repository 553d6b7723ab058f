package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/controlplane/internal/testenv"
	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

// TestEnvironment: each flag is read from its SLUICE_ variable, the command
// line wins, and a malformed value is an error naming the variable and the
// value instead of being ignored in favour of the default.
func TestEnvironment(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		env     map[string]string
		args    []string
		check   func(*Config) bool
		wantErr string
	}{
		{desc: "int", env: map[string]string{"SLUICE_MAX_BODY_BYTES": "100"}, check: func(c *Config) bool { return c.MaxBodyBytes == 100 }},
		{desc: "command line wins", env: map[string]string{"SLUICE_MAX_BODY_BYTES": "100"}, args: []string{"--max-body-bytes", "200"},
			check: func(c *Config) bool { return c.MaxBodyBytes == 200 }},
		{desc: "duration and bool", env: map[string]string{"SLUICE_DATABASE_WAIT": "5s", "SLUICE_SECURE_COOKIES": "true"},
			check: func(c *Config) bool { return c.DatabaseWait == 5*time.Second && c.SecureCookies }},
		{desc: "string", env: map[string]string{"SLUICE_LISTEN": "127.0.0.1:1"}, check: func(c *Config) bool { return c.Listen == "127.0.0.1:1" }},
		{desc: "malformed int", env: map[string]string{"SLUICE_MAX_BODY_BYTES": "abc"}, wantErr: `invalid value "abc" for environment SLUICE_MAX_BODY_BYTES`},
		{desc: "malformed duration", env: map[string]string{"SLUICE_PUBLISH_POLL_INTERVAL": "2"}, wantErr: `invalid value "2" for environment SLUICE_PUBLISH_POLL_INTERVAL`},
		{desc: "malformed bool", env: map[string]string{"SLUICE_INSECURE_NO_AUDIT_KEY": "maybe"}, wantErr: `invalid value "maybe" for environment SLUICE_INSECURE_NO_AUDIT_KEY`},
		{desc: "malformed, even with the flag given", env: map[string]string{"SLUICE_NODE_RETENTION": "a day"}, args: []string{"--node-retention", "1h"},
			wantErr: "SLUICE_NODE_RETENTION"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cfg, err := parseFlags("serve", tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseFlags: %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !tc.check(cfg) {
				t.Fatalf("parseFlags: %+v, %v", cfg, err)
			}
		})
	}
}

// TestMainCloseWaits: Main serves with real Postgres and etcd, and once
// Close returns every goroutine Run started is gone (publisher, node
// watcher, notification listener, HTTP server, clients).
func TestMainCloseWaits(t *testing.T) {
	e := etcdtest.Start(t)
	dbURL := testenv.MustDatabase(t)
	t.Setenv("SLUICE_BOOTSTRAP_ADMIN_PASSWORD", "a long enough password")
	cfg, err := parseFlags("serve", []string{"--database-url", dbURL, "--etcd-endpoints", e.Addr(), "--listen", "127.0.0.1:0",
		"--insecure-no-audit-key", "--insecure-publish-unsigned", "--web-dir", "", "--publish-poll-interval", "50ms"})
	if err != nil {
		t.Fatal(err)
	}
	base := runtime.NumGoroutine()
	m := NewMain(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.Run(ctx); err != nil {
		m.Close()
		t.Fatalf("Run: %v", err)
	}
	c := &http.Client{}
	resp, err := c.Get("http://" + m.Addr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/readyz: %d", resp.StatusCode)
	}
	c.CloseIdleConnections()
	if err := m.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.Get("http://" + m.Addr() + "/readyz"); err == nil {
		t.Fatal("still serving after Close")
	}
	waitGoroutines(t, base)
}

// waitGoroutines waits (bounded) for the goroutine count to fall to base:
// goroutines that ended may take a moment to be reaped, and closed
// connections' readers a moment to notice.
func waitGoroutines(tb testing.TB, base int) {
	tb.Helper()
	for range 1000 {
		if runtime.NumGoroutine() <= base {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	tb.Fatalf("%d goroutines, want at most %d:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
}
