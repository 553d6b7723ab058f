package proxy

import (
	"cmp"
	"fmt"
	"maps"
	"net/http"
	"net/textproto"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"sync"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/dataplane/reqview"
)

// Route is one compiled route: its id, its place in the rule set and its
// upstream. It is immutable and safe for concurrent use.
type Route struct {
	// ID is the rule's id (api.Route.ID).
	ID string
	// Index is the route's position in the rule set's routes.
	Index int
	// Upstream forwards the route's requests.
	Upstream *Upstream
}

// Router matches requests to routes. Build it with NewRouter; it is immutable
// and safe for concurrent use. See the package documentation for the order in
// which routes are tried.
type Router struct {
	routes    []*Route
	exact     map[string][]entry // by exact path
	prefix    map[string][]entry // by path prefix (not "/")
	maxPrefix int                // length of the longest key in prefix
	regex     []entry
	catchAll  []entry // pathPrefix "/" or no path constraint
	byID      map[string]*Route
	slashes   SlashPolicy
	listed    map[string]bool // methods some route lists that are not registered
	byHeader  bool            // some route matches on a header (MatchView reads it only then)
	closeOnce sync.Once
}

// RouterSettings configure a Router. The zero value refuses encoded slashes.
type RouterSettings struct {
	// EncodedSlashes is what to do with %2F in request paths (see
	// SlashPolicy); the zero value is SlashReject.
	EncodedSlashes SlashPolicy
	// Metrics receives the upstream target health metrics (health.go); nil
	// exports none.
	Metrics *metrics.Metrics
}

// entry is one (route, host pattern) pair: a route with several host
// patterns has one entry per pattern, so that each ranks by its own kind.
type entry struct {
	route   *Route
	host    hostPattern
	methods []string
	getHead bool // methods lists GET and not HEAD: HEAD matches too
	headers []headerMatch
	re      *regexp.Regexp
	rePfx   string // literal every match of an anchored re starts with; "" if unknown
	order   int    // document order
	nconstr int    // methods (counted once) plus headers
}

type headerMatch struct{ name, value string }

// hostKind ranks host patterns: a larger value is more specific.
type hostKind uint8

const (
	hostAny hostKind = iota
	hostWildcard
	hostExact
)

// hostPattern matches the request's Host. name is lower case; for a wildcard
// it is the suffix including its leading dot (".example.com"). port is ""
// when the rule names none, and then the request's port is ignored.
type hostPattern struct {
	kind hostKind
	name string
	port string
}

// less orders entries of one tier: more specific host first (exact, then the
// longer wildcard suffix, then any host), then more method/header
// constraints, then document order.
func (e *entry) less(o *entry) int {
	if c := cmp.Compare(o.host.kind, e.host.kind); c != 0 {
		return c
	}
	if c := cmp.Compare(len(o.host.name), len(e.host.name)); c != 0 {
		return c
	}
	if c := cmp.Compare(o.nconstr, e.nconstr); c != 0 {
		return c
	}
	return cmp.Compare(e.order, o.order)
}

// NewRouter is NewRouterWith with the encoded-slash policy of tr's Settings:
// SlashDecode when DecodeSlashes is set, else SlashKeep.
func NewRouter(routes []api.Route, tr *Transport) (*Router, error) {
	p := SlashKeep
	if tr.settings.DecodeSlashes {
		p = SlashDecode
	}
	return NewRouterWith(routes, tr, RouterSettings{EncodedSlashes: p})
}

// NewRouterWith builds a Router and an Upstream per route from routes, which
// are expected to have passed (*api.RuleSet).Validate and Normalize
// (NewRouterWith does not check them again, but applies the defaults
// Normalize would when they are missing), with settings s. Upstream
// connections come from tr, which outlives the Router. It returns an error
// naming the route when a route cannot be built (a bad regular expression or
// target URL). Call CloseIdle on the Router once it is retired, or at once if
// it is never used.
func NewRouterWith(routes []api.Route, tr *Transport, s RouterSettings) (*Router, error) {
	return newRouter(routes, tr, s, true)
}

