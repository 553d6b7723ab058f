package proxy

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/api"
)

const precedenceRules = `
namespace: shop
routes:
  - id: catch-all
    match: {}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
  - id: root-prefix-host
    match: {pathPrefix: /, hosts: [admin.example.com]}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
  - id: api
    match: {pathPrefix: /api}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
  - id: orders
    match: {pathPrefix: /api/orders}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
  - id: orders-slash
    match: {pathPrefix: /api/orders/v2/}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
  - id: orders-wild
    match: {pathPrefix: /api/orders, hosts: ["*.example.com"]}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
  - id: orders-deep-wild
    match: {pathPrefix: /api/orders, hosts: ["*.eu.example.com"]}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
  - id: orders-shop
    match: {pathPrefix: /api/orders, hosts: [shop.example.com]}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
  - id: orders-shop-post
    match: {pathPrefix: /api/orders, hosts: [shop.example.com], methods: [POST]}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
  - id: orders-shop-canary
    match: {pathPrefix: /api/orders, hosts: [shop.example.com], methods: [POST], headers: {x-canary: "true"}}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
  - id: orders-shop-canary-dup
    match: {pathPrefix: /api/orders, hosts: [shop.example.com], methods: [POST], headers: {X-Canary: "true"}}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
  - id: orders-port
    match: {pathPrefix: /api/orders, hosts: ["ports.example.com:8443"]}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
  - id: orders-exact
    match: {path: /api/orders/count}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
  - id: health-exact-slash
    match: {path: /health/}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
  - id: users-regex
    match: {pathRegex: "^/api/users/[0-9]+$"}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
  - id: users-short-regex
    match: {pathRegex: "^/users/[0-9]+$"}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
  - id: any-regex
    match: {pathRegex: "^/v[0-9]+/"}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
  - id: any-regex-get
    match: {pathRegex: "^/v[0-9]+/", methods: [GET]}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
  - id: multi-host
    match: {pathPrefix: /multi, hosts: ["*.example.org", "a.example.org"]}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
  - id: multi-host-rival
    match: {pathPrefix: /multi, hosts: ["*.example.org"], methods: [GET]}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
`

