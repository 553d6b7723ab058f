package main

import (
	"log/slog"
	"net/netip"
	"strings"
)

// ula is IPv6's private range (fc00::/7), broad but not public.
var ula = netip.MustParsePrefix("fc00::/7")

// broadPrefix reports whether p, as a --trusted-proxies entry, trusts a large
// share of the Internet: an IPv4 range wider than /8 or an IPv6 range wider
// than /32 outside fc00::/7 (0.0.0.0/0 and ::/0 among them). Trusting such a
// range lets any client pick its own client IP with X-Forwarded-For, and so
// its own limit key.
func broadPrefix(p netip.Prefix) bool {
	if p.Addr().Is4() {
		return p.Bits() < 8
	}
	return p.Bits() < 32 && !(p.Bits() >= ula.Bits() && ula.Contains(p.Addr()))
}

// warnBroadProxies logs a warning for every broad --trusted-proxies entry.
func warnBroadProxies(log *slog.Logger, trusted []netip.Prefix) {
	for _, p := range trusted {
		if broadPrefix(p) {
			log.Warn("--trusted-proxies trusts a very broad range: any client in it can choose the client IP limits key on by sending X-Forwarded-For; list only your proxies' addresses",
				"cidr", p.String())
		}
	}
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
