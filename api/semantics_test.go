package api

import (
	"net/netip"
	"testing"
)

func TestCleanPath(t *testing.T) {
	t.Parallel()
	tests := []struct{ desc, in, want string }{
		{"empty is the root", "", "/"},
		{"root", "/", "/"},
		{"relative gets rooted", "api/orders", "/api/orders"},
		{"clean stays", "/api/orders", "/api/orders"},
		{"trailing slash kept", "/api/orders/", "/api/orders/"},
		{"double slashes", "//api//orders", "/api/orders"},
		{"double trailing slash", "/api/orders//", "/api/orders/"},
		{"dot segment", "/api/./orders", "/api/orders"},
		{"dot-dot segment", "/api/x/../orders", "/api/orders"},
		{"dot-dot dodging a prefix", "/api/orders/../admin", "/api/admin"},
		{"dot-dot above the root", "/../../etc/passwd", "/etc/passwd"},
		{"only dot-dots", "/../..", "/"},
		{"trailing dot", "/api/.", "/api"},
		{"trailing dot slash", "/api/./", "/api/"},
		{"trailing dot-dot slash", "/api/orders/../", "/api/"},
		{"encoded slash untouched", "/api/a%2F..%2Fb", "/api/a%2F..%2Fb"},
		{"dots in names are names", "/api/..orders/.x", "/api/..orders/.x"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			if got := CleanPath(tt.in); got != tt.want {
				t.Fatalf("CleanPath(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if again := CleanPath(tt.want); again != tt.want {
				t.Fatalf("CleanPath is not idempotent: %q → %q", tt.want, again)
			}
		})
	}
}

func TestClientIP(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	tests := []struct {
		desc    string
		peer    string
		xff     []string
		trusted []netip.Prefix
		want    string
	}{
		{"no proxies configured", "203.0.113.9", []string{"1.2.3.4"}, nil, "203.0.113.9"},
		{"untrusted peer spoofing XFF keeps the peer", "203.0.113.9", []string{"1.2.3.4"}, trusted, "203.0.113.9"},
		{"untrusted peer spoofing a trusted address", "203.0.113.9", []string{"10.0.0.1"}, trusted, "203.0.113.9"},
		{"trusted peer, no XFF", "10.0.0.1", nil, trusted, "10.0.0.1"},
		{"trusted peer, one hop", "10.0.0.1", []string{"198.51.100.7"}, trusted, "198.51.100.7"},
		{"chain read right to left", "10.0.0.1", []string{"6.6.6.6, 198.51.100.7, 10.0.0.2"}, trusted, "198.51.100.7"},
		{"client-supplied left part ignored", "10.0.0.1", []string{"1.1.1.1, 2.2.2.2, 198.51.100.7"}, trusted, "198.51.100.7"},
		{"several headers in order", "10.0.0.1", []string{"6.6.6.6", "198.51.100.7, 10.0.0.3", "10.0.0.2"}, trusted, "198.51.100.7"},
		{"every hop trusted", "10.0.0.1", []string{"10.0.0.3, 10.0.0.2"}, trusted, "10.0.0.3"},
		{"malformed entry stops at the last good (trusted) hop", "10.0.0.1", []string{"198.51.100.7, garbage, 10.0.0.2"}, trusted, "10.0.0.2"},
		{"malformed rightmost entry keeps the peer", "10.0.0.1", []string{"198.51.100.7, not-an-ip"}, trusted, "10.0.0.1"},
		{"malformed entry left of the client does not matter", "10.0.0.1", []string{"garbage, 198.51.100.7"}, trusted, "198.51.100.7"},
		{"empty entries skipped", "10.0.0.1", []string{"198.51.100.7,, ", ""}, trusted, "198.51.100.7"},
		{"entry with a port", "10.0.0.1", []string{"198.51.100.7:4711"}, trusted, "198.51.100.7"},
		{"IPv6 client", "10.0.0.1", []string{"2001:db8::1"}, trusted, "2001:db8::1"},
		{"IPv6 client with port", "10.0.0.1", []string{"[2001:db8::1]:443"}, trusted, "2001:db8::1"},
		{"IPv6 zone dropped", "10.0.0.1", []string{"fe80::1%eth0"}, trusted, "fe80::1"},
		{"IPv6 trusted proxy", "fd00::1", []string{"198.51.100.7, fd00::2"}, trusted, "198.51.100.7"},
		{"IPv6 untrusted peer", "2001:db8::9", []string{"198.51.100.7"}, trusted, "2001:db8::9"},
		{"IPv4-mapped peer is IPv4", "::ffff:203.0.113.9", nil, trusted, "203.0.113.9"},
		{"IPv4-mapped trusted peer", "::ffff:10.0.0.1", []string{"198.51.100.7"}, trusted, "198.51.100.7"},
		{"IPv4-mapped client is IPv4", "10.0.0.1", []string{"::ffff:198.51.100.7"}, trusted, "198.51.100.7"},
		{"IPv4-mapped trusted hop", "10.0.0.1", []string{"198.51.100.7, ::ffff:10.0.0.2"}, trusted, "198.51.100.7"},
		{"IPv4-mapped trusted prefix", "10.0.0.1", []string{"198.51.100.7"}, []netip.Prefix{netip.MustParsePrefix("::ffff:10.0.0.0/104")}, "198.51.100.7"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			got := ClientIP(netip.MustParseAddr(tt.peer), tt.xff, tt.trusted)
			if got.String() != tt.want {
				t.Fatalf("ClientIP = %v, want %s", got, tt.want)
			}
		})
	}
}

