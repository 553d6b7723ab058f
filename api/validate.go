package api

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"mime"
	"net/netip"
	"net/textproto"
	"net/url"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Patterns that schema.json repeats character for character (a test checks
// that they are the same strings), so that Go and the schema agree by
// construction. They use only syntax that RE2 and ECMA-262 read alike.
const (
	// portSource is a port 1-65535 without leading zeros.
	portSource = `(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})`
	// HostPatternSource is a match host: a lower-case DNS name, optionally
	// *. in front and a :port behind.
	HostPatternSource = `^(\*\.)?[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*(:` + portSource + `)?$`
	// TargetURLPatternSource is an upstream target: http, https or h2c (any
	// case), a host name (letters, digits, - and _ in labels of up to 63) or
	// a bracketed IPv6 address (hexadecimal forms), an optional port
	// 1-65535 and an optional path of URL characters and %XX escapes; no
	// credentials, query or fragment.
	TargetURLPatternSource = `^` + schemeSource + `://(` + dnsNameSource + `|\[` + ipv6Source + `\])(:` + portSource + `)?` + urlPathSource + `$`
	schemeSource           = `([hH][tT][tT][pP][sS]?|[hH]2[cC])`
	dnsNameSource          = `[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*`
	urlPathSource          = `(/([A-Za-z0-9._~!$&'()*+,;=:@/-]|%[0-9A-Fa-f]{2})*)?`
	ipv6Source             = `(([0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}|([0-9A-Fa-f]{1,4}:){1,7}:|([0-9A-Fa-f]{1,4}:){1,6}:[0-9A-Fa-f]{1,4}|` +
		`([0-9A-Fa-f]{1,4}:){1,5}(:[0-9A-Fa-f]{1,4}){1,2}|([0-9A-Fa-f]{1,4}:){1,4}(:[0-9A-Fa-f]{1,4}){1,3}|` +
		`([0-9A-Fa-f]{1,4}:){1,3}(:[0-9A-Fa-f]{1,4}){1,4}|([0-9A-Fa-f]{1,4}:){1,2}(:[0-9A-Fa-f]{1,4}){1,5}|` +
		`[0-9A-Fa-f]{1,4}:(:[0-9A-Fa-f]{1,4}){1,6}|:((:[0-9A-Fa-f]{1,4}){1,7}|:))`
)

var (
	idPattern     = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	tokenPattern  = regexp.MustCompile("^[!#$%&'*+\\-.^_`|~0-9A-Za-z]+$")
	hostPattern   = regexp.MustCompile(HostPatternSource)
	cookiePattern = regexp.MustCompile("^[!#$%&'*+\\-.^_`|~0-9A-Za-z]+$")
)

// TargetURLPatternSource in parts that each match fast, and a port alone.
var (
	targetNamePattern = regexp.MustCompile(`^` + dnsNameSource + `(:` + portSource + `)?$`)
	targetIPv6Pattern = regexp.MustCompile(`^\[` + ipv6Source + `\](:` + portSource + `)?$`)
	targetPathPattern = regexp.MustCompile(`^` + urlPathSource + `$`)
	portPattern       = regexp.MustCompile(`^` + portSource + `$`)
)

// MaxFallbackBodyChars bounds a fallback or rejection body (body, html), in
// characters, as JSON Schema's maxLength counts: at most 256 KiB of UTF-8.
const MaxFallbackBodyChars = 64 << 10

// ValidID reports whether s is a valid namespace or rule id:
// [a-z0-9][a-z0-9-]{0,62}.
func ValidID(s string) bool { return idPattern.MatchString(s) }

// Validate checks every field of rs and returns Errors naming each problem by
// its path, or nil. It does not change rs. Fields left at their zero value are
// checked as the defaults Normalize would put there.
func (rs *RuleSet) Validate() error {
	if rs == nil {
		return Errors{{Message: "rule set is missing"}}
	}
	var errs Errors
	v := validator{errs: &errs}
	v.ruleSet(rs)
	return errs.err()
}

type validator struct {
	errs    *Errors
	classes map[string]bool // declared class ids (RuleSet.Classes)
	// service: the document is kind: service (see service.go).
	service bool
}

func (v validator) add(path, format string, args ...any) { v.errs.add(path, format, args...) }

func (v validator) id(path, id string) {
	switch {
	case id == "":
		v.add(path, "is required")
	case !idPattern.MatchString(id):
		v.add(path, "%q must match [a-z0-9][a-z0-9-]{0,62}", id)
	}
}

func (v validator) ruleSet(rs *RuleSet) {
	if rs.Namespace == "" {
		v.add("namespace", "is required")
	} else {
		v.id("namespace", rs.Namespace)
	}
	v.service = v.kind(rs)
	if n := len(rs.Routes) + len(rs.Limits) + len(rs.Breakers) + len(rs.Degrades); n > MaxRules {
		v.add("", "rule set has %d rules; the limit is %d", n, MaxRules)
		return
	}
	routes := map[string]int{}
	for i := range rs.Routes {
		p := fmt.Sprintf("routes[%d]", i)
		v.route(p, &rs.Routes[i])
		if id := rs.Routes[i].ID; id != "" {
			if j, dup := routes[id]; dup {
				v.add(p+".id", "duplicate id %q (also routes[%d])", id, j)
			} else {
				routes[id] = i
			}
		}
	}
	v.classes = v.classesOf(rs.Classes, routes)
	v.identities(rs, routes)
	ids := map[string]int{}
	dupID := func(p, kind, id string, i int) {
		if id == "" {
			return
		}
		if j, dup := ids[id]; dup {
			v.add(p+".id", "duplicate id %q (also %s[%d])", id, kind, j)
		} else {
			ids[id] = i
		}
	}
	for i := range rs.Limits {
		p := fmt.Sprintf("limits[%d]", i)
		v.limit(p, &rs.Limits[i], routes)
		v.ruleResources(p, rs.Limits[i].Routes, rs.Limits[i].Resources, rs.Limits[i].Key, nil)
		if l := &rs.Limits[i]; v.service && l.Cost != nil && len(l.Resources) > 0 {
			v.add(p+".cost", "does not apply to resources (a guarded call costs 1); name routes only, or drop cost")
		}
		v.identityLimit(p, &rs.Limits[i], rs)
		dupID(p, "limits", rs.Limits[i].ID, i)
	}
	clear(ids)
	allRoutes := slices.Sorted(maps.Keys(routes))
	covered := map[string]string{}
	every := ""
	coveredRes := map[string]string{}
	for i := range rs.Breakers {
		p := fmt.Sprintf("breakers[%d]", i)
		b := &rs.Breakers[i]
		v.breaker(p, b, routes)
		v.ruleResources(p, b.Routes, b.Resources, nil, coveredRes)
		dupID(p, "breakers", b.ID, i)
		if !v.service || len(b.Routes) > 0 {
			v.exclusive(p, b.Routes, allRoutes, covered, &every, "breakers")
		}
	}
	clear(ids)
	clear(covered)
	clear(coveredRes)
	every = ""
	for i := range rs.Degrades {
		p := fmt.Sprintf("degrades[%d]", i)
		d := &rs.Degrades[i]
		v.degrade(p, d, routes)
		v.ruleResources(p, d.Routes, d.Resources, d.Key, coveredRes)
		v.classRefs(p+".shedOrder", d.ShedOrder, v.classes)
		if KeysOnJWT(d.Key) {
			v.coveredByIdentity(p, "key parts jwt:", d.Routes, rs)
		}
		dupID(p, "degrades", d.ID, i)
		if !v.service || len(d.Routes) > 0 {
			v.exclusive(p, d.Routes, allRoutes, covered, &every, "degrades")
		}
	}
}

// exclusive checks that no route is covered by two rules of one kind (breakers,
// degrades): their state would otherwise be ambiguous. allRoutes is the
// sorted route ids, what a rule without routes covers; every is the first
// such rule of the kind, so that a second one is refused at once rather than
// after another walk over every route (n rules × n routes).
func (v validator) exclusive(p string, ruleRoutes, allRoutes []string, covered map[string]string, every *string, kind string) {
	names := ruleRoutes
	if len(names) == 0 {
		if *every != "" && len(allRoutes) > 0 {
			v.add(p+".routes", "route %q is already covered by %s; a route may have only one of %s", allRoutes[0], *every, kind)
			return
		}
		*every = p
		names = allRoutes
	}
	for _, r := range names {
		if other, ok := covered[r]; ok {
			v.add(p+".routes", "route %q is already covered by %s; a route may have only one of %s", r, other, kind)
			return
		}
	}
	for _, r := range names {
		covered[r] = p
	}
}

// listedBefore reports whether list[i] occurs in list[:i]. Called for each i
// in order, it builds seen for a long list, so that checking a list of n
// items costs O(n) and not O(n²).
func listedBefore[T comparable](list []T, i int, seen *map[T]bool) bool {
	if len(list) <= 16 {
		return slices.Contains(list[:i], list[i])
	}
	if *seen == nil {
		*seen = make(map[T]bool, len(list))
	}
	if (*seen)[list[i]] {
		return true
	}
	(*seen)[list[i]] = true
	return false
}

func (v validator) routeRefs(p string, refs []string, routes map[string]int) {
	var seen map[string]bool
	for i, r := range refs {
		_, ok := routes[r]
		twice := listedBefore(refs, i, &seen)
		if ok && !twice {
			continue
		}
		rp := fmt.Sprintf("%s.routes[%d]", p, i)
		if !ok {
			v.add(rp, "names route %q, which does not exist", r)
		}
		if twice {
			v.add(rp, "route %q is listed twice", r)
		}
	}
}

func (v validator) route(p string, r *Route) {
	v.id(p+".id", r.ID)
	m := &r.Match
	mp := p + ".match"
	set := 0
	for _, s := range []string{m.Path, m.PathPrefix, m.PathRegex} {
		if s != "" {
			set++
		}
	}
	if set > 1 {
		v.add(mp, "set at most one of path, pathPrefix and pathRegex")
	}
	if m.Path != "" && !strings.HasPrefix(m.Path, "/") {
		v.add(mp+".path", "%q must start with /", m.Path)
	}
	if m.PathPrefix != "" && !strings.HasPrefix(m.PathPrefix, "/") {
		v.add(mp+".pathPrefix", "%q must start with /", m.PathPrefix)
	}
	for _, s := range []struct{ name, val string }{{"path", m.Path}, {"pathPrefix", m.PathPrefix}} {
		switch {
		case s.val == "" || !strings.HasPrefix(s.val, "/"):
		case strings.IndexFunc(s.val, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '?' || r == '#' }) >= 0:
			v.add(mp+"."+s.name, "%q must not contain spaces, control characters, ? or #", s.val)
		case s.val != CleanPath(s.val) && s.val != CleanPath(s.val)+"/":
			v.add(mp+"."+s.name, "%q is not a clean path (no //, . or .. segments); requests are matched on the cleaned path", s.val)
		}
	}
	if m.PathRegex != "" {
		if n := utf8.RuneCountInString(m.PathRegex); n > MaxRegexLength {
			v.add(mp+".pathRegex", "is %d characters long; the limit is %d", n, MaxRegexLength)
		} else if err := CheckRegex(m.PathRegex); err != nil {
			v.add(mp+".pathRegex", "%v", err)
		}
	}
	var seenHosts map[string]bool
	for i, h := range m.Hosts {
		hp := fmt.Sprintf("%s.hosts[%d]", mp, i)
		switch _, port, ok := strings.Cut(h, ":"); {
		case ok && !portPattern.MatchString(port):
			v.add(hp, "%q has a port outside 1-65535 (or written with leading zeros, which never match)", h)
		case !hostPattern.MatchString(h) || len(h) > 253+6:
			v.add(hp, "%q is not a lower-case host name (a leading *. and a :port are allowed)", h)
		}
		if listedBefore(m.Hosts, i, &seenHosts) {
			v.add(hp, "%q is listed twice", h)
		}
	}
	v.methods(mp, m.Methods)
	v.headers(mp+".headers", m.Headers)
	up := &r.Upstream
	upp := p + ".upstream"
	if v.service {
		if !up.isZero() {
			v.add(upp, "a kind: service document's routes do not forward (the service's own handlers answer them); remove upstream")
		}
		return
	}
	if len(up.Targets) == 0 {
		v.add(upp+".targets", "at least one target is required")
	}
	if len(up.Targets) > MaxTargetsPerRoute {
		v.add(upp+".targets", "has %d targets; the limit is %d", len(up.Targets), MaxTargetsPerRoute)
	}
	for i, t := range up.Targets {
		tp := fmt.Sprintf("%s.targets[%d]", upp, i)
		if err := checkTargetURL(t.URL); err != nil {
			v.add(tp+".url", "%v", err)
		}
		if t.Weight < 0 || t.Weight > 10000 {
			v.add(tp+".weight", "must be between 0 and 10000 (0 means 1)")
		}
	}
	if up.Timeout < 0 || up.Timeout.D() > time.Hour {
		v.add(upp+".timeout", "must be between 0 and 1h (0 means %s)", DefaultUpstreamTimeout)
	}
	if up.BodyTimeout < 0 || up.BodyTimeout.D() > time.Hour {
		v.add(upp+".bodyTimeout", "must be between 0 and 1h (0 means %s)", DefaultBodyTimeout)
	}
	if up.WriteTimeout < 0 || up.WriteTimeout.D() > time.Hour {
		v.add(upp+".writeTimeout", "must be between 0 and 1h (0 means %s)", DefaultWriteTimeout)
	}
	if up.StripPrefix && m.PathPrefix == "" {
		v.add(upp+".stripPrefix", "needs match.pathPrefix")
	}
	v.upstreamProtocol(up, upp)
	v.upstreamHealth(upp, up)
}

