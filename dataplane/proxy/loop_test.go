package proxy

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestLooping(t *testing.T) {
	t.Parallel()
	tr := NewTransport(Settings{NodeID: "gw-1", MaxHops: 4, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	tests := []struct {
		desc string
		via  []string
		want bool
	}{
		{desc: "no Via"},
		{desc: "other proxies", via: []string{"1.1 nginx, 1.0 fred"}},
		{desc: "this node", via: []string{"1.1 sluice-gw-1"}, want: true},
		{desc: "this node case-insensitively", via: []string{"1.1 SLUICE-GW-1"}, want: true},
		{desc: "this node after others", via: []string{"1.0 fred, 1.1 p.example (Apache/1.1)", "2 sluice-gw-1"}, want: true},
		{desc: "this node with a comment", via: []string{"HTTP/1.1 sluice-gw-1 (loop)"}, want: true},
		{desc: "another sluice node", via: []string{"1.1 sluice-gw-2"}},
		{desc: "prefix of this node is not it", via: []string{"1.1 sluice-gw-10"}},
		{desc: "three hops", via: []string{"1.1 a, 1.1 b", "1.1 c"}},
		{desc: "hop limit", via: []string{"1.1 a, 1.1 b", "1.1 c,1.1 d"}, want: true},
		{desc: "empty elements do not count", via: []string{"1.1 a, , ,1.1 b,,1.1 c"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("GET", "/", nil)
			if tt.via != nil {
				r.Header["Via"] = tt.via
			}
			if got := tr.Looping(r); got != tt.want {
				t.Errorf("Looping(Via %q) = %v, want %v", tt.via, got, tt.want)
			}
		})
	}
}

func TestViaName(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]string{"gw-1": "sluice-gw-1", "gw 1,(x)": "sluice-gw-1--x-", "a.b_c~": "sluice-a.b_c~"} {
		if got := viaName(id); got != want {
			t.Errorf("viaName(%q) = %q, want %q", id, got, want)
		}
	}
}

// TestForwardAddsVia: the upstream sees the client's Via with this node's
// entry appended.
func TestForwardAddsVia(t *testing.T) {
	t.Parallel()
	seen := make(chan []string, 2)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen <- r.Header["Via"] }))
	t.Cleanup(up.Close)
	tr := NewTransport(Settings{NodeID: "gw-7", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	rt, err := NewRouter(mustRoutes(t, oneRoute("r", "{pathPrefix: /}", fmt.Sprintf(`{targets: [{url: "%s"}]}`, up.URL))), tr)
	if err != nil {
		t.Fatal(err)
	}
	gw := newGateway(t, rt, nil)
	for _, tc := range []struct{ in, want string }{{"", "1.1 sluice-gw-7"}, {"1.0 fred", "1.0 fred|1.1 sluice-gw-7"}} {
		req, _ := http.NewRequest("GET", gw.URL+"/x", nil)
		if tc.in != "" {
			req.Header.Set("Via", tc.in)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := strings.Join(<-seen, "|"); got != tc.want {
			t.Errorf("upstream Via = %q, want %q", got, tc.want)
		}
	}
}

// TestSelfTargetRefused: a route whose target is one of the gateway's own
// listeners does not compile, with an error naming the listener; other
// targets do.
func TestSelfTargetRefused(t *testing.T) {
	t.Parallel()
	tr := quietTransports()
	tr.SetListeners(":9000", "127.0.0.1:9901", "[::1]:9902", "localhost:9903")
	tr.self.mu.Lock()
	local := ""
	for a := range tr.self.local {
		if !a.IsLoopback() && a.Is4() {
			local = a.String()
		}
	}
	host := tr.self.hostname
	tr.self.mu.Unlock()
	tests := []struct {
		desc, url string
		self      bool
	}{
		{"wildcard listener via loopback", "http://127.0.0.1:9000", true},
		{"wildcard listener via 127.0.0.2", "http://127.0.0.2:9000/api", true},
		{"wildcard listener via localhost", "http://localhost:9000", true},
		{"wildcard listener via ::1", "http://[::1]:9000", true},
		{"wildcard listener via 0.0.0.0", "h2c://0.0.0.0:9000", true},
		{"admin listener", "http://127.0.0.1:9901", true},
		{"ipv6 loopback listener", "http://[::1]:9902", true},
		{"localhost listener", "http://127.0.0.1:9903", true},
		{"specific listener, other loopback address", "http://127.0.0.2:9901", false},
		{"other port", "http://127.0.0.1:9001", false},
		{"remote address", "http://192.0.2.1:9000", false},
		{"names are not resolved", "http://upstream.example:9000", false},
		{"default port", "http://127.0.0.1", false},
	}
	if local != "" {
		tests = append(tests, struct {
			desc, url string
			self      bool
		}{"wildcard listener via an interface address", "http://" + local + ":9000", true})
	}
	if host != "" && !strings.ContainsAny(host, "_ ") {
		tests = append(tests, struct {
			desc, url string
			self      bool
		}{"wildcard listener via the host name", "http://" + host + ":9000", true})
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			rt, err := NewRouter(mustRoutes(t, oneRoute("r", "{pathPrefix: /}", fmt.Sprintf(`{targets: [{url: "%s"}]}`, tt.url))), tr)
			if rt != nil {
				rt.CloseIdle()
			}
			if tt.self {
				if err == nil || !strings.Contains(err.Error(), "own listener") {
					t.Fatalf("NewRouter(%s) = %v, want the own-listener error", tt.url, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewRouter(%s): %v", tt.url, err)
			}
		})
	}
}
