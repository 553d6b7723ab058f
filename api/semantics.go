package api

import (
	"net/netip"
	"path"
	"strings"
)

// Applies reports whether a limit, breaker or degrade rule listing routes
// applies to the route routeID: an empty list applies to every route.
func Applies(routes []string, routeID string) bool {
	if len(routes) == 0 {
		return true
	}
	for _, r := range routes {
		if r == routeID {
			return true
		}
	}
	return false
}

// CleanPath returns the path a request is matched on and forwarded with:
// slashes collapsed, "." and ".." segments resolved (never above the root),
// rooted at "/", and a trailing slash kept. Matching and forwarding use the same
// cleaned path, so "/api/orders/../orders" or "//api/orders" cannot reach a
// route while dodging its limits. It does not decode percent escapes: an
// encoded slash (%2F) stays part of its segment, as the upstream will see it.
func CleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	c := path.Clean(p)
	if c != "/" && strings.HasSuffix(p, "/") {
		c += "/"
	}
	return c
}

// ClientIP returns the address a request is attributed to: the connection's
// peer, unless the peer is inside one of trusted (proxies), in which case
// X-Forwarded-For is read from right to left and the first address that is not
// itself trusted is taken. A malformed X-Forwarded-For entry stops the walk at
// the last address known good (a trusted proxy's); empty entries (as in
// "a,,b") are skipped. Entries may carry a port ("1.2.3.4:80", "[::1]:80"),
// which is dropped. IPv4-mapped IPv6 addresses are returned as IPv4 and zones
// are dropped, so that one client has one key. xff holds every
// X-Forwarded-For header value in the order received.
func ClientIP(peer netip.Addr, xff []string, trusted []netip.Prefix) netip.Addr {
	peer = peer.Unmap().WithZone("")
	if len(trusted) == 0 || len(xff) == 0 || !inAny(peer, trusted) {
		return peer
	}
	client := peer
	for i := len(xff) - 1; i >= 0; i-- {
		parts := strings.Split(xff[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			entry := strings.TrimSpace(parts[j])
			if entry == "" {
				continue
			}
			a, ok := parseForwarded(entry)
			if !ok {
				return client
			}
			client = a
			if !inAny(client, trusted) {
				return client
			}
		}
	}
	return client
}

// KeyAddr returns the address a client is keyed by in an ip key part: an
// IPv4 client (IPv4-mapped IPv6 included) is itself; an IPv6 client is the
// first address of its /ipv6Prefix (0, or outside 1-128, means
// DefaultIPv6Prefix), because one host commonly holds a whole /64 and
// could otherwise take a fresh identity per request. Zones are dropped.
// Exempt lists still match the whole address, not this one.
func KeyAddr(a netip.Addr, ipv6Prefix int) netip.Addr {
	a = a.Unmap().WithZone("")
	if !a.Is6() {
		return a
	}
	if ipv6Prefix <= 0 || ipv6Prefix > 128 {
		ipv6Prefix = DefaultIPv6Prefix
	}
	p, err := a.Prefix(ipv6Prefix)
	if err != nil {
		return a
	}
	return p.Addr()
}

// parseForwarded reads one X-Forwarded-For entry: an address, optionally with
// a port.
func parseForwarded(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, perr := netip.ParseAddrPort(s)
		if perr != nil {
			return netip.Addr{}, false
		}
		a = ap.Addr()
	}
	return a.Unmap().WithZone(""), true
}

func inAny(a netip.Addr, ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Contains(a) || (a.Is4() && p.Addr().Is4In6() && netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96).Contains(a)) {
			return true
		}
	}
	return false
}

// Header names used on limited responses (IETF httpapi RateLimit headers draft,
// and the older X-RateLimit-* family that many clients still read).
const (
	HeaderRetryAfter       = "Retry-After"
	HeaderRateLimit        = "RateLimit"
	HeaderRateLimitPolicy  = "RateLimit-Policy"
	HeaderXRateLimitLimit  = "X-RateLimit-Limit"
	HeaderXRateLimitRemain = "X-RateLimit-Remaining"
	HeaderXRateLimitReset  = "X-RateLimit-Reset"
	HeaderRequestID        = "X-Request-Id"
	ContentTypeProblemJSON = "application/problem+json"
)