// methods checks the methods list of a match at mp (a route's or a
// class's).
func (v validator) methods(mp string, methods []string) {
	var seenMethods map[string]bool
	for i, meth := range methods {
		mp := fmt.Sprintf("%s.methods[%d]", mp, i)
		if !tokenPattern.MatchString(meth) || strings.ToUpper(meth) != meth {
			v.add(mp, "%q is not an upper-case HTTP method", meth)
		}
		if listedBefore(methods, i, &seenMethods) {
			v.add(mp, "%q is listed twice", meth)
		}
	}
}

// headers checks the exact header matches of a match at p (a route's or a
// class's).
func (v validator) headers(p string, headers map[string]string) {
	seenHeader := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(headers)) {
		hp := joinKey(p, name)
		if !tokenPattern.MatchString(name) {
			v.add(hp, "%q is not a valid header name", name)
		}
		canon := textproto.CanonicalMIMEHeaderKey(name)
		if other, dup := seenHeader[canon]; dup {
			v.add(hp, "header %q is listed twice (also as %q); header names ignore case", name, other)
		}
		seenHeader[canon] = name
		if strings.ContainsAny(headers[name], "\r\n\x00") {
			v.add(hp, "value must not contain CR, LF or NUL")
		}
	}
}

// MaxRegexInstructions bounds the compiled program of a pathRegex (RE2
// instructions after simplification). Matching costs up to the program's
// size per byte of path, so an expression such as (.*a){1000} — 5,002
// instructions — would make every request spend milliseconds in the router.
// Route expressions in practice compile to well under 100 instructions;
// .{1000} compiles to 1,002.
const MaxRegexInstructions = 2000

