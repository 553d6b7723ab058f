package gateway

import (
	"fmt"
	"net/http"
	"net/netip"
	"testing"
)

// TestIPv6Prefix: ip keys take an IPv6 client by its prefix (default /64,
// or the limit's ipv6Prefix), so the addresses of one /64 share a bucket
// while exempt still matches single addresses. Clients are forwarded by a
// trusted proxy on loopback, as the node sees them behind a load balancer.
func TestIPv6Prefix(t *testing.T) {
	t.Parallel()
	up := okUpstream(t)
	rules := fmt.Sprintf(`namespace: v6
routes:
  - {id: def, match: {pathPrefix: /def}, upstream: {targets: [{url: %[1]q}]}}
  - {id: p48, match: {pathPrefix: /p48}, upstream: {targets: [{url: %[1]q}]}}
  - {id: p128, match: {pathPrefix: /p128}, upstream: {targets: [{url: %[1]q}]}}
limits:
  - {id: def, routes: [def], key: [ip], algorithm: fixed_window, rate: 1, period: 1h, exempt: ["2001:db8:1:2::7"]}
  - {id: p48, routes: [p48], key: [ip], ipv6Prefix: 48, algorithm: fixed_window, rate: 1, period: 1h}
  - {id: p128, routes: [p128], key: [ip], ipv6Prefix: 128, algorithm: fixed_window, rate: 1, period: 1h}
`, up.URL)
	_, base, _ := MustStartConfig(t, rules, Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}})
	send := func(path, client string) int {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("X-Forwarded-For", client)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	steps := []struct {
		desc, path, client string
		want               int
	}{
		{"first address of a /64", "/def", "2001:db8:1:2::1", 200},
		{"another address of the same /64 shares its bucket", "/def", "2001:db8:1:2:ffff:ffff:ffff:fffe", 429},
		{"an exempt address of that /64 is still exempt", "/def", "2001:db8:1:2::7", 200},
		{"the next /64 is another client", "/def", "2001:db8:1:3::1", 200},
		{"IPv4 clients are keyed per address", "/def", "192.0.2.1", 200},
		{"another IPv4 address", "/def", "192.0.2.2", 200},
		{"ipv6Prefix 48: one /48", "/p48", "2001:db8:1:2::1", 200},
		{"ipv6Prefix 48: another /64 of the /48", "/p48", "2001:db8:1:ffff::1", 429},
		{"ipv6Prefix 128: one address", "/p128", "2001:db8:1:2::1", 200},
		{"ipv6Prefix 128: the next address is another client", "/p128", "2001:db8:1:2::2", 200},
		{"ipv6Prefix 128: the first again", "/p128", "2001:db8:1:2::1", 429},
	}
	for _, s := range steps {
		if got := send(s.path, s.client); got != s.want {
			t.Errorf("%s: GET %s from %s: %d, want %d", s.desc, s.path, s.client, got, s.want)
		}
	}
}