func TestApplies(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		routes []string
		route  string
		want   bool
	}{
		{nil, "orders", true},
		{[]string{}, "orders", true},
		{[]string{"orders"}, "orders", true},
		{[]string{"coupon", "orders"}, "orders", true},
		{[]string{"coupon"}, "orders", false},
		{[]string{"order"}, "orders", false},
	} {
		if got := Applies(tt.routes, tt.route); got != tt.want {
			t.Errorf("Applies(%q, %q) = %v, want %v", tt.routes, tt.route, got, tt.want)
		}
	}
}

func TestKeys(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ got, want string }{
		{Keys{}.RuleSet("shop"), "/sluice/v1/ns/shop/ruleset"},
		{Keys{Prefix: "/x/"}.RuleSet("shop"), "/x/ns/shop/ruleset"},
		{Keys{}.Canary("shop"), "/sluice/v1/ns/shop/canary"},
		{Keys{}.Nodes("shop"), "/sluice/v1/ns/shop/nodes/"},
		{Keys{}.Node("shop", "n1"), "/sluice/v1/ns/shop/nodes/n1"},
		{Keys{}.Overrides("shop"), "/sluice/v1/ns/shop/overrides/"},
		{Keys{}.Override("shop", "n1"), "/sluice/v1/ns/shop/overrides/n1"},
		{Keys{}.Namespace("shop"), "/sluice/v1/ns/shop/"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestKeyAddr(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc string
		in   string
		bits int
		want string
	}{
		{"ipv4 is itself", "192.0.2.7", 64, "192.0.2.7"},
		{"ipv4-mapped is the ipv4 client", "::ffff:192.0.2.7", 64, "192.0.2.7"},
		{"ipv6 by its /64", "2001:db8:1:2:3:4:5:6", 64, "2001:db8:1:2::"},
		{"0 means the default /64", "2001:db8:1:2:3:4:5:6", 0, "2001:db8:1:2::"},
		{"a /56", "2001:db8:1:2ff:3:4:5:6", 56, "2001:db8:1:200::"},
		{"/128 is the address", "2001:db8::1", 128, "2001:db8::1"},
		{"zone dropped", "fe80::1:2:3:4%eth0", 64, "fe80::"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			if got := KeyAddr(netip.MustParseAddr(tt.in), tt.bits).String(); got != tt.want {
				t.Fatalf("KeyAddr(%s, %d) = %s, want %s", tt.in, tt.bits, got, tt.want)
			}
		})
	}
}