// NewMatcher returns a Router that only matches: its routes have no
// upstream (Route.Upstream is nil) and it holds no connection pool. The
// in-service SDK's HTTP middleware matches a kind: service document's routes
// with it, by the same rules as a gateway.
func NewMatcher(routes []api.Route, s RouterSettings) (*Router, error) {
	return newRouter(routes, nil, s, false)
}

func newRouter(routes []api.Route, tr *Transport, s RouterSettings, upstreams bool) (*Router, error) {
	rt := &Router{
		exact:   map[string][]entry{},
		prefix:  map[string][]entry{},
		byID:    make(map[string]*Route, len(routes)),
		slashes: s.EncodedSlashes,
		listed:  map[string]bool{},
	}
	decode := rt.slashes == SlashDecode
	for i := range routes {
		r := &routes[i]
		var up *Upstream
		if upstreams {
			var err error
			if up, err = newUpstream(r, tr, decode); err != nil {
				rt.CloseIdle()
				return nil, fmt.Errorf("compiling route %q: %w", r.ID, err)
			}
			up.startHealth(r, s.Metrics)
		}
		route := &Route{ID: r.ID, Index: i, Upstream: up}
		rt.routes = append(rt.routes, route)
		rt.byID[r.ID] = route
		if err := rt.add(route, &r.Match, i); err != nil {
			rt.CloseIdle()
			return nil, fmt.Errorf("compiling route %q: %w", r.ID, err)
		}
	}
	for _, m := range []map[string][]entry{rt.exact, rt.prefix} {
		for _, es := range m {
			slices.SortStableFunc(es, func(a, b entry) int { return a.less(&b) })
		}
	}
	for _, es := range [][]entry{rt.regex, rt.catchAll} {
		slices.SortStableFunc(es, func(a, b entry) int { return a.less(&b) })
	}
	return rt, nil
}

func (rt *Router) add(route *Route, m *api.Match, order int) error {
	base := entry{route: route, order: order}
	if len(m.Methods) > 0 {
		base.methods = make([]string, len(m.Methods))
		for i, meth := range m.Methods {
			base.methods[i] = strings.ToUpper(meth)
			if !registeredMethod(base.methods[i]) {
				rt.listed[base.methods[i]] = true
			}
		}
		base.getHead = slices.Contains(base.methods, http.MethodGet) && !slices.Contains(base.methods, http.MethodHead)
		base.nconstr++
	}
	for _, name := range slices.Sorted(maps.Keys(m.Headers)) {
		base.headers = append(base.headers, headerMatch{textproto.CanonicalMIMEHeaderKey(name), m.Headers[name]})
		base.nconstr++
		rt.byHeader = true
	}
	if m.PathRegex != "" {
		re, err := regexp.Compile(m.PathRegex)
		if err != nil {
			return fmt.Errorf("compiling pathRegex: %w", err)
		}
		base.re = re
		base.rePfx = anchoredLiteralPrefix(m.PathRegex)
	}
	hosts := []hostPattern{{kind: hostAny}}
	if len(m.Hosts) > 0 {
		hosts = hosts[:0]
		for _, h := range m.Hosts {
			hosts = append(hosts, parseHostPattern(h))
		}
	}
	for _, hp := range hosts {
		e := base
		e.host = hp
		switch {
		case m.Path != "":
			k := normalizeRulePath(m.Path, rt.slashes == SlashDecode)
			rt.exact[k] = append(rt.exact[k], e)
		case m.PathPrefix != "" && m.PathPrefix != "/":
			k := normalizeRulePath(m.PathPrefix, rt.slashes == SlashDecode)
			rt.prefix[k] = append(rt.prefix[k], e)
			rt.maxPrefix = max(rt.maxPrefix, len(k))
		case m.PathRegex != "":
			rt.regex = append(rt.regex, e)
		default:
			rt.catchAll = append(rt.catchAll, e)
		}
	}
	return nil
}

// normalizeRulePath puts a rule's path or prefix in the same canonical
// escaped form as request paths, keeping a trailing slash.
func normalizeRulePath(p string, decodeSlashes bool) string {
	return normalizePath(p, decodeSlashes)
}