// CheckRegex reports whether expr is an RE2 expression (Go regexp syntax)
// that a route may use: it parses (RE2's caps apply: repeat counts up to
// 1000, nesting depth) and its compiled program has at most
// MaxRegexInstructions instructions.
func CheckRegex(expr string) error {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return fmt.Errorf("invalid RE2 regular expression: %v", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return fmt.Errorf("invalid RE2 regular expression: %v", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	if n := len(prog.Inst); n > MaxRegexInstructions {
		return fmt.Errorf("compiles to %d RE2 instructions; the limit is %d (use fewer or smaller repeats)", n, MaxRegexInstructions)
	}
	return nil
}

func checkTargetURL(s string) error {
	if s == "" {
		return fmt.Errorf("is required")
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("invalid URL %q", s)
	}
	if u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "h2c" {
		return fmt.Errorf("%q must use http, https or h2c (cleartext HTTP/2)", s)
	}
	if u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("%q has no host", s)
	}
	if u.User != nil {
		return fmt.Errorf("%q must not carry credentials", RedactURL(s))
	}
	if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery || strings.Contains(s, "#") {
		return fmt.Errorf("%q must not have a query or fragment", s)
	}
	if !matchTargetURL(s) {
		return fmt.Errorf("%q is not a valid target URL: scheme://host[:port][/path], with a DNS name or [IPv6 address], a port 1-65535 and a path of URL characters", s)
	}
	return nil
}

// matchTargetURL reports whether s matches TargetURLPatternSource, testing
// its scheme, authority and path apart: the whole pattern, with the IPv6
// alternative, is too large for the regexp package's fast matchers.
func matchTargetURL(s string) bool {
	scheme, rest, ok := strings.Cut(s, "://")
	switch strings.ToLower(scheme) {
	case "http", "https", "h2c":
	default:
		return false
	}
	auth, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		auth, path = rest[:i], rest[i:]
	}
	hostOK := targetNamePattern.MatchString(auth)
	if strings.HasPrefix(auth, "[") {
		hostOK = targetIPv6Pattern.MatchString(auth)
	}
	return ok && hostOK && targetPathPattern.MatchString(path)
}

