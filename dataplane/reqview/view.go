// Package reqview is the gateway's one view of a request: method, host,
// cleaned path, raw query, header, cookies, client IP, request id and trace
// context, built once per request by the serving stack and read by every
// rule (limits, degrade plans, breakers) and by the decision log, so that two
// rules can never read one request two ways.
//
// # One meaning for key parts
//
// A rule's key (limits[].key, degrades[].key) reads parts of the request
// through the View, and only through it:
//
//   - header:NAME is the header's first value (NAME in canonical form).
//   - query:NAME is the first parameter of the raw query whose name, decoded,
//     is NAME; its value percent-decoded the way url.ParseQuery decodes it
//     ("+" is a space), so ?user=a%20b and ?user=a+b are one client to every
//     rule; a value whose escapes are malformed is read raw.
//   - cookie:NAME is the first cookie named NAME in the Cookie header lines,
//     without its double quotes, percent-decoded as PHP's $_COOKIE and
//     Express's cookie parser decode it (DecodeCookie: %XX escapes, "+"
//     stays), so that sid=%61pikey1 and sid=apikey1 are one client to every
//     rule; a limit with cookieDecoding: raw reads it undecoded
//     (RawCookiePart).
//   - header:NAME is taken as sent: no stack decodes a header value.
//
// An empty value is a missing one (stacks disagree on whether "?user="
// carries a parameter). Requests where any of this is ambiguous (a repeated
// parameter, a respelled name, a header named in Connection, ...) are refused
// before any rule decides, by classify.KeyCheck, which records the values it
// checked in the View (SetChecked) so that rules read what was checked.
package reqview