func TestPrecedence(t *testing.T) {
	t.Parallel()
	rt := mustCompile(t, precedenceRules, false)
	canary := http.Header{"X-Canary": {"true"}}
	tests := []struct {
		desc   string
		host   string
		method string
		path   string
		header http.Header
		want   string // "" for no route
	}{
		{desc: "no path constraint catches the rest", host: "x.test", path: "/other", want: "catch-all"},
		{desc: "root prefix with host beats catch-all without", host: "admin.example.com", path: "/x", want: "root-prefix-host"},
		{desc: "prefix beats root prefix with host", host: "admin.example.com", path: "/api/x", want: "api"},
		{desc: "prefix equal to path", host: "x.test", path: "/api/orders", want: "orders"},
		{desc: "prefix below", host: "x.test", path: "/api/orders/1", want: "orders"},
		{desc: "prefix is segment-aware", host: "x.test", path: "/api/ordersX", want: "api"},
		{desc: "longer prefix wins", host: "x.test", path: "/api/orders/v2/list", want: "orders-slash"},
		{desc: "trailing-slash prefix needs the slash", host: "x.test", path: "/api/orders/v2", want: "orders"},
		{desc: "trailing-slash prefix matches the slash", host: "x.test", path: "/api/orders/v2/", want: "orders-slash"},
		{desc: "exact path beats prefix", host: "shop.example.com", path: "/api/orders/count", want: "orders-exact"},
		{desc: "exact path is exact", host: "x.test", path: "/api/orders/count/1", want: "orders"},
		{desc: "exact path with trailing slash", host: "x.test", path: "/health/", want: "health-exact-slash"},
		{desc: "exact path without its trailing slash", host: "x.test", path: "/health", want: "catch-all"},
		{desc: "exact host beats wildcard", host: "shop.example.com", method: "GET", path: "/api/orders", want: "orders-shop"},
		{desc: "host is case-insensitive", host: "SHOP.Example.COM", method: "GET", path: "/api/orders", want: "orders-shop"},
		{desc: "port of request ignored", host: "shop.example.com:9000", method: "GET", path: "/api/orders", want: "orders-shop"},
		{desc: "trailing dot ignored", host: "shop.example.com.", method: "GET", path: "/api/orders", want: "orders-shop"},
		{desc: "wildcard", host: "www.example.com", path: "/api/orders", want: "orders-wild"},
		{desc: "wildcard several labels", host: "a.b.example.com", path: "/api/orders", want: "orders-wild"},
		{desc: "longer wildcard beats shorter", host: "fr.eu.example.com", path: "/api/orders", want: "orders-deep-wild"},
		{desc: "wildcard needs a label", host: "example.com", path: "/api/orders", want: "orders"},
		{desc: "wildcard suffix at a dot", host: "badexample.com", path: "/api/orders", want: "orders"},
		{desc: "method constraint wins", host: "shop.example.com", method: "POST", path: "/api/orders/1", want: "orders-shop-post"},
		{desc: "more constraints win", host: "shop.example.com", method: "POST", path: "/api/orders/1", header: canary, want: "orders-shop-canary"},
		{desc: "header value exact", host: "shop.example.com", method: "POST", path: "/api/orders/1", header: http.Header{"X-Canary": {"TRUE"}}, want: "orders-shop-post"},
		{desc: "header among values", host: "shop.example.com", method: "POST", path: "/api/orders", header: http.Header{"X-Canary": {"no", "true"}}, want: "orders-shop-canary"},
		{desc: "method is case-sensitive", host: "shop.example.com", method: "post", path: "/api/orders", want: "orders-shop"},
		{desc: "named port must match", host: "ports.example.com:8443", path: "/api/orders", want: "orders-port"},
		{desc: "named port absent", host: "ports.example.com", path: "/api/orders", want: "orders-wild"},
		{desc: "named port differs", host: "ports.example.com:443", path: "/api/orders", want: "orders-wild"},
		{desc: "regex", host: "x.test", path: "/users/42", want: "users-short-regex"},
		{desc: "regex anchored as written", host: "x.test", path: "/users/42/x", want: "catch-all"},
		{desc: "prefix beats regex", host: "x.test", path: "/api/users/42", want: "api"},
		{desc: "regex beats catch-all", host: "x.test", path: "/v2/things", want: "any-regex-get"},
		{desc: "regex without method", host: "x.test", method: "DELETE", path: "/v2/things", want: "any-regex"},
		{desc: "multi-host ranks by matched host: exact", host: "a.example.org", method: "GET", path: "/multi", want: "multi-host"},
		{desc: "multi-host ranks by matched host: wildcard", host: "b.example.org", method: "GET", path: "/multi", want: "multi-host-rival"},
		{desc: "ipv6 host", host: "[::1]:9000", path: "/api/orders", want: "orders"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			method := tc.method
			if method == "" {
				method = "GET"
			}
			got := rt.Lookup(tc.host, method, tc.path, tc.header)
			gotID := ""
			if got != nil {
				gotID = got.ID
			}
			if gotID != tc.want {
				t.Errorf("Match(%q, %q, %q) = %q, want %q", tc.host, method, tc.path, gotID, tc.want)
			}
		})
	}
}

func TestNoRoute(t *testing.T) {
	t.Parallel()
	rt := mustCompile(t, `
namespace: shop
routes:
  - id: orders
    match: {pathPrefix: /api/orders, hosts: [shop.example.com]}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
`, false)
	if rt.Upstream("orders") == nil || rt.Upstream("nope") != nil {
		t.Error("Upstream by id: want orders' and nothing else")
	}
	for _, host := range []string{"other.example.com", "shop.example.com"} {
		if got := rt.Lookup(host, "GET", "/api", nil); got != nil {
			t.Errorf("Match(%q, /api) = %q, want no route", host, got.ID)
		}
	}
}