// RedactURL returns s with any password replaced, for logs and errors.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}

// ValidateKey checks one limit or degrade key dimension.
func ValidateKey(part string) error {
	switch part {
	case "ip", "route", "global":
		return nil
	}
	kind, name, ok := strings.Cut(part, ":")
	if !ok {
		return fmt.Errorf("%q is not a key dimension (ip, route, global, header:NAME, query:NAME, cookie:NAME, jwt:CLAIM, sdk:NAME)", part)
	}
	switch kind {
	case "header":
		if !tokenPattern.MatchString(name) {
			return fmt.Errorf("%q: %q is not a valid header name", part, name)
		}
	case "query":
		if name == "" || len(name) > 256 || strings.IndexFunc(name, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
			return fmt.Errorf("%q: a query parameter name is 1 to 256 printable ASCII characters, without spaces", part)
		}
	case "cookie":
		if !cookiePattern.MatchString(name) {
			return fmt.Errorf("%q: %q is not a valid cookie name", part, name)
		}
	case "sdk":
		if !sdkKeyPattern.MatchString(name) {
			return fmt.Errorf("%q: %q is not an SDK key name (1 to 64 letters, digits, _, . and -)", part, name)
		}
	case "jwt":
		if !ValidClaimPath(name) {
			return fmt.Errorf("%q: %q is not a claim name (letters, digits, _, - and $, dotted for nested claims: jwt:org.id; at most %d bytes)", part, name, MaxClaimPath)
		}
	default:
		return fmt.Errorf("%q is not a key dimension (ip, route, global, header:NAME, query:NAME, cookie:NAME, jwt:CLAIM, sdk:NAME)", part)
	}
	return nil
}

