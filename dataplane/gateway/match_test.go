package gateway

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// pathUpstream records the escaped path of every request it receives.
func pathUpstream(tb testing.TB) (*httptest.Server, func() []string) {
	tb.Helper()
	var mu sync.Mutex
	var paths []string
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.Method+" "+r.URL.EscapedPath())
		mu.Unlock()
	}))
	tb.Cleanup(s.Close)
	return s, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), paths...)
	}
}

const methodRules = `namespace: methods
routes:
  - {id: orders, match: {pathPrefix: /api/orders, methods: [GET]}, upstream: {targets: [{url: %[1]q}]}}
  - {id: purge, match: {pathPrefix: /cache, methods: [PURGE]}, upstream: {targets: [{url: %[1]q}]}}
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %[1]q}]}}
limits:
  - {id: orders-limit, routes: [orders], algorithm: fixed_window, rate: 1, period: 1h}
`

// TestMethodMatching: HEAD matches a route that allows GET and counts
// against its limits; a method that is not an upper-case registered HTTP
// method is refused with 400 unless a route lists it.
func TestMethodMatching(t *testing.T) {
	t.Parallel()
	up, seen := pathUpstream(t)
	_, base, _ := MustStart(t, fmt.Sprintf(methodRules, up.URL))
	addr := strings.TrimPrefix(base, "http://")
	req := func(method, path string) string {
		return fmt.Sprintf("%s %s HTTP/1.1\r\nHost: m.test\r\nConnection: close\r\n\r\n", method, path)
	}
	steps := []struct {
		desc   string
		method string
		path   string
		want   int
	}{
		{"GET takes the orders quota", "GET", "/api/orders", 200},
		{"HEAD counts against the GET route's limit", "HEAD", "/api/orders", 429},
		{"lower-case get is refused", "get", "/api/orders", 400},
		{"mixed-case Get is refused", "Get", "/api/orders", 400},
		{"unregistered method is refused", "FOO", "/api/orders", 400},
		{"a registered method reaches the catch-all", "PROPFIND", "/x", 200},
		{"a method a route lists is matched", "PURGE", "/cache/a", 200},
		{"POST is not GET's", "POST", "/api/orders", 200},
	}
	for _, s := range steps {
		status, body := sendRaw(t, addr, req(s.method, s.path))
		if status != s.want {
			t.Errorf("%s: %s %s got %d %s, want %d", s.desc, s.method, s.path, status, body, s.want)
		}
		if status == 400 && !strings.Contains(body, "is not a registered HTTP method") {
			t.Errorf("%s: 400 body %s does not say why", s.desc, body)
		}
	}
	got := strings.Join(seen(), ",")
	if want := "GET /api/orders,PROPFIND /x,PURGE /cache/a,POST /api/orders"; got != want {
		t.Errorf("upstream saw %s, want %s", got, want)
	}
}

const slashRules = `namespace: slashes
routes:
  - {id: orders, match: {pathPrefix: /api/orders}, upstream: {targets: [{url: %[1]q}]}}
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %[1]q}]}}
limits:
  - {id: orders-limit, routes: [orders], algorithm: fixed_window, rate: 1, period: 1h}
`

// TestEncodedSlashes: under each --encoded-slashes policy the gateway and the
// upstream agree on the path: reject refuses %2F (the default), decode
// matches and forwards /api/orders (so the orders limit applies), keep
// matches and forwards one segment.
func TestEncodedSlashes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc     string
		policy   string
		first    int    // GET /api/orders first, then /api%2Forders
		encoded  int    // status of /api%2Forders
		upstream string // what the upstream saw of it
	}{
		{"default rejects", "", 200, 400, ""},
		{"reject", "reject", 200, 400, ""},
		{"decode applies the orders limit", "decode", 200, 429, ""},
		{"keep forwards one segment to the catch-all", "keep", 200, 200, "GET /api%2Forders"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			up, seen := pathUpstream(t)
			var cfg Config
			if tt.policy != "" {
				if err := cfg.Snapshot.EncodedSlashes.UnmarshalText([]byte(tt.policy)); err != nil {
					t.Fatal(err)
				}
			}
			_, base, _ := MustStartConfig(t, fmt.Sprintf(slashRules, up.URL), cfg)
			addr := strings.TrimPrefix(base, "http://")
			if st, _ := sendRaw(t, addr, "GET /api/orders HTTP/1.1\r\nHost: s.test\r\nConnection: close\r\n\r\n"); st != tt.first {
				t.Fatalf("GET /api/orders: %d, want %d", st, tt.first)
			}
			st, body := sendRaw(t, addr, "GET /api%2forders HTTP/1.1\r\nHost: s.test\r\nConnection: close\r\n\r\n")
			if st != tt.encoded {
				t.Fatalf("GET /api%%2forders: %d %s, want %d", st, body, tt.encoded)
			}
			if st == 400 && !strings.Contains(body, "encoded slash") {
				t.Fatalf("400 body %s does not say why", body)
			}
			got := seen()
			if len(got) < 1 || got[0] != "GET /api/orders" {
				t.Fatalf("upstream saw %q first", got)
			}
			var rest string
			if len(got) > 1 {
				rest = strings.Join(got[1:], ",")
			}
			if rest != tt.upstream {
				t.Fatalf("upstream then saw %q, want %q", rest, tt.upstream)
			}
		})
	}
}