func TestNormalizePath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc   string
		in     string
		decode bool
		want   string
	}{
		{desc: "clean", in: "/api/orders", want: "/api/orders"},
		{desc: "root", in: "/", want: "/"},
		{desc: "empty", in: "", want: "/"},
		{desc: "dot-dot", in: "/api/orders/../orders", want: "/api/orders"},
		{desc: "double slashes", in: "//api//orders", want: "/api/orders"},
		{desc: "encoded dot-dot", in: "/api/orders/%2e%2e/x", want: "/api/x"},
		{desc: "encoded dot-dot upper", in: "/api/orders/%2E%2E/x", want: "/api/x"},
		{desc: "encoded dot", in: "/api/%2e/orders", want: "/api/orders"},
		{desc: "above root", in: "/../../etc/passwd", want: "/etc/passwd"},
		{desc: "trailing slash kept", in: "/api/orders/", want: "/api/orders/"},
		{desc: "trailing dot-dot", in: "/api/orders/..", want: "/api"},
		{desc: "encoded slash kept and upper-cased", in: "/api%2forders", want: "/api%2Forders"},
		{desc: "encoded slash decoded", in: "/api%2forders", decode: true, want: "/api/orders"},
		{desc: "encoded slash decoded then cleaned", in: "/api/x%2F..%2Forders", decode: true, want: "/api/orders"},
		{desc: "encoded slash hides no dot-dot", in: "/api/x%2F..%2Forders", want: "/api/x%2F..%2Forders"},
		{desc: "unreserved decoded", in: "/%7Euser/%41", want: "/~user/A"},
		{desc: "reserved stays encoded", in: "/a%3Fb%23c%25d", want: "/a%3Fb%23c%25d"},
		{desc: "lower hex upper-cased", in: "/caf%c3%a9", want: "/caf%C3%A9"},
		{desc: "raw non-ASCII escaped", in: "/caf\xc3\xa9", want: "/caf%C3%A9"},
		{desc: "space escaped", in: "/a b", want: "/a%20b"},
		{desc: "stray percent escaped", in: "/100%", want: "/100%25"},
		{desc: "sub-delims kept", in: "/a;b=c,d:e@f", want: "/a;b=c,d:e@f"},
		{desc: "relative", in: "a/b", want: "/a/b"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := normalizePath(tc.in, tc.decode); got != tc.want {
				t.Errorf("normalizePath(%q, %v) = %q, want %q", tc.in, tc.decode, got, tc.want)
			}
		})
	}
}

// TestIsCleanAgreesWithCleanPath checks the allocation-free shortcut against
// api.CleanPath on every path of up to six characters over a small alphabet.
func TestIsCleanAgreesWithCleanPath(t *testing.T) {
	t.Parallel()
	alphabet := []byte{'/', '.', 'a'}
	var walk func(p []byte)
	walk = func(p []byte) {
		s := string(p)
		if got, want := isClean(s), api.CleanPath(s) == s; got != want {
			t.Errorf("isClean(%q) = %v, CleanPath gives %q", s, got, api.CleanPath(s))
		}
		if len(p) == 6 {
			return
		}
		for _, c := range alphabet {
			walk(append(p, c))
		}
	}
	walk(nil)
}

func TestMatchUsesEscapedPath(t *testing.T) {
	t.Parallel()
	rt := mustCompile(t, `
namespace: shop
routes:
  - id: orders
    match: {pathPrefix: /api/orders}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
  - id: rest
    match: {pathPrefix: /}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
`, false)
	tests := []struct{ desc, target, wantPath, wantRoute string }{
		{"encoded slash", "/api%2Forders", "/api%2Forders", "rest"},
		{"encoded dot-dot", "/api/orders/%2e%2e/x", "/api/x", "rest"},
		{"dot-dot into orders", "/api/x/../orders/1", "/api/orders/1", "orders"},
		{"double slash", "//api//orders", "/api/orders", "orders"},
		{"encoded letters", "/api/%6Frders", "/api/orders", "orders"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("GET", "http://x.test"+tc.target, nil)
			m := rt.Match(r)
			if m.Path != tc.wantPath || m.Route == nil || m.Route.ID != tc.wantRoute {
				t.Errorf("Match(%q) = %q, %v; want %q, %q", tc.target, m.Path, m.Route, tc.wantPath, tc.wantRoute)
			}
		})
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	rt := mustCompile(t, benchRules(), false)
	r := httptest.NewRequest("GET", "http://shop.example.com/svc17/items/42", nil)
	r.Header.Set("X-Canary", "true")
	if m := rt.Match(r); m.Route == nil {
		t.Fatal("no route for the benchmark request")
	}
	if n := testing.AllocsPerRun(100, func() { rt.Match(r) }); n != 0 {
		t.Errorf("Match allocates %v times per call, want 0", n)
	}
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc  string
		route api.Route
		want  string
	}{
		{"bad regex", api.Route{ID: "r", Match: api.Match{PathRegex: "("},
			Upstream: api.Upstream{Targets: []api.Target{{URL: "http://a"}}}}, `route "r": compiling pathRegex`},
		{"bad scheme", api.Route{ID: "s", Upstream: api.Upstream{Targets: []api.Target{{URL: "ftp://a"}}}}, `route "s": target 0`},
		{"no host", api.Route{ID: "h", Upstream: api.Upstream{Targets: []api.Target{{URL: "http://"}}}}, `has no host`},
		{"no targets", api.Route{ID: "n"}, `route "n": no targets`},
		{"strip without prefix", api.Route{ID: "p", Upstream: api.Upstream{StripPrefix: true, Targets: []api.Target{{URL: "http://a"}}}}, "stripPrefix"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			tr := quietTransports()
			good := api.Route{ID: "good", Upstream: api.Upstream{Targets: []api.Target{{URL: "http://b"}}}}
			_, err := NewRouter([]api.Route{good, tc.route}, tr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Compile error = %v, want it to contain %q", err, tc.want)
			}
			if n := tr.Origins(); n != 0 {
				t.Errorf("a failed Compile left %d origins acquired, want 0", n)
			}
		})
	}
}