func (v validator) key(p string, key []string) {
	if len(key) > MaxKeyParts {
		v.add(p, "has %d parts; the limit is %d", len(key), MaxKeyParts)
	}
	seen := map[string]string{}
	for i, k := range key {
		kp := fmt.Sprintf("%s[%d]", p, i)
		if err := ValidateKey(k); err != nil {
			v.add(kp, "%v", err)
		}
		// Header names ignore case: header:X-Api-Key and header:x-api-key
		// read one header.
		same := k
		if name, ok := strings.CutPrefix(k, "header:"); ok {
			same = "header:" + textproto.CanonicalMIMEHeaderKey(name)
		}
		if other, dup := seen[same]; dup {
			if other == k {
				v.add(kp, "%q is listed twice", k)
			} else {
				v.add(kp, "%q is listed twice (also as %q); header names ignore case", k, other)
			}
		}
		seen[same] = k
	}
}

func (v validator) limit(p string, l *Limit, routes map[string]int) {
	v.id(p+".id", l.ID)
	v.routeRefs(p, l.Routes, routes)
	v.key(p+".key", l.Key)
	if !slices.Contains(Algorithms, l.Algorithm) {
		if l.Algorithm == "" {
			v.add(p+".algorithm", "is required (one of token_bucket, sliding_window, fixed_window, leaky_bucket, concurrency, adaptive, quota)")
		} else {
			v.add(p+".algorithm", "%q is not one of token_bucket, sliding_window, fixed_window, leaky_bucket, concurrency, adaptive, quota", l.Algorithm)
		}
	}
	switch {
	case l.Algorithm == Adaptive: // adaptiveLimit checks rate
	case l.Rate <= 0:
		v.add(p+".rate", "must be > 0")
	case l.Rate > 1_000_000_000:
		v.add(p+".rate", "must be at most 1000000000")
	}
	if l.Algorithm == Adaptive {
		// adaptiveLimit checks period, burst and cost.
	} else if l.Algorithm == Concurrency {
		if l.Period != 0 {
			v.add(p+".period", "does not apply to the concurrency algorithm")
		}
		if l.Burst != 0 {
			v.add(p+".burst", "does not apply to the concurrency algorithm")
		}
		if l.Cost != nil {
			v.add(p+".cost", "does not apply to the concurrency algorithm")
		}
	} else {
		if l.Period < 0 || (l.Period != 0 && l.Period.D() < time.Millisecond) {
			v.add(p+".period", "must be at least 1ms (0 means %s)", DefaultPeriod)
		} else if l.Period.D() > periodCap(l.Algorithm) {
			v.add(p+".period", "must be at most %s", shortDuration(periodCap(l.Algorithm)))
		}
	}
	if l.Burst < 0 {
		v.add(p+".burst", "must be >= 0 (0 means the rate)")
	} else if l.Burst > 1_000_000_000 {
		v.add(p+".burst", "must be at most 1000000000")
	}
	if l.Algorithm == SlidingWindow || l.Algorithm == FixedWindow {
		if l.Burst != 0 {
			v.add(p+".burst", "does not apply to %s (the window's rate is its capacity)", l.Algorithm)
		}
	}
	if l.IPv6Prefix < 0 || l.IPv6Prefix > 128 {
		v.add(p+".ipv6Prefix", "must be between 1 and 128 (0 means %d)", DefaultIPv6Prefix)
	}
	if d := l.CookieDecoding; d != "" {
		switch {
		case !slices.Contains(CookieDecodings, d):
			v.add(p+".cookieDecoding", "%q is not one of percent, raw", d)
		case !slices.ContainsFunc(l.Key, func(k string) bool { return strings.HasPrefix(k, "cookie:") }):
			v.add(p+".cookieDecoding", "applies only to a key with a cookie: part")
		}
	}
	if l.MaxDelay != 0 && l.Algorithm != LeakyBucket {
		v.add(p+".maxDelay", "applies only to leaky_bucket")
	}
	if l.MaxDelay < 0 || l.MaxDelay.D() > time.Minute {
		v.add(p+".maxDelay", "must be between 0 and 1m")
	}
	if c := l.Cost; c != nil {
		switch {
		case c.Header != "" && c.BodyBytesPerUnit != 0:
			v.add(p+".cost", "set header or bodyBytesPerUnit, not both")
		case c.Header != "" && !tokenPattern.MatchString(c.Header):
			v.add(p+".cost.header", "%q is not a valid header name", c.Header)
		case c.BodyBytesPerUnit < 0 || c.BodyBytesPerUnit > 1<<30:
			v.add(p+".cost.bodyBytesPerUnit", "must be between 1 and 1073741824")
		case c.Header == "" && c.BodyBytesPerUnit == 0:
			v.add(p+".cost", "set header or bodyBytesPerUnit (omit cost for 1 per request)")
		}
	}
	switch l.Scope {
	case "", ScopeNode:
		if l.Mode != "" {
			v.add(p+".mode", "applies only to scope: cluster")
		}
		if l.OnStoreError != "" {
			v.add(p+".onStoreError", "applies only to scope: cluster")
		}
		if l.Bucket != "" {
			v.add(p+".bucket", "applies only to scope: cluster (a shared budget lives in Redis)")
		}
	case ScopeCluster:
		if l.Bucket != "" {
			if l.Algorithm == Quota {
				v.add(p+".bucket", "applies to token_bucket, sliding_window and fixed_window, not quota")
			}
			v.id(p+".bucket", l.Bucket)
		}
		switch l.Algorithm {
		case TokenBucket, SlidingWindow, FixedWindow, Quota:
		default:
			if l.Algorithm != "" {
				v.add(p+".scope", "cluster scope supports token_bucket, sliding_window, fixed_window and quota, not %s", l.Algorithm)
			}
		}
		switch l.Mode {
		case "", ModeExact, ModeBatched:
		default:
			v.add(p+".mode", "%q is not one of exact, batched", l.Mode)
		}
		switch l.OnStoreError {
		case "", OnStoreErrorLocal, OnStoreErrorAllow, OnStoreErrorDeny:
		default:
			v.add(p+".onStoreError", "%q is not one of local, allow, deny", l.OnStoreError)
		}
	default:
		v.add(p+".scope", "%q is not one of node, cluster", l.Scope)
	}
	for i, e := range l.Exempt {
		if _, err := ParsePrefix(e); err != nil {
			v.add(fmt.Sprintf("%s.exempt[%d]", p, i), "%v", err)
		}
	}
	if r := l.Response; r != nil {
		v.status(p+".response.status", r.Status)
		v.body(p+".response.body", r.Body)
		v.contentType(p+".response.contentType", r.ContentType)
	}
	v.adaptiveLimit(p, l, routes)
}

