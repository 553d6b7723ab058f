package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// sendRawStatus sends req (a request line and header, without the final CRLF)
// on a new connection to addr and returns the answer's status.
func sendRawStatus(t *testing.T, addr, req string) int {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: %v", req, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestTargetsHostsPathsRefused: issue 26's lows, on every HTTP/1 engine and
// on h2c: a CONNECT and OPTIONS * are refused (they reached a catch-all
// route as "CONNECT /127.0.0.1:18081" and "OPTIONS /*"); a Host with
// userinfo, a comma, or a port over 65535 is refused (it skipped the
// host-matched route and reached the catch-all); a path with a NUL, a tab
// or another control character, or a backslash, raw or escaped, is refused
// (it reached the upstream as sent, NUL included). None reaches the
// upstream. The ordinary shapes beside them are served by the route they
// name.
func TestTargetsHostsPathsRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc, method, host, target string
		want                       int
	}{
		{"a plain GET", "GET", "shop.example.com", "/a", http.StatusOK},
		{"a port", "GET", "shop.example.com:8080", "/a", http.StatusOK},
		{"an IPv6 address", "GET", "[::1]:80", "/a", http.StatusOK},
		{"a name with _ and -", "GET", "my_svc-1.internal", "/a", http.StatusOK},
		{"CONNECT", "CONNECT", "127.0.0.1:18081", "127.0.0.1:18081", http.StatusBadRequest},
		{"OPTIONS *", "OPTIONS", "shop.example.com", "*", http.StatusBadRequest},
		{"userinfo", "GET", "x@shop.example.com", "/a", http.StatusBadRequest},
		{"a comma", "GET", "shop.example.com,evil", "/a", http.StatusBadRequest},
		{"a port over 65535", "GET", "shop.example.com:65536", "/a", http.StatusBadRequest},
		{"a port of six digits", "GET", "shop.example.com:000080", "/a", http.StatusBadRequest},
		{"a letter in the port", "GET", "shop.example.com:8o", "/a", http.StatusBadRequest},
		{"a percent-escape", "GET", "shop%2eexample.com", "/a", http.StatusBadRequest},
		{"a zone", "GET", "[fe80::1%25eth0]", "/a", http.StatusBadRequest},
		{"%00", "GET", "shop.example.com", "/api/orders%00", http.StatusBadRequest},
		{"%09", "GET", "shop.example.com", "/api/orders%09", http.StatusBadRequest},
		{"%1f", "GET", "shop.example.com", "/api/%1forders", http.StatusBadRequest},
		{"%7F", "GET", "shop.example.com", "/api/orders%7F", http.StatusBadRequest},
		{"a backslash", "GET", "shop.example.com", `/api\orders`, http.StatusBadRequest},
		{"%5c", "GET", "shop.example.com", "/api%5corders", http.StatusBadRequest},
		{"UTF-8 escaped", "GET", "shop.example.com", "/caf%C3%A9", http.StatusOK},
	}
	var reached atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		fmt.Fprintf(w, "host route")
	}))
	t.Cleanup(up.Close)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		fmt.Fprintf(w, "catch-all")
	}))
	t.Cleanup(other.Close)
	rules := fmt.Sprintf(`namespace: targets
routes:
  - {id: shop, match: {hosts: [shop.example.com], pathPrefix: /}, upstream: {targets: [{url: %q}]}}
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}
`, up.URL, other.URL)
	_, base, _ := MustStartConfig(t, rules, Config{})
	addr := strings.TrimPrefix(base, "http://")
	for _, tc := range tests {
		before := reached.Load()
		if got := sendRawStatus(t, addr, fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\n", tc.method, tc.target, tc.host)); got != tc.want {
			t.Errorf("HTTP/1.1 %s: %d, want %d", tc.desc, got, tc.want)
		}
		if tc.want != http.StatusOK && reached.Load() != before {
			t.Errorf("HTTP/1.1 %s reached an upstream", tc.desc)
		}
		if tc.method != "GET" {
			continue // HTTP/2 has no such request lines
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		got := h2Status(t, c, tc.host, tc.target)
		c.Close()
		if got == 0 && tc.want != http.StatusOK {
			t.Logf("h2c %s: refused by the HTTP/2 server (RST_STREAM)", tc.desc)
		} else if got != tc.want {
			t.Errorf("h2c %s: %d, want %d", tc.desc, got, tc.want)
		}
		if tc.want != http.StatusOK && reached.Load() != before {
			t.Errorf("h2c %s reached an upstream", tc.desc)
		}
	}
}