// benchRules is a rule set of 50 routes of mixed kinds.
func benchRules() string {
	var b strings.Builder
	b.WriteString("namespace: bench\nroutes:\n")
	add := func(id, match string) {
		fmt.Fprintf(&b, "  - id: %s\n    match: %s\n    upstream: {targets: [{url: \"http://127.0.0.1:1\"}]}\n", id, match)
	}
	for i := range 20 {
		add(fmt.Sprintf("prefix-%d", i), fmt.Sprintf("{pathPrefix: /svc%d/items}", i))
	}
	for i := range 10 {
		add(fmt.Sprintf("exact-%d", i), fmt.Sprintf("{path: /svc%d/items/count}", i))
	}
	for i := range 10 {
		add(fmt.Sprintf("host-%d", i), fmt.Sprintf("{pathPrefix: /svc%d, hosts: [shop.example.com, \"*.shop%d.example.com\"], methods: [GET, POST], headers: {X-Canary: \"true\"}}", 10+i, i))
	}
	for i := range 9 {
		add(fmt.Sprintf("regex-%d", i), fmt.Sprintf("{pathRegex: \"^/r%d/[a-z]+/[0-9]+$\"}", i))
	}
	add("default", "{pathPrefix: /}")
	return b.String()
}

func BenchmarkMatch(b *testing.B) {
	rt := mustCompile(b, benchRules(), false)
	reqs := []struct{ name, host, target string }{
		{"exact", "api.example.com", "/svc3/items/count"},
		{"prefix", "api.example.com", "/svc17/items/42"},
		{"host-header", "shop.example.com", "/svc15/items/42"},
		{"regex", "api.example.com", "/r8/abc/123"},
		{"default", "api.example.com", "/nothing/here/at/all"},
		{"unclean", "api.example.com", "/svc17//items/../items/42"},
	}
	for _, q := range reqs {
		r := httptest.NewRequest("GET", "http://"+q.host+q.target, nil)
		r.Header.Set("X-Canary", "true")
		b.Run(q.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if m := rt.Match(r); m.Route == nil {
						b.Fatal("no route")
					}
				}
			})
		})
	}
}

func TestAnchoredLiteralPrefix(t *testing.T) {
	t.Parallel()
	tests := []struct{ pattern, want string }{
		{`^/r8/[a-z]+`, "/r8/"},
		{`^/api/users/[0-9]+$`, "/api/users/"},
		{`\A/foo`, "/foo"},
		{`^ab|ac`, ""},
		{`^/abc|^/abd`, ""},
		{`(?i)^/abc`, ""},
		{`^(?i:/ab)c`, ""},
		{`/x`, ""},
		{`^(/a|/b)`, ""},
		{`^/a(/b)`, "/a"}, // a group ends the literal run: conservative
		{`^/caf\x{e9}`, "/caf\u00e9"},
	}
	for _, tc := range tests {
		t.Run(tc.pattern, func(t *testing.T) {
			t.Parallel()
			got := anchoredLiteralPrefix(tc.pattern)
			if got != tc.want {
				t.Errorf("anchoredLiteralPrefix(%q) = %q, want %q", tc.pattern, got, tc.want)
			}
			// Whatever the prefix, it must never reject a path the regex matches.
			re := regexp.MustCompile(tc.pattern)
			for _, p := range []string{"/r8/abc", "/api/users/1", "/foo", "ab", "ac", "xac", "/abd", "/ABC", "/ABc", "/x", "/b", "/a/b", "/caf\u00e9"} {
				if re.MatchString(p) && !strings.HasPrefix(p, got) {
					t.Errorf("prefix %q would reject %q, which %q matches", got, p, tc.pattern)
				}
			}
		})
	}
}