func parseHostPattern(h string) hostPattern {
	h = strings.ToLower(h)
	var hp hostPattern
	if name, port, ok := strings.Cut(h, ":"); ok {
		h, hp.port = name, port
	}
	if suffix, ok := strings.CutPrefix(h, "*"); ok {
		hp.kind, hp.name = hostWildcard, suffix // ".example.com"
	} else {
		hp.kind, hp.name = hostExact, h
	}
	return hp
}

// Routes returns the compiled routes in rule-set order. The slice must not
// be modified.
func (rt *Router) Routes() []*Route { return rt.routes }

// Match is the result of Router.Match.
type Match struct {
	// Route is the matched route, nil when none matches (answer with
	// answer.WriteNoRoute).
	Route *Route
	// Path is the cleaned path the request was matched on (see
	// RequestPath); Forward sends it upstream.
	Path string
	// Invalid, when not empty, says why the request is refused before any
	// route is looked up (Route is then nil): its method is not an
	// upper-case registered HTTP method that no route lists, or is
	// CONNECT; its target is not a path; its Host is not a valid host
	// (ValidHost); or its path has an encoded slash under SlashReject or
	// a byte no upstream reads alike (see badPath). Answer it with
	// answer.WriteProblem(w, r, 400, "Bad request", Invalid).
	Invalid string
}

// Match cleans r's path (see RequestPath) and returns it with the most
// specific route for r, or with Invalid set (see Match). Call it once per
// request and pass the result on to Upstream.Forward. It does not allocate
// when the request path is already clean and the request is valid.
func (rt *Router) Match(r *http.Request) Match {
	if !rt.knownMethod(r.Method) {
		return Match{Invalid: fmt.Sprintf("method %q is not a registered HTTP method (methods are case-sensitive) and no route lists it", clipMethod(r.Method))}
	}
	if why := badTarget(r.Method, r.Host, r.URL.EscapedPath()); why != "" {
		return Match{Invalid: why}
	}
	path := RequestPath(r, rt.slashes == SlashDecode)
	if why := rt.badPath(path); why != "" {
		return Match{Path: path, Invalid: why}
	}
	return Match{Route: rt.Lookup(r.Host, r.Method, path, r.Header), Path: path}
}

// MatchView is Match on a request view: v.Method, v.Host, v.RawPath (the
// escaped path as sent) and v.Header() (read only when a route matches on
// a header), for any serving stack. It does not
// set v.Path; the caller sets it to the returned Match's Path.
func (rt *Router) MatchView(v *reqview.View) Match {
	if !rt.knownMethod(v.Method) {
		return Match{Invalid: fmt.Sprintf("method %q is not a registered HTTP method (methods are case-sensitive) and no route lists it", clipMethod(v.Method))}
	}
	if why := badTarget(v.Method, v.Host, v.RawPath); why != "" {
		return Match{Invalid: why}
	}
	path := normalizePath(v.RawPath, rt.slashes == SlashDecode)
	if why := rt.badPath(path); why != "" {
		return Match{Path: path, Invalid: why}
	}
	var h http.Header
	if rt.byHeader {
		h = v.Header() // built only for a router with a route matching on a header
	}
	return Match{Route: rt.Lookup(v.Host, v.Method, path, h), Path: path}
}

// badPath returns why a cleaned, canonical path (normalizePath) is
// refused, or "": an encoded slash under SlashReject, or a byte that
// upstreams read differently or not at all, which canonicalEscaped has
// percent-encoded if it came raw: a control character (%00-%1F, %7F: NUL
// cuts a C string, a tab is trimmed by some) or a backslash (%5C: a path
// separator to Windows servers and to URL parsers that follow WHATWG).
func (rt *Router) badPath(p string) string {
	if rt.slashes == SlashReject && hasEncodedSlash(p) {
		return "the path has an encoded slash (%2F), which this gateway refuses (--encoded-slashes reject)"
	}
	for i := strings.IndexByte(p, '%'); i >= 0 && i+2 < len(p); {
		switch hi, lo := p[i+1], p[i+2]; {
		case hi == '0', hi == '1', hi == '7' && lo == 'F':
			return "the path has a control character (such as %00 or %09), which this gateway refuses"
		case hi == '5' && lo == 'C':
			return "the path has a backslash (\\ or %5C), which this gateway refuses"
		}
		j := strings.IndexByte(p[i+3:], '%')
		if j < 0 {
			break
		}
		i += 3 + j
	}
	return ""
}

