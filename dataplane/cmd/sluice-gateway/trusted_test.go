package main

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

func TestBroadPrefix(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc, cidr string
		want       bool
	}{
		{"all IPv4", "0.0.0.0/0", true},
		{"all IPv6", "::/0", true},
		{"half the Internet", "0.0.0.0/1", true},
		{"a /7", "8.0.0.0/7", true},
		{"private /8", "10.0.0.0/8", false},
		{"one proxy", "192.0.2.10/32", false},
		{"IPv6 /16", "2000::/16", true},
		{"IPv6 /32", "2001:db8::/32", false},
		{"IPv6 private range", "fc00::/7", false},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			if got := broadPrefix(netip.MustParsePrefix(tt.cidr)); got != tt.want {
				t.Errorf("broadPrefix(%s) = %v, want %v", tt.cidr, got, tt.want)
			}
		})
	}
}

// TestBroadTrustedProxiesWarn: the binary started with --trusted-proxies
// 0.0.0.0/0 logs a warning naming the range, and serves.
func TestBroadTrustedProxiesWarn(t *testing.T) {
	up := upstream(t)
	g := startGateway(t, fmt.Sprintf(rulesTemplate, up.URL, 100, 10), "--trusted-proxies", "10.0.0.0/8,0.0.0.0/0,::/0")
	logs := g.stderr.String()
	for _, cidr := range []string{"0.0.0.0/0", "::/0"} {
		if !strings.Contains(logs, `"level":"WARN"`) || !strings.Contains(logs, `"cidr":"`+cidr+`"`) {
			t.Errorf("no warning for %s in:\n%s", cidr, logs)
		}
	}
	if strings.Contains(logs, `"cidr":"10.0.0.0/8"`) {
		t.Errorf("warned about 10.0.0.0/8:\n%s", logs)
	}
}
