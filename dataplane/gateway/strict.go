package gateway

import (
	"net/http"
)

// strictTarget returns why an HTTP/1 request's target is refused, or "":
// the gateway routes on the Host header and the origin-form path, so a
// request line that names another authority (absolute-form, RFC 9112
// §3.2.2) or none (asterisk-form other than OPTIONS *, authority-form
// other than CONNECT) could be routed by the gateway and the upstream two
// ways. net/http refuses the rest of the smuggling shapes itself (two
// Content-Lengths, a bad Content-Length, an unknown Transfer-Encoding,
// bad chunk sizes, a bare CR or NUL, a space in a header name, no or two
// Hosts) with 400 (501 for a Transfer-Encoding it does not implement) and
// closes the connection; see the README's "Strict parsing" for what it
// normalizes instead of refusing.
func strictTarget(r *http.Request) string { return strictTargetOf(r.Method, r.RequestURI) }

// strictTargetOf is strictTarget on a request's method and target as sent,
// for every HTTP/1 engine.
func strictTargetOf(method, u string) string {
	switch {
	case len(u) > 0 && u[0] == '/':
		return ""
	case u == "*" && method == http.MethodOptions:
		return ""
	case u == "*":
		return "the asterisk-form request target is only for OPTIONS"
	case method == http.MethodConnect:
		return "" // authority-form; refused later (no route serves CONNECT)
	}
	return "the request target must be a path (origin-form), not an absolute URI"
}