// badTarget returns why a request is refused for its method, Host or
// target, whatever the protocol, or "": CONNECT (the gateway is no
// forward proxy), a target that is not a path (OPTIONS *; an HTTP/1
// engine refuses it first), a Host that is not ValidHost's.
func badTarget(method, host, rawPath string) string {
	switch {
	case method == http.MethodConnect:
		return "CONNECT is not served: the gateway is not a forward proxy"
	case rawPath == "" || rawPath[0] != '/':
		return "the request target must be a path"
	case !ValidHost(host):
		return "the Host is not a host name or IP address with an optional port up to 65535 (RFC 9110 §7.2; no userinfo, commas or other characters)"
	}
	return ""
}

// ValidHost reports whether host, a Host header or an HTTP/2 :authority,
// names one host as upstreams read it: empty (HTTP/1.0 and HTTP/2 may send
// none), or a name of letters, digits, "-", "_" and "." (a DNS name or an
// IPv4 address), or an IPv6 address in brackets, then optionally ":" and a
// port of up to five digits no larger than 65535. Refused are the shapes
// RFC 3986's reg-name allows but upstreams read apart: userinfo
// ("x@shop.example.com": the host is after the "@" to a URL parser, before
// it to a Host matcher), a comma ("shop.example.com,evil": a list to
// X-Forwarded-Host readers, which take the first), other sub-delims,
// percent-escapes, and zone identifiers. It does not allocate.
func ValidHost(host string) bool {
	if host == "" {
		return true
	}
	name, port, hasPort := host, "", false
	if host[0] == '[' {
		end := strings.IndexByte(host, ']')
		if end < 2 {
			return false
		}
		for i := 1; i < end; i++ {
			if c := host[i]; !ishex(c) && c != ':' && c != '.' {
				return false
			}
		}
		switch rest := host[end+1:]; {
		case rest == "":
		case rest[0] == ':':
			port, hasPort = rest[1:], true
		default:
			return false
		}
	} else {
		if i := strings.IndexByte(host, ':'); i >= 0 {
			name, port, hasPort = host[:i], host[i+1:], true
		}
		if name == "" {
			return false
		}
		for i := 0; i < len(name); i++ {
			if c := name[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
				return false
			}
		}
	}
	if !hasPort || port == "" { // "host:" is allowed by RFC 3986: no port
		return true
	}
	if len(port) > 5 {
		return false
	}
	n := 0
	for i := 0; i < len(port); i++ {
		c := port[i]
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return n <= 65535
}

// knownMethod reports whether method is matched at all: a registered HTTP
// method in upper case, or one that a route lists.
func (rt *Router) knownMethod(method string) bool {
	switch method {
	case http.MethodGet, http.MethodPost, http.MethodHead, http.MethodPut, http.MethodDelete,
		http.MethodPatch, http.MethodOptions:
		return true
	}
	return registeredMethod(method) || rt.listed[method]
}

// registeredMethods are the methods of the IANA HTTP Method Registry.
var registeredMethods = map[string]bool{
	"ACL": true, "BASELINE-CONTROL": true, "BIND": true, "CHECKIN": true, "CHECKOUT": true,
	"CONNECT": true, "COPY": true, "DELETE": true, "GET": true, "HEAD": true, "LABEL": true,
	"LINK": true, "LOCK": true, "MERGE": true, "MKACTIVITY": true, "MKCALENDAR": true,
	"MKCOL": true, "MKREDIRECTREF": true, "MKWORKSPACE": true, "MOVE": true, "OPTIONS": true,
	"ORDERPATCH": true, "PATCH": true, "POST": true, "PRI": true, "PROPFIND": true,
	"PROPPATCH": true, "PUT": true, "QUERY": true, "REBIND": true, "REPORT": true,
	"SEARCH": true, "TRACE": true, "UNBIND": true, "UNCHECKOUT": true, "UNLINK": true,
	"UNLOCK": true, "UPDATE": true, "UPDATEREDIRECTREF": true, "VERSION-CONTROL": true,
}

func registeredMethod(m string) bool { return registeredMethods[m] }

func clipMethod(m string) string {
	if len(m) > 32 {
		return m[:32] + "..."
	}
	return m
}

// Upstream returns the upstream of the route with id routeID, or nil.
func (rt *Router) Upstream(routeID string) *Upstream {
	if r := rt.byID[routeID]; r != nil {
		return r.Upstream
	}
	return nil
}

// Lookup returns the most specific route for a request to host (the Host
// header, with or without port) with method, cleaned path (as returned by
// RequestPath) and header, or nil. It does not allocate.
func (rt *Router) Lookup(host, method, path string, header http.Header) *Route {
	hostname, port := splitHost(host)
	if es, ok := rt.exact[path]; ok {
		if r := firstMatch(es, hostname, port, method, path, header); r != nil {
			return r
		}
	}
	if len(rt.prefix) > 0 {
		for i := min(len(path), rt.maxPrefix); i > 1; i-- {
			// Candidates end at a segment boundary: "/api/orders" for
			// "/api/orders" and "/api/orders/1", "/api/orders/" for the
			// latter only.
			if i != len(path) && path[i] != '/' && path[i-1] != '/' {
				continue
			}
			if es, ok := rt.prefix[path[:i]]; ok {
				if r := firstMatch(es, hostname, port, method, path, header); r != nil {
					return r
				}
			}
		}
	}
	if r := firstMatch(rt.regex, hostname, port, method, path, header); r != nil {
		return r
	}
	return firstMatch(rt.catchAll, hostname, port, method, path, header)
}

func firstMatch(es []entry, hostname, port, method, path string, header http.Header) *Route {
	for i := range es {
		if es[i].matches(hostname, port, method, path, header) {
			return es[i].route
		}
	}
	return nil
}

func (e *entry) matches(hostname, port, method, path string, header http.Header) bool {
	switch e.host.kind {
	case hostExact:
		if !strings.EqualFold(hostname, e.host.name) {
			return false
		}
	case hostWildcard:
		n := len(e.host.name)
		if len(hostname) <= n || !strings.EqualFold(hostname[len(hostname)-n:], e.host.name) {
			return false
		}
	}
	if e.host.port != "" && port != e.host.port {
		return false
	}
	if len(e.methods) > 0 && !slices.Contains(e.methods, method) && !(e.getHead && method == http.MethodHead) {
		return false
	}
	for _, h := range e.headers {
		if !slices.Contains(header[h.name], h.value) {
			return false
		}
	}
	if e.re == nil {
		return true
	}
	return strings.HasPrefix(path, e.rePfx) && e.re.MatchString(path)
}

// anchoredLiteralPrefix returns the literal text every match of pattern
// must start with at position 0, when the pattern is anchored at the start
// of the text (a top-level concatenation beginning with ^ or \A, followed
// by case-sensitive literals); otherwise "". It lets the router skip most
// regexes with a prefix comparison.
func anchoredLiteralPrefix(pattern string) string {
	tree, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return ""
	}
	tree = tree.Simplify()
	if tree.Op != syntax.OpConcat || len(tree.Sub) == 0 || tree.Sub[0].Op != syntax.OpBeginText {
		return ""
	}
	var b strings.Builder
	for _, sub := range tree.Sub[1:] {
		if sub.Op != syntax.OpLiteral || sub.Flags&syntax.FoldCase != 0 {
			break
		}
		b.WriteString(string(sub.Rune))
	}
	return b.String()
}

// splitHost splits a Host header into its name, without one trailing dot,
// and its port ("" when absent). IPv6 literals keep their brackets.
func splitHost(host string) (name, port string) {
	name = host
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		name, port = host[:i], host[i+1:]
	}
	name = strings.TrimSuffix(name, ".")
	return name, port
}

// CloseIdle retires the Router after a swap: it releases its upstreams'
// connection pools, and closes the idle keep-alive connections of every
// target origin that no live Router uses any more. Origins still used by
// another Router keep their connections. Connections busy at that moment are
// closed by the idle timeout once their request ends. It is safe to call more
// than once and concurrently with requests still in flight on the Router.
func (rt *Router) CloseIdle() {
	rt.closeOnce.Do(func() {
		for _, r := range rt.routes {
			if r.Upstream != nil {
				r.Upstream.release()
			}
		}
	})
}
