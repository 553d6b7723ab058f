package admin

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHostAndOrigin: the endpoint refuses requests whose Host does not name
// it (DNS rebinding) and requests from another origin, even from loopback;
// curl-style requests from loopback and token clients on an allowed name
// pass; /healthz and /readyz stay open.
func TestHostAndOrigin(t *testing.T) {
	t.Parallel()
	mutate := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h := New(Settings{
		Token:        "s3cret",
		Addr:         "127.0.0.1:9901",
		AllowedHosts: []string{"gw-1.internal", "Node.Example:9901", "10.9.8.7"},
		Extra:        map[string]http.Handler{"POST /degrade": mutate},
	})
	json := "application/json"
	tests := []struct {
		desc, method, path, remote, host string
		hdr                              map[string]string
		want                             int
	}{
		{desc: "curl from loopback", method: "GET", path: "/status", host: "127.0.0.1:9901", want: 200},
		{desc: "localhost name", method: "GET", path: "/status", host: "localhost:9901", want: 200},
		{desc: "ipv6 loopback host", method: "GET", path: "/status", remote: "[::1]:1", host: "[::1]:9901", want: 200},
		{desc: "curl --json mutation from loopback", method: "POST", path: "/degrade", host: "127.0.0.1:9901", hdr: map[string]string{"Content-Type": json}, want: 204},
		{desc: "json with charset", method: "POST", path: "/degrade", host: "localhost", hdr: map[string]string{"Content-Type": "application/json; charset=utf-8"}, want: 204},
		{desc: "same-origin browser", method: "POST", path: "/degrade", host: "127.0.0.1:9901", hdr: map[string]string{"Content-Type": json, "Origin": "http://127.0.0.1:9901", "Sec-Fetch-Site": "same-origin"}, want: 204},
		{desc: "DNS rebinding", method: "POST", path: "/degrade", host: "attacker.example:9901", hdr: map[string]string{"Content-Type": "text/plain", "Origin": "http://attacker.example:9901"}, want: 421},
		{desc: "rebinding read", method: "GET", path: "/status", host: "attacker.example", want: 421},
		{desc: "rebinding with json", method: "POST", path: "/degrade", host: "attacker.example", hdr: map[string]string{"Content-Type": json}, want: 421},
		{desc: "cross-site form post", method: "POST", path: "/degrade", host: "127.0.0.1:9901", hdr: map[string]string{"Content-Type": "text/plain", "Origin": "http://attacker.example"}, want: 403},
		{desc: "cross origin with json", method: "POST", path: "/degrade", host: "127.0.0.1:9901", hdr: map[string]string{"Content-Type": json, "Origin": "http://attacker.example"}, want: 403},
		{desc: "null origin", method: "POST", path: "/degrade", host: "127.0.0.1:9901", hdr: map[string]string{"Content-Type": json, "Origin": "null"}, want: 403},
		{desc: "other port is another origin", method: "GET", path: "/status", host: "127.0.0.1:9901", hdr: map[string]string{"Origin": "http://127.0.0.1:8080"}, want: 403},
		{desc: "sec-fetch-site cross-site", method: "GET", path: "/status", host: "127.0.0.1:9901", hdr: map[string]string{"Sec-Fetch-Site": "cross-site"}, want: 403},
		{desc: "sec-fetch-site same-site", method: "GET", path: "/status", host: "127.0.0.1:9901", hdr: map[string]string{"Sec-Fetch-Site": "same-site"}, want: 403},
		{desc: "text/plain mutation without origin", method: "POST", path: "/degrade", host: "127.0.0.1:9901", hdr: map[string]string{"Content-Type": "text/plain"}, want: 403},
		{desc: "mutation without content type", method: "POST", path: "/degrade", host: "127.0.0.1:9901", want: 403},
		{desc: "form mutation", method: "POST", path: "/degrade", host: "127.0.0.1:9901", hdr: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, want: 403},
		{desc: "allowed extra name with token", method: "GET", path: "/status", remote: "10.1.1.1:1", host: "gw-1.internal:9901", hdr: map[string]string{"Authorization": "Bearer s3cret"}, want: 200},
		{desc: "allowed extra name case-insensitive, port ignored", method: "GET", path: "/status", host: "NODE.example", want: 200},
		{desc: "allowed extra address", method: "GET", path: "/status", remote: "10.1.1.1:1", host: "10.9.8.7:9901", hdr: map[string]string{"Authorization": "Bearer s3cret"}, want: 200},
		{desc: "unknown address", method: "GET", path: "/status", host: "192.0.2.55:9901", want: 421},
		{desc: "unknown name with token", method: "GET", path: "/status", remote: "10.1.1.1:1", host: "evil.example", hdr: map[string]string{"Authorization": "Bearer s3cret"}, want: 421},
		{desc: "healthz open to any host", method: "GET", path: "/healthz", remote: "10.1.1.1:1", host: "lb.example", want: 200},
		{desc: "readyz open to any host", method: "GET", path: "/readyz", remote: "10.1.1.1:1", host: "lb.example", want: 200},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			var body *strings.Reader
			if tc.method == "POST" {
				body = strings.NewReader(`{"rule":"d","level":1,"ttl":"1m"}`)
			} else {
				body = strings.NewReader("")
			}
			r := httptest.NewRequest(tc.method, tc.path, body)
			r.RemoteAddr, r.Host = "127.0.0.1:5000", tc.host
			if tc.remote != "" {
				r.RemoteAddr = tc.remote
			}
			for k, v := range tc.hdr {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Fatalf("%s %s Host %s %v = %d %s, want %d", tc.method, tc.path, tc.host, tc.hdr, w.Code, w.Body, tc.want)
			}
		})
	}
}

// TestWildcardListenAllowsInterfaces: listening on every interface, the
// machine's own addresses are allowed Hosts, others are not.
func TestWildcardListenAllowsInterfaces(t *testing.T) {
	t.Parallel()
	hs := allowedHosts(Settings{Addr: ":9901"})
	if !hs.allows("127.0.0.1:9901") || !hs.allows("localhost") {
		t.Fatal("loopback refused")
	}
	if hs.allows("192.0.2.200:9901") || hs.allows("attacker.example") {
		t.Fatal("foreign host allowed")
	}
	if len(hs.addrs) == 0 {
		t.Skip("no interface addresses")
	}
	for a := range hs.addrs {
		if !hs.allows(a.String()) {
			t.Errorf("interface address %s refused", a)
		}
	}
}