// TestPathRuleMatchesGo: the gateway's path rule is Go net/http's: paths
// are case-sensitive, ";" and a trailing "." are ordinary characters of
// their segment (no matrix parameters are cut, no dot is trimmed), dot
// segments and repeated slashes are resolved, and escapes of unreserved
// characters decoded ("%2e" too, so "/api/%2e/orders" is "/api/orders",
// where Go's ServeMux keeps a segment named "."; the upstream gets the
// resolved path). For each path, the route the gateway picks (an exact
// route /api/orders and a prefix route /api/orders/ to upstream A, a
// catch-all to B) and the pattern the upstream's ServeMux picks for the
// path the gateway forwarded agree, and so does the pattern Go's ServeMux
// picks for the path as sent, unless the gateway forwarded another: a
// request counted under /api/orders's limits is one an upstream on
// net/http serves as /api/orders, and no other is.
func TestPathRuleMatchesGo(t *testing.T) {
	t.Parallel()
	patterns := []string{"/api/orders", "/api/orders/", "/"}
	mux := http.NewServeMux()
	for _, p := range patterns {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {})
	}
	paths := []string{
		"/api/orders", "/api/orders/", "/api/orders/1", "/api/orders;x", "/api/orders;jsessionid=1",
		"/api/orders/1;x", "/api/orders.", "/api/orders/.", "/API/orders", "/api/Orders", "/api/./orders",
		"/api//orders", "/api/x/../orders", "/api/orders/..", "/api/%6Frders", "/api/orders%3Bx",
		"/api/orders%2e", "/api/%2e/orders", "/api/orders%20", "/api/orders~",
	}
	goRoute := func(path string) string {
		r := httptest.NewRequest("GET", "http://g.test"+path, nil)
		_, p := mux.Handler(r)
		return p
	}
	family := func(pattern string) string {
		if pattern == "/api/orders" || pattern == "/api/orders/" {
			return "orders"
		}
		return "other"
	}
	upstream := func(name string) string {
		m := http.NewServeMux()
		for _, p := range patterns {
			m.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "%s %s %s", name, p, r.URL.EscapedPath())
			})
		}
		s := httptest.NewServer(m)
		t.Cleanup(s.Close)
		return s.URL
	}
	a, b := upstream("A"), upstream("B")
	_, base, _ := MustStartConfig(t, fmt.Sprintf(`namespace: gopaths
routes:
  - {id: orders, match: {path: /api/orders}, upstream: {targets: [{url: %q}]}}
  - {id: tree, match: {pathPrefix: /api/orders/}, upstream: {targets: [{url: %q}]}}
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}
`, a, a, b), Config{})
	addr := strings.TrimPrefix(base, "http://")
	for _, p := range paths {
		body := getBody(t, addr, p)
		var name, upPattern, forwarded string
		if _, err := fmt.Sscan(body, &name, &upPattern, &forwarded); err != nil {
			t.Errorf("%s: answer %q", p, body)
			continue
		}
		gw := map[string]string{"A": "orders", "B": "other"}[name]
		// The upstream's view of what the gateway forwarded is the
		// gateway's always; Go's view of the path as sent is too
		// when the gateway forwarded it as sent (it resolves
		// "%2e" segments, which Go's ServeMux keeps as a segment
		// named ".", and the upstream gets the resolved path).
		asSent := forwarded == p || goRoute(p) == goRoute(forwarded)
		if gw != family(upPattern) || asSent && gw != family(goRoute(p)) {
			t.Errorf("%s: the gateway routed it as %s (forwarded as %s), Go's ServeMux as %s (%q), the upstream as %s (%q)",
				p, gw, forwarded, family(goRoute(p)), goRoute(p), family(upPattern), upPattern)
		}
	}
}

// getBody sends a GET of target on a new connection and returns the
// answer's body.
func getBody(t *testing.T, addr, target string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: g.test\r\nConnection: close\r\n\r\n", target)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s: %v", target, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return string(b)
}
