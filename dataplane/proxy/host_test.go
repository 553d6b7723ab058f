package proxy

import "testing"

func TestValidHost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		host string
		ok   bool
	}{
		{"", true},
		{"shop.example.com", true},
		{"SHOP.Example.COM:443", true},
		{"my_svc-1.internal:8080", true},
		{"192.0.2.1:65535", true},
		{"[::1]", true},
		{"[2001:db8::1]:80", true},
		{"[::ffff:192.0.2.1]", true},
		{"shop.example.com:", true}, // RFC 3986: an empty port is no port
		{"x@shop.example.com", false},
		{"shop.example.com,evil", false},
		{"shop.example.com:65536", false},
		{"shop.example.com:000080", false},
		{"shop.example.com:-1", false},
		{"shop.example.com:80:80", false},
		{"shop example.com", false},
		{"shop%2eexample.com", false},
		{"shop.example.com;x", false},
		{":80", false},
		{"[]", false},
		{"[::1", false},
		{"[::1]x", false},
		{"[fe80::1%25eth0]", false},
		{"[v1.x]", false},
		{"shop.example.com\x00", false},
	} {
		if got := ValidHost(tc.host); got != tc.ok {
			t.Errorf("ValidHost(%q) = %v, want %v", tc.host, got, tc.ok)
		}
	}
}