func (v validator) status(p string, s int) {
	if s != 0 && (s < 400 || s > 599) {
		v.add(p, "must be between 400 and 599")
	}
}

func (v validator) body(p, s string) {
	if n := utf8.RuneCountInString(s); n > MaxFallbackBodyChars {
		v.add(p, "is %d characters long; the limit is %d", n, MaxFallbackBodyChars)
	}
}

func (v validator) contentType(p, s string) {
	if s == "" {
		return
	}
	if mt, _, err := mime.ParseMediaType(s); err != nil || strings.ContainsAny(s, "\r\n") || !strings.Contains(mt, "/") {
		v.add(p, "%q is not a media type (type/subtype, then optional ;name=value parameters)", s)
	}
}

func (v validator) ratio(p string, r float64, allowZero bool) {
	if r == 0 && allowZero {
		return
	}
	if !(r > 0 && r <= 1) {
		v.add(p, "must be in (0, 1]")
	}
}

func (v validator) breaker(p string, b *Breaker, routes map[string]int) {
	v.id(p+".id", b.ID)
	v.routeRefs(p, b.Routes, routes)
	if b.Window == 0 {
		v.add(p+".window", "is required")
	} else if b.Window.D() < 100*time.Millisecond || b.Window.D() > time.Hour {
		v.add(p+".window", "must be between 100ms and 1h")
	}
	if b.MinRequests < 0 || b.MinRequests > 1_000_000 {
		v.add(p+".minRequests", "must be between 1 and 1000000 (0 means %d)", DefaultBreakerMinRequests)
	}
	v.ratio(p+".errorRatio", b.ErrorRatio, true)
	v.ratio(p+".slowCallRatio", b.SlowCallRatio, true)
	if b.SlowCallRatio > 0 && b.SlowCallDuration <= 0 {
		v.add(p+".slowCallDuration", "must be > 0 when slowCallRatio is set")
	}
	if b.SlowCallDuration < 0 || b.SlowCallDuration.D() > time.Hour {
		v.add(p+".slowCallDuration", "must be between 0 and 1h")
	}
	if b.ConsecutiveFailures < 0 {
		v.add(p+".consecutiveFailures", "must be >= 0 (0 is off)")
	}
	if b.ErrorRatio == 0 && b.SlowCallRatio == 0 && b.ConsecutiveFailures == 0 {
		v.add(p, "set at least one of errorRatio, slowCallRatio, consecutiveFailures")
	}
	if b.OpenFor == 0 {
		v.add(p+".openFor", "is required")
	} else if b.OpenFor < 0 || b.OpenFor.D() > time.Hour {
		v.add(p+".openFor", "must be > 0 and at most 1h")
	}
	if b.MaxOpenFor < 0 || b.MaxOpenFor.D() > 24*time.Hour {
		v.add(p+".maxOpenFor", "must be between 0 and 24h (0 means %d × openFor)", DefaultMaxOpenForFactor)
	} else if b.MaxOpenFor != 0 && b.MaxOpenFor < b.OpenFor {
		v.add(p+".openFor", "%s is above maxOpenFor %s", b.OpenFor, b.MaxOpenFor)
	}
	if b.HalfOpenProbes < 0 || b.HalfOpenProbes > MaxHalfOpenProbes {
		v.add(p+".halfOpenProbes", "must be between 1 and %d (0 means %d)", MaxHalfOpenProbes, DefaultHalfOpenProbes)
	}
	var seenStatus map[int]bool
	for i, s := range b.FailureStatuses {
		if s < 100 || s > 599 {
			v.add(fmt.Sprintf("%s.failureStatuses[%d]", p, i), "%d is not an HTTP status", s)
		} else if listedBefore(b.FailureStatuses, i, &seenStatus) {
			v.add(fmt.Sprintf("%s.failureStatuses[%d]", p, i), "%d is listed twice", s)
		}
	}
	// A breaker counts the upstream's failures: error statuses (4xx such
	// as 429 or 408 included, which an overloaded upstream answers), never
	// informational, success or redirect ones.
	for i, s := range b.FailureStatuses {
		if s >= 100 && s < 400 {
			v.add(fmt.Sprintf("%s.failureStatuses[%d]", p, i), "%d is not an error status; failures are 400-599", s)
		}
	}
	if f := b.Fallback; f != nil {
		v.status(p+".fallback.status", f.Status)
		if f.RetryAfter < 0 {
			v.add(p+".fallback.retryAfter", "must be >= 0")
		}
		v.body(p+".fallback.body", f.Body)
		v.contentType(p+".fallback.contentType", f.ContentType)
	}
}

