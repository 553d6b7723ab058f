package gateway

import (
	"net/http"
)

// strictTarget returns why an HTTP/1 request's target is refused, or "":
// the gateway routes on the Host header and the origin-form path, so a
// request line that names another authority (absolute-form, RFC 9112
// §3.2.2), or none (asterisk-form, OPTIONS *, which would reach the
// upstream as "OPTIONS /*"), or a CONNECT (authority-form: the gateway is
// no forward proxy, and a catch-all route forwarded "CONNECT host:port" as
// the path "/host:port") could be routed by the gateway and the upstream
// two ways, or not be meant for a route at all. net/http refuses the rest
// of the smuggling shapes itself (two Content-Lengths, a bad
// Content-Length, an unknown Transfer-Encoding, bad chunk sizes, a bare
// CR or NUL, a space in a header name, no or two Hosts) with 400 (501 for a
// Transfer-Encoding it does not implement) and closes the connection; see
// docs/gateway.md's "Strict parsing" for what it normalizes instead of
// refusing. HTTP/2 requests of these shapes are refused by the router
// (proxy.Router.MatchView), on every protocol.
func strictTarget(r *http.Request) string { return strictTargetOf(r.Method, r.RequestURI) }

// strictTargetOf is strictTarget on a request's method and target as sent,
// for every HTTP/1 engine.
func strictTargetOf(method, u string) string {
	switch {
	case method == http.MethodConnect:
		return "CONNECT is not served: the gateway is not a forward proxy"
	case len(u) > 0 && u[0] == '/':
		return ""
	case u == "*":
		return "the asterisk-form request target (OPTIONS *) is not served: send a path"
	}
	return "the request target must be a path (origin-form), not an absolute URI"
}