import (
	"context"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// View is one request as the rules read it. The serving stack fills it once
// per request (FromRequest for net/http, then the matched Path, ClientIP,
// RouteID, RequestID and Trace) and hands a pointer to every stage; stages
// only read it. The zero value is an empty request (no header, no client).
// A View is not safe for concurrent mutation; it lives for one request and
// is meant to stay on the stack.
type View struct {
	// Method is the request method, as sent.
	Method string
	// Host is the request's host (the Host header or the :authority).
	Host string
	// RawPath is the path as sent, escaped (url.URL.EscapedPath): what
	// the router cleans and matches on.
	RawPath string
	// Path is the cleaned path the route was matched on (what is
	// forwarded); the router's match sets it.
	Path string
	// RawQuery is the query, undecoded, without its "?".
	RawQuery string
	// header is the request's header (Header), or nil until src builds it.
	header http.Header
	src    HeaderSource
	// ContentLength is the declared body length, -1 when unknown.
	ContentLength int64
	// ClientIP is the client address (the peer, or the X-Forwarded-For
	// client of a trusted proxy; see api.ClientIP).
	ClientIP netip.Addr
	// TrustedPeer says the connection's peer is a trusted proxy (the
	// gateway's --trusted-proxies): only then are X-Forwarded-For and the
	// headers that choose a priority class (classes[].match.headers)
	// believed. False in the zero View.
	TrustedPeer bool
	// RouteID is the matched route's id.
	RouteID string
	// RequestID is the request's X-Request-Id (the client's, or a new one).
	RequestID string
	// Trace is the request's W3C trace context (the client's, or a new one).
	Trace Trace
	// Ctx is the request's context: done when the client goes away.
	Ctx context.Context
	// Class is the request's priority class index (classify.Classes.Classify
	// of the route's rule set, set once the route is known); 0 is the
	// default class. Limits' reserves and degrade's shedOrder read it.
	Class int
	// Claims are the caller's verified JWT claims (see Claims), set by the
	// identity step of a route with an identity when the request carries a
	// valid token; nil otherwise. jwt:CLAIM key parts, tiers and classes
	// read them.
	Claims *Claims
	// Keys are the values a service passes with a guarded call (sdk.Keys in
	// package dataplane/sdk), which sdk:NAME key parts read; nil outside
	// the in-service SDK. An empty value is a missing one, as for every part.
	Keys map[string]string
	// Decisions collects the rules' decisions for the request's span; nil
	// (nothing collected) unless the gateway records one for this request.
	Decisions *Decisions
	// Latencies are the histograms of the limits with variants that let
	// the request through, which its duration goes to once answered.
	Latencies Latencies

	checked checked
}

// checked holds the key part values a key check read, by the check's index.
type checked struct {
	names *KeyNames // nil until SetChecked
	buf   [8]string
	more  []string
}

// KeyNames are the query, header (canonical) and cookie names one key check
// reads, in the order its values are recorded: queries, then headers, then
// cookies (decoded), then cookies read raw. It is built once per route and
// is immutable.
type KeyNames struct {
	Queries, Headers, Cookies, RawCookies []string
}

// Len is the number of names.
func (n *KeyNames) Len() int {
	return len(n.Queries) + len(n.Headers) + len(n.Cookies) + len(n.RawCookies)
}

// FromRequest returns the view of r as net/http parsed it: Method, Host,
// RawPath (r.URL.EscapedPath), Path (r.URL.Path until the router sets the
// cleaned one), RawQuery, the header, ContentLength and Ctx. The rest is the
// caller's to fill.
func FromRequest(r *http.Request) View {
	return View{Method: r.Method, Host: r.Host, RawPath: r.URL.EscapedPath(), Path: r.URL.Path, RawQuery: r.URL.RawQuery,
		header: r.Header, ContentLength: r.ContentLength, Ctx: r.Context()}
}

// HeaderSource builds a request's header the first time a stage asks for it
// (View.Header): the fasthttp engine reads it from the request's raw header
// block then, and a request no rule reads the header of costs no map.
type HeaderSource interface {
	// BuildHeader returns the request's header: keys canonical, one
	// value per field line, in the order received. It is called at most
	// once per View.
	BuildHeader() http.Header
}

// Header returns the request's header, read only: its keys are canonical,
// each field line one value, in the order received. It is nil for a view
// without one (the zero View).
func (v *View) Header() http.Header {
	if v.header == nil && v.src != nil {
		v.header = v.src.BuildHeader()
		v.src = nil
	}
	return v.header
}

// BuiltHeader returns the request's header if it is there already (a
// net/http request's, or one a HeaderSource built), nil if it is still to
// be built: what a change to the header that goes upstream must edit too,
// without building it.
func (v *View) BuiltHeader() http.Header { return v.header }

// SetHeader sets the request's header (see Header).
func (v *View) SetHeader(h http.Header) { v.header, v.src = h, nil }

// SetHeaderSource has the header built by src when it is first asked for.
func (v *View) SetHeaderSource(src HeaderSource) { v.header, v.src = nil, src }

// Context returns Ctx, or context.Background when Ctx is nil.
func (v *View) Context() context.Context {
	if v.Ctx == nil {
		return context.Background()
	}
	return v.Ctx
}

// StartCheck resets the checked values and prepares room for the values of
// names (one per name, recorded with SetChecked). Until EndCheck(true) the
// view answers from the request.
func (v *View) StartCheck(names *KeyNames) {
	v.checked = checked{}
	if n := names.Len(); n > len(v.checked.buf) {
		v.checked.more = make([]string, n-len(v.checked.buf))
	}
}

// SetChecked records the checked value of the i-th name ("" for missing).
func (v *View) SetChecked(i int, val string) {
	if i < len(v.checked.buf) {
		v.checked.buf[i] = val
	} else {
		v.checked.more[i-len(v.checked.buf)] = val
	}
}

// EndCheck ends a check: when ok, the values recorded since StartCheck answer
// for names from now on; otherwise they are dropped.
func (v *View) EndCheck(names *KeyNames, ok bool) {
	if !ok {
		v.checked = checked{}
		return
	}
	v.checked.names = names
}

func (v *View) get(i int) (string, bool) {
	val := ""
	if i < len(v.checked.buf) {
		val = v.checked.buf[i]
	} else {
		val = v.checked.more[i-len(v.checked.buf)]
	}
	return val, val != ""
}

// HeaderPart returns the value a header:NAME key part reads (name in
// canonical form): the checked value when a check read it, else the
// header's first value; false when it is absent or empty.
func (v *View) HeaderPart(name string) (string, bool) {
	if n := v.checked.names; n != nil {
		for i, h := range n.Headers {
			if h == name {
				return v.get(len(n.Queries) + i)
			}
		}
	}
	return HeaderPart(v.Header(), name)
}

// QueryPart returns the value a query:NAME key part reads: the checked value
// when a check read it, else QueryPart of the raw query.
func (v *View) QueryPart(name string) (string, bool) {
	if n := v.checked.names; n != nil {
		for i, q := range n.Queries {
			if q == name {
				return v.get(i)
			}
		}
	}
	return QueryPart(v.RawQuery, name)
}

// CookiePart returns the value a cookie:NAME key part reads: the checked
// value when a check read it, else CookiePart of the Cookie header lines.
func (v *View) CookiePart(name string) (string, bool) {
	if n := v.checked.names; n != nil {
		for i, c := range n.Cookies {
			if c == name {
				return v.get(len(n.Queries) + len(n.Headers) + i)
			}
		}
	}
	return CookiePart(v.Header()["Cookie"], name)
}

// RawCookiePart returns the value a cookie:NAME key part of a limit with
// cookieDecoding: raw reads: the checked value when a check read it, else
// RawCookiePart of the Cookie header lines.
func (v *View) RawCookiePart(name string) (string, bool) {
	if n := v.checked.names; n != nil {
		for i, c := range n.RawCookies {
			if c == name {
				return v.get(len(n.Queries) + len(n.Headers) + len(n.Cookies) + i)
			}
		}
	}
	return RawCookiePart(v.Header()["Cookie"], name)
}

// HeaderPart returns the value a header:NAME key part reads from h (name in
// canonical form): the first value, and false when it is absent or empty.
func HeaderPart(h http.Header, name string) (string, bool) {
	if vs := h[name]; len(vs) > 0 && vs[0] != "" {
		return vs[0], true
	}
	return "", false
}

// QueryPart returns the value a query:NAME key part reads from a raw query:
// the first parameter whose decoded name is name, percent-decoded (as
// url.ParseQuery decodes it: "+" is a space), and false when it is absent or
// empty. A value whose escapes are malformed is returned raw. It allocates
// only for a percent-encoded value.
func QueryPart(rawQuery, name string) (string, bool) {
	return nonEmpty(queryValue(rawQuery, name))
}

// CookiePart returns the value a cookie:NAME key part reads from the Cookie
// header lines: the first cookie named name, without its double quotes,
// percent-decoded (DecodeCookie; a value DecodeCookie refuses is returned
// raw: a key check refuses such requests before any rule reads them), and
// false when it is absent or empty. It allocates only for a value with
// escapes.
func CookiePart(lines []string, name string) (string, bool) {
	v, ok := cookieValue(lines, name)
	if d, why := DecodeCookie(v); why == "" {
		v = d
	}
	return nonEmpty(v, ok)
}

// RawCookiePart is CookiePart without the decoding: the value as sent,
// without its double quotes.
func RawCookiePart(lines []string, name string) (string, bool) {
	return nonEmpty(cookieValue(lines, name))
}

// DecodeCookie returns a cookie value (without its double quotes) as
// decoding upstreams read it, or why they could read it two ways. PHP's
// $_COOKIE (rawurldecode) and Express's cookie parser (decodeURIComponent,
// keeping the raw value when that fails) decode %XX escapes and leave "+"
// alone; Go and Python read the value raw. Keying on the decoded value puts
// every spelling of one value (sid=%61pikey1, sid=ap%69key1, ...) in one
// bucket, so none dodges a limit whichever way the upstream reads. The rule:
//
//   - no "%", or only "%" not followed by two hex digits ("100%"): the
//     value as it is (every decoder keeps it);
//   - valid escapes beside a malformed one ("%61%zz"): refused, "has a
//     malformed percent-encoding" (PHP decodes the valid ones, Express keeps
//     the whole value raw);
//   - decoding to invalid UTF-8 ("%C3%28") or a control character ("%00"):
//     refused (Express keeps the raw value, PHP decodes the bytes; NUL ends
//     a C string);
//   - decoding to a value that still holds an escape ("%2561" → "%61"):
//     refused as double-encoded (an application that decodes once more reads
//     yet another value);
//   - else the decoded value.
//
// why is "" when v holds; v is raw when why is not "". It allocates only
// for a value with valid escapes.
func DecodeCookie(raw string) (v, why string) {
	pct := strings.IndexByte(raw, '%')
	if pct < 0 {
		return raw, ""
	}
	valid, malformed := 0, 0
	for i := pct; i < len(raw); i++ {
		if raw[i] != '%' {
			continue
		}
		if i+2 < len(raw) && ishex(raw[i+1]) && ishex(raw[i+2]) {
			valid++
			i += 2
		} else {
			malformed++
		}
	}
	switch {
	case valid == 0:
		return raw, ""
	case malformed > 0:
		return raw, "has a malformed percent-encoding"
	}
	b := make([]byte, pct, len(raw))
	copy(b, raw[:pct])
	ascii := true
	for i := pct; i < len(raw); i++ {
		c := raw[i]
		if c == '%' {
			c = unhex(raw[i+1])<<4 | unhex(raw[i+2])
			i += 2
		}
		if c < 0x20 || c == 0x7f {
			return raw, "contains a control character"
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
		b = append(b, c)
	}
	if !ascii && !utf8.Valid(b) {
		return raw, "is not valid UTF-8"
	}
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' && ishex(b[i+1]) && ishex(b[i+2]) {
			return raw, "is percent-encoded twice"
		}
	}
	return unsafe.String(&b[0], len(b)), "" // b is not written again
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// nonEmpty makes an empty value a missing one: stacks disagree on whether
// "?user=" carries a parameter (Python's parse_qs drops it), and an empty
// header or cookie is absent to most applications, so empty and missing are
// one key and alternating them gains nothing.
func nonEmpty(v string, ok bool) (string, bool) { return v, ok && v != "" }

// queryValue returns the first value of the query parameter name in a raw
// query, decoded, and whether it is present. Names are compared decoded.
func queryValue(raw, name string) (string, bool) {
	for raw != "" {
		var kv string
		kv, raw, _ = strings.Cut(raw, "&")
		k, v, _ := strings.Cut(kv, "=")
		if k != name {
			if !strings.ContainsAny(k, "%+") {
				continue
			}
			if dk, err := url.QueryUnescape(k); err != nil || dk != name {
				continue
			}
		}
		if strings.ContainsAny(v, "%+") {
			if dv, err := url.QueryUnescape(v); err == nil {
				return dv, true
			}
		}
		return v, true
	}
	return "", false
}

// cookieValue returns the value of the first cookie named name in the Cookie
// header lines, without its quotes, and whether it is present.
func cookieValue(lines []string, name string) (string, bool) {
	for _, line := range lines {
		for line != "" {
			var part string
			part, line, _ = strings.Cut(line, ";")
			part = strings.TrimSpace(part)
			k, v, ok := strings.Cut(part, "=")
			if !ok || k != name {
				continue
			}
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			return v, true
		}
	}
	return "", false
}