func (v validator) degrade(p string, d *Degrade, routes map[string]int) {
	v.id(p+".id", d.ID)
	v.routeRefs(p, d.Routes, routes)
	switch d.Mode {
	case DegradeAuto:
		if d.Triggers == nil || (d.Triggers.Level1 == nil && d.Triggers.Level2 == nil) {
			v.add(p+".triggers", "auto mode needs a level1 or level2 trigger")
		}
		if d.Level != 0 {
			v.add(p+".level", "applies only to manual mode")
		}
	case DegradeManual:
	case "":
		v.add(p+".mode", "is required (auto or manual)")
	default:
		v.add(p+".mode", "%q is not one of auto, manual", d.Mode)
	}
	if d.Level < 0 || d.Level > 2 {
		v.add(p+".level", "must be 0, 1 or 2")
	}
	if t := d.Triggers; t != nil {
		for _, lv := range []struct {
			name string
			t    *Trigger
		}{{"level1", t.Level1}, {"level2", t.Level2}} {
			if lv.t == nil {
				continue
			}
			tp := p + ".triggers." + lv.name
			if !(lv.t.QPSAbove >= 0) || math.IsInf(lv.t.QPSAbove, 0) {
				v.add(tp+".qpsAbove", "must be a finite number >= 0 (0 is off)")
			}
			v.ratio(tp+".successRateBelow", lv.t.SuccessRateBelow, true)
			if lv.t.QPSAbove == 0 && lv.t.SuccessRateBelow == 0 {
				v.add(tp, "set qpsAbove or successRateBelow")
			}
		}
		if t.Level1 != nil && t.Level2 != nil {
			if t.Level1.QPSAbove > 0 && t.Level2.QPSAbove > 0 && t.Level2.QPSAbove < t.Level1.QPSAbove {
				v.add(p+".triggers.level2.qpsAbove", "%v is looser than level1's %v; level 2 must need more traffic", t.Level2.QPSAbove, t.Level1.QPSAbove)
			}
			if t.Level1.SuccessRateBelow > 0 && t.Level2.SuccessRateBelow > 0 && t.Level2.SuccessRateBelow > t.Level1.SuccessRateBelow {
				v.add(p+".triggers.level2.successRateBelow", "%v is looser than level1's %v; level 2 must need a lower success rate", t.Level2.SuccessRateBelow, t.Level1.SuccessRateBelow)
			}
		}
	}
	if d.Window != 0 && (d.Window.D() < 100*time.Millisecond || d.Window.D() > time.Hour) {
		v.add(p+".window", "must be between 100ms and 1h (0 means %s)", DefaultDegradeWindow)
	}
	v.ratio(p+".level1ShedRatio", d.Level1ShedRatio, true)
	if d.RecoverAfter < 0 || d.RecoverAfter > 10000 {
		v.add(p+".recoverAfter", "must be between 1 and 10000 (0 means %d)", DefaultRecoverAfter)
	}
	v.key(p+".key", d.Key)
	if f := d.Fallback; f != nil {
		v.status(p+".fallback.status", f.Status)
		if f.RetryAfter < 0 {
			v.add(p+".fallback.retryAfter", "must be >= 0")
		}
		v.body(p+".fallback.html", f.HTML)
		if len(f.JSON) > MaxFallbackBodyBytes {
			v.add(p+".fallback.json", "is %d bytes (compact JSON); the limit is %d", len(f.JSON), MaxFallbackBodyBytes)
		}
		if len(f.JSON) > 0 && !json.Valid(f.JSON) {
			v.add(p+".fallback.json", "is not valid JSON")
		}
	}
}

// ParsePrefix parses a CIDR ("10.0.0.0/8") or a single address ("10.1.2.3",
// taken as /32 or /128), masked.
func ParsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a CIDR", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an IP address or CIDR", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}
