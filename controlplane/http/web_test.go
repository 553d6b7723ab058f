package http_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sluicehttp "github.com/sluicegw/sluice/controlplane/http"
)

// builtConsole writes a minimal built console (index.html and one hashed
// asset) and returns its directory.
func builtConsole(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "assets"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"index.html":             `<!doctype html><html><head><script type="module" src="/assets/index-abc123.js"></script></head><body><div id="root"></div></body></html>`,
		"assets/index-abc123.js": `console.log("sluice")`,
		"favicon.svg":            `<svg xmlns="http://www.w3.org/2000/svg"/>`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestConsoleServing(t *testing.T) {
	t.Parallel()
	srv, err := sluicehttp.New(sluicehttp.Settings{WebDir: builtConsole(t)})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc, method, path string
		status             int
		cache              string // "" means the header must be absent
		body               string // a substring of the body
		console            bool   // console security headers expected
		contentType        string // prefix
	}{
		{desc: "index at /", method: "GET", path: "/", status: 200, cache: "no-cache", body: `<div id="root">`, console: true, contentType: "text/html"},
		{desc: "deep link falls back to index.html", method: "GET", path: "/namespaces/demo/changes/7", status: 200, cache: "no-cache", body: `<div id="root">`, console: true, contentType: "text/html"},
		{desc: "deep link with a query", method: "GET", path: "/login?next=%2Faudit", status: 200, cache: "no-cache", body: `<div id="root">`, console: true},
		{desc: "HEAD of a deep link", method: "HEAD", path: "/audit", status: 200, cache: "no-cache", console: true},
		{desc: "hashed asset is immutable", method: "GET", path: "/assets/index-abc123.js", status: 200, cache: "public, max-age=31536000, immutable", body: "sluice", console: true, contentType: "text/javascript"},
		{desc: "missing asset is a 404, not index.html", method: "GET", path: "/assets/index-gone.js", status: 404, cache: "no-store", body: "no such asset", console: true},
		{desc: "other static file is revalidated", method: "GET", path: "/favicon.svg", status: 200, cache: "no-cache", console: true, contentType: "image/svg+xml"},
		{desc: "path traversal stays inside the console", method: "GET", path: "/../../etc/passwd", status: 200, cache: "no-cache", body: `<div id="root">`, console: true},
		{desc: "unknown API path is a problem, not the console", method: "GET", path: "/api/v1/nope", status: 404, body: `"code":"ENOTFOUND"`, contentType: "application/problem+json"},
		{desc: "POST to a console path is not served the console", method: "POST", path: "/namespaces", status: 404, body: `"code":"ENOTFOUND"`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d; body %q", rec.Code, tc.status, rec.Body.String())
			}
			h := rec.Header()
			if got := h.Get("Cache-Control"); got != tc.cache {
				t.Errorf("Cache-Control %q, want %q", got, tc.cache)
			}
			if !strings.Contains(rec.Body.String(), tc.body) {
				t.Errorf("body %q lacks %q", rec.Body.String(), tc.body)
			}
			if tc.contentType != "" && !strings.HasPrefix(h.Get("Content-Type"), tc.contentType) {
				t.Errorf("Content-Type %q, want %s…", h.Get("Content-Type"), tc.contentType)
			}
			if !tc.console {
				return
			}
			csp := h.Get("Content-Security-Policy")
			for _, want := range []string{"script-src 'self'", "frame-ancestors 'none'", "object-src 'none'", "default-src 'self'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("CSP %q lacks %q", csp, want)
				}
			}
			if strings.Contains(csp, "unsafe-eval") || strings.Contains(strings.SplitN(strings.SplitN(csp, "script-src", 2)[1], ";", 2)[0], "unsafe-inline") || strings.Contains(csp, "http") {
				t.Errorf("CSP %q allows inline, eval or remote script", csp)
			}
			if got := h.Get("X-Frame-Options"); got != "DENY" {
				t.Errorf("X-Frame-Options %q, want DENY", got)
			}
			if got := h.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options %q, want nosniff", got)
			}
		})
	}
}

// TestConsoleNotBuilt: without a built console on disk the binary still
// serves a page at / (the embedded build, or the placeholder that says how
// to build it), with the same security headers.
func TestConsoleNotBuilt(t *testing.T) {
	t.Parallel()
	srv, err := sluicehttp.New(sluicehttp.Settings{WebDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/", "/namespaces/demo/draft"} {
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
			t.Fatalf("GET %s: %d %q", p, rec.Code, rec.Header().Get("Content-Type"))
		}
		body := rec.Body.String()
		if !strings.Contains(body, `<div id="root">`) && !strings.Contains(body, "make build") {
			t.Errorf("GET %s: neither the console nor the placeholder: %q", p, body)
		}
		if rec.Header().Get("X-Frame-Options") != "DENY" || !strings.Contains(rec.Header().Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("GET %s: security headers missing: %v", p, rec.Header())
		}
		if rec.Header().Get("Cache-Control") != "no-cache" {
			t.Errorf("GET %s: Cache-Control %q", p, rec.Header().Get("Cache-Control"))
		}
	}
}
