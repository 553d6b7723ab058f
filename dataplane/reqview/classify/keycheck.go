package classify

import (
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/sluicegw/sluice/dataplane/reqview"
)

// Bounds above which the standard library's parsers read nothing at all: a
// query of more than MaxQueryParams parameters is dropped whole by net/url
// (and so by httputil.ReverseProxy), a request of more than MaxCookies
// cookies has none for net/http. A request keyed on a query parameter or a
// cookie that exceeds them is refused rather than keyed on a value the
// upstream will never see.
const (
	MaxQueryParams = 10000
	MaxCookies     = 3000
)

// AmbiguousError is a request refused by KeyCheck: Part names what a limit
// (or degrade plan) keys on, as `query parameter "user"`, `header
// "X-Api-Key"`, `cookie "sid"` or `header "Cookie"`, and Reason says what is
// wrong with it ("is repeated"). Its Error is Part and Reason joined by a
// space, fit for the detail of a 400 problem+json answer.
type AmbiguousError struct {
	Part   string
	Reason string
}

func (e *AmbiguousError) Error() string { return e.Part + " " + e.Reason }

// KeyCheck refuses requests whose key parts are ambiguous: where the gateway
// and the upstream (or two upstream stacks) could read different values, so
// that a client could key its requests on one value while the upstream acts
// on another. Build one per route with NewKeyCheck over every key that applies
// to the route (limits and degrade plans), and call ReadView (or Check) before
// degrade and limits decide. A nil *KeyCheck checks nothing. It is
// immutable and safe for concurrent use.
//
// The rule, for each query:NAME, header:NAME and cookie:NAME part (see the
// package doc, "Ambiguous key parts"): the part must appear at most once,
// spelled exactly as NAME, with a value every common parser decodes the same
// way, and must be forwarded.
type KeyCheck struct {
	queries []queryName
	headers []string // canonical names
	aliases []string // canonical spellings mapping to a header's CGI name, by index
	aliasOf []int    // header index of each alias
	scanAll bool     // too many aliases to list: scan the header names
	cookies []cookieName
	names   reqview.KeyNames // the names above, in the order the view records their values
}

// cookieName is a cookie a check reads, and where the view records its
// value: dec percent-decoded (cookie parts of most keys), raw as sent
// (limits with cookieDecoding: raw); each a slot index, or -1.
type cookieName struct {
	name     string
	dec, raw int
}

// wanted marks a cookieName slot to be numbered once every key is read.
const wanted = -2

// RuleKey is one rule's key as a KeyCheck reads it: its parts as written,
// and whether its cookie parts are keyed raw (a limit with cookieDecoding:
// raw) rather than percent-decoded.
type RuleKey struct {
	Parts      []string
	RawCookies bool
}

type queryName struct {
	name  string
	plain bool // name has no byte that must be percent-encoded in a query
}

// NewKeyCheck returns the check of the query, header and cookie parts of
// keys (each a limit's or degrade plan's key, as in the rule document; cookie
// values percent-decoded), or nil when none has such a part. Invalid parts
// are ignored (rule sets are validated before they are compiled).
func NewKeyCheck(keys ...[]string) *KeyCheck {
	rks := make([]RuleKey, len(keys))
	for i, k := range keys {
		rks[i].Parts = k
	}
	return NewKeyCheckOf(rks...)
}

// NewKeyCheckOf is NewKeyCheck over rule keys that say how their cookie
// parts are read: a cookie that some key reads decoded is checked by the
// decoding rule (reqview.DecodeCookie) and recorded decoded; one that some
// key reads raw is recorded raw too.
func NewKeyCheckOf(keys ...RuleKey) *KeyCheck {
	kc := &KeyCheck{}
	for _, rk := range keys {
		for _, k := range rk.Parts {
			kind, name, ok := strings.Cut(k, ":")
			if !ok || name == "" {
				continue
			}
			switch kind {
			case "query":
				if !slices.ContainsFunc(kc.queries, func(q queryName) bool { return q.name == name }) {
					kc.queries = append(kc.queries, queryName{name: name, plain: plainQueryName(name)})
				}
			case "header":
				if c := http.CanonicalHeaderKey(name); !slices.Contains(kc.headers, c) {
					kc.headers = append(kc.headers, c)
				}
			case "cookie":
				i := slices.IndexFunc(kc.cookies, func(c cookieName) bool { return c.name == name })
				if i < 0 {
					i = len(kc.cookies)
					kc.cookies = append(kc.cookies, cookieName{name: name, dec: -1, raw: -1})
				}
				if rk.RawCookies {
					kc.cookies[i].raw = wanted // numbered below
				} else {
					kc.cookies[i].dec = wanted
				}
			}
		}
	}
	if len(kc.queries)+len(kc.headers)+len(kc.cookies) == 0 {
		return nil
	}
	for _, q := range kc.queries {
		kc.names.Queries = append(kc.names.Queries, q.name)
	}
	kc.names.Headers = kc.headers
	off := len(kc.queries) + len(kc.headers)
	for i := range kc.cookies {
		if c := &kc.cookies[i]; c.dec == wanted {
			c.dec = off + len(kc.names.Cookies)
			kc.names.Cookies = append(kc.names.Cookies, c.name)
		}
	}
	for i := range kc.cookies {
		c := &kc.cookies[i]
		if c.raw == wanted {
			c.raw = off + len(kc.names.Cookies) + len(kc.names.RawCookies)
			kc.names.RawCookies = append(kc.names.RawCookies, c.name)
		}
	}
	for i, name := range kc.headers {
		for _, a := range cgiAliases(name) {
			if a != name && !slices.Contains(kc.aliases, a) {
				kc.aliases, kc.aliasOf = append(kc.aliases, a), append(kc.aliasOf, i)
			}
		}
		if strings.Count(name, "-")+strings.Count(name, "_") > maxAliasSeparators {
			kc.scanAll = true
		}
	}
	return kc
}

// maxAliasSeparators bounds the "-"/"_" spellings of a header name listed
// ahead (2^n); names with more are found by scanning the request's header.
const maxAliasSeparators = 4

// cgiAliases returns the canonical spellings (as net/http stores them) of
// name with each "-" or "_" written either way: the header names a CGI-style
// upstream reads as one variable. Empty when name has too many separators.
func cgiAliases(name string) []string {
	var seps []int
	for i := 0; i < len(name); i++ {
		if name[i] == '-' || name[i] == '_' {
			seps = append(seps, i)
		}
	}
	if len(seps) > maxAliasSeparators {
		return nil
	}
	out := make([]string, 0, 1<<len(seps))
	b := []byte(name)
	for mask := 0; mask < 1<<len(seps); mask++ {
		for j, at := range seps {
			b[at] = '-'
			if mask&(1<<j) != 0 {
				b[at] = '_'
			}
		}
		out = append(out, http.CanonicalHeaderKey(string(b)))
	}
	return out
}

// Check returns an *AmbiguousError when one of r's key parts is ambiguous,
// nil otherwise. It is ReadView on r's view without keeping the view.
func (kc *KeyCheck) Check(r *http.Request) error {
	v := reqview.FromRequest(r)
	return kc.ReadView(&v)
}

// ReadView is Check on a request view that also records, in v, the value of
// every part it checked (View.SetChecked), so that limits and degrade plans
// key on what was checked without parsing the request again. On error v
// keeps no checked value. It does not allocate for a request that passes,
// except to decode a percent-encoded query value (as keying on it would) and
// for a check of more than eight parts.
func (kc *KeyCheck) ReadView(v *reqview.View) error {
	if kc == nil {
		return nil
	}
	v.StartCheck(&kc.names)
	if len(kc.queries) > 0 {
		if err := checkQuery(v.RawQuery, kc.queries, v); err != nil {
			v.EndCheck(&kc.names, false)
			return err
		}
	}
	if len(kc.headers) > 0 {
		if err := kc.checkHeaders(v.Header(), v); err != nil {
			v.EndCheck(&kc.names, false)
			return err
		}
	}
	if len(kc.cookies) > 0 {
		if err := checkCookies(v.Header()["Cookie"], kc.cookies, v); err != nil {
			v.EndCheck(&kc.names, false)
			return err
		}
	}
	// Connection matters only to a keyed header or Cookie (checkConnection).
	if len(kc.headers) == 0 && len(kc.cookies) == 0 {
		v.EndCheck(&kc.names, true)
		return nil
	}
	if conn := v.Header()["Connection"]; len(conn) > 0 {
		if err := kc.checkConnection(conn); err != nil {
			v.EndCheck(&kc.names, false)
			return err
		}
	}
	v.EndCheck(&kc.names, true)
	return nil
}

// checkConnection refuses a keyed header (or Cookie, when cookies are keyed)
// that the client names in Connection: a proxy removes such headers before
// forwarding, so the upstream would never see what the gateway keyed on.
func (kc *KeyCheck) checkConnection(lines []string) error {
	for _, line := range lines {
		for line != "" {
			var tok string
			tok, line, _ = strings.Cut(line, ",")
			tok = textproto.TrimString(tok)
			if tok == "" {
				continue
			}
			for _, name := range kc.headers {
				if strings.EqualFold(tok, name) {
					return &AmbiguousError{Part: fmt.Sprintf("header %q", name), Reason: "is named in Connection, so it would not be forwarded"}
				}
			}
			if len(kc.cookies) > 0 && strings.EqualFold(tok, "Cookie") {
				return &AmbiguousError{Part: `header "Cookie"`, Reason: "is named in Connection, so it would not be forwarded"}
			}
		}
	}
	return nil
}

func queryPart(name string) string { return fmt.Sprintf("query parameter %q", name) }

// checkQuery applies the rule to a raw query. A pair concerns NAME when its
// name, decoded leniently (invalid escapes left as they are, as Python's
// parse_qs does), cut at a NUL and trimmed of spaces, equals NAME ignoring
// case, or when its
// raw name does (nginx's $arg_NAME compares undecoded names ignoring case).
// Pairs are split at "&" and, to find the pairs other stacks split there, at
// ";". A pair that concerns NAME is refused when it appears twice, sits next
// to a ";" (net/url drops the whole "&"-separated pair; other parsers split
// it), is not spelled exactly NAME (a different case, spaces, or
// percent-encoding a name that needs none), or has a value that is not
// well-formed percent-encoding of valid UTF-8 without control characters.
func checkQuery(raw string, names []queryName, kv *reqview.View) error {
	if raw == "" {
		return nil
	}
	var seenBuf [8]bool
	seen := seenBuf[:0]
	if len(names) <= len(seenBuf) {
		seen = seenBuf[:len(names)]
	} else {
		seen = make([]bool, len(names))
	}
	// One pass over the bytes (this runs on every request of a route keyed
	// on a query parameter): segment ends, its first "=" and any ";".
	nseg := 0
	for i := 0; i <= len(raw); i++ {
		start, eq, semi := i, -1, false
		for ; i < len(raw) && raw[i] != '&'; i++ {
			switch raw[i] {
			case '=':
				if eq < 0 {
					eq = i
				}
			case ';':
				semi = true
			}
		}
		nseg++
		seg := raw[start:i]
		switch {
		case seg == "":
		case semi:
			for seg != "" {
				var pair string
				pair, seg, _ = strings.Cut(seg, ";")
				if pair != "" {
					name, val, _ := strings.Cut(pair, "=")
					if err := checkPair(name, val, names, seen, true, kv); err != nil {
						return err
					}
				}
			}
		case eq < 0:
			if err := checkPair(seg, "", names, seen, false, kv); err != nil {
				return err
			}
		default:
			if err := checkPair(raw[start:eq], raw[eq+1:i], names, seen, false, kv); err != nil {
				return err
			}
		}
	}
	if nseg > MaxQueryParams {
		return &AmbiguousError{Part: queryPart(names[0].name), Reason: fmt.Sprintf("is in a query of more than %d parameters, which the upstream would not read", MaxQueryParams)}
	}
	return nil
}

// checkPair applies the rule to one query pair, keeping the value of a
// pair that passes in kv; semi says the pair shares its "&"-separated
// segment with a ";".
func checkPair(rawName, rawVal string, names []queryName, seen []bool, semi bool, kv *reqview.View) error {
	for i := range names {
		q := &names[i]
		if !queryConcerns(rawName, q) {
			continue
		}
		part := func(reason string) error { return &AmbiguousError{Part: queryPart(q.name), Reason: reason} }
		if seen[i] {
			return part("is repeated")
		}
		seen[i] = true
		if semi {
			return part(`is in a pair with a ";", which parsers split differently`)
		}
		if rawName != q.name {
			dn, err := url.QueryUnescape(rawName)
			if err != nil || dn != q.name || q.plain {
				return part(fmt.Sprintf("is written as %q", clip(rawName)))
			}
		}
		v, why := decodeQueryValue(rawVal)
		if why != "" {
			return part(why)
		}
		kv.SetChecked(i, v)
	}
	return nil
}

func queryConcerns(rawName string, q *queryName) bool {
	name := q.name
	switch {
	case len(rawName) < len(name):
		return false // decoding and trimming never lengthen a name
	case len(rawName) == len(name) && (rawName == name || strings.EqualFold(rawName, name)):
		return true
	case len(rawName) == len(name) && q.plain:
		return false // "+" would decode to a space, which a plain name lacks
	}
	special := false
	for i := 0; i < len(rawName); i++ {
		if c := rawName[i]; c == '%' || c == '+' || c == ' ' {
			special = true
			break
		}
	}
	if !special {
		return false
	}
	dn := lenientUnescape(rawName)
	if i := strings.IndexByte(dn, 0); i >= 0 {
		dn = dn[:i] // a C string ends at NUL: "user%00x" is "user" to some stacks
	}
	return strings.EqualFold(strings.TrimSpace(dn), name)
}

// decodeQueryValue returns a raw query value decoded as url.QueryUnescape
// decodes it, or why it is malformed: a bad escape, or a decoded value
// checkText refuses. It allocates only when the value has escapes or "+".
func decodeQueryValue(raw string) (string, string) {
	first := -1
	ascii := true
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch c {
		case '%':
			if i+2 >= len(raw) || !ishex(raw[i+1]) || !ishex(raw[i+2]) {
				return "", "has a malformed percent-encoding"
			}
			c = unhex(raw[i+1])<<4 | unhex(raw[i+2])
			if first < 0 {
				first = i
			}
			i += 2
		case '+':
			c = ' '
			if first < 0 {
				first = i
			}
		}
		if c < 0x20 || c == 0x7f {
			return "", "contains a control character"
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	v := raw
	if first >= 0 {
		b := make([]byte, first, len(raw))
		copy(b, raw[:first])
		for i := first; i < len(raw); i++ {
			switch c := raw[i]; c {
			case '%':
				b = append(b, unhex(raw[i+1])<<4|unhex(raw[i+2]))
				i += 2
			case '+':
				b = append(b, ' ')
			default:
				b = append(b, c)
			}
		}
		v = unsafeString(b)
	}
	if !ascii && !utf8.ValidString(v) {
		return "", "is not valid UTF-8"
	}
	return v, ""
}

// checkText returns why a decoded value cannot be keyed on unambiguously,
// or "": invalid UTF-8 (Python decodes it to U+FFFD, so distinct byte strings
// would be one value upstream) and control characters (NUL ends a C string).
func checkText(v string) string {
	ascii := true
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < 0x20 || c == 0x7f {
			return "contains a control character"
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	if !ascii && !utf8.ValidString(v) {
		return "is not valid UTF-8"
	}
	return ""
}

// lenientUnescape decodes "+" and valid %XX escapes, leaving invalid escapes
// as they are.
func lenientUnescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '+':
			b.WriteByte(' ')
		case c == '%' && i+2 < len(s) && ishex(s[i+1]) && ishex(s[i+2]):
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// plainQueryName reports whether name can only be written one way in a
// query: it has no byte that needs percent-encoding (or "+" for space).
func plainQueryName(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~!$'()*,:@/?", c) >= 0) {
			return false
		}
	}
	return true
}

// checkHeaders applies the rule to the request's header: a keyed header
// must come in one field line (repeated lines are read first-wins by some
// stacks, last-wins or joined by others; a comma inside one line is part of
// the value, as every common stack reads it), with no control character (a
// tab inside) in its value, and no other field may map to the same name
// once "_" is read as "-" (CGI, WSGI and PHP turn both into HTTP_X_API_KEY).
func (kc *KeyCheck) checkHeaders(h http.Header, kv *reqview.View) error {
	for i, name := range kc.headers {
		vs := h[name]
		if len(vs) > 1 {
			return &AmbiguousError{Part: fmt.Sprintf("header %q", name), Reason: "is repeated"}
		}
		if len(vs) == 1 {
			if why := checkText(vs[0]); why != "" {
				return &AmbiguousError{Part: fmt.Sprintf("header %q", name), Reason: why}
			}
			kv.SetChecked(len(kc.queries)+i, vs[0])
		}
	}
	alias := func(k, name string) error {
		return &AmbiguousError{Part: fmt.Sprintf("header %q", name), Reason: fmt.Sprintf("is also sent as %q", clip(k))}
	}
	if kc.scanAll {
		for k := range h {
			for _, name := range kc.headers {
				if k != name && sameCGIName(k, name) {
					return alias(k, name)
				}
			}
		}
		return nil
	}
	for i, a := range kc.aliases {
		if _, ok := h[a]; ok {
			return alias(a, kc.headers[kc.aliasOf[i]])
		}
	}
	return nil
}

// sameCGIName reports whether header names a and b map to one CGI variable:
// equal ignoring case, with "_" and "-" alike.
func sameCGIName(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x == '_' {
			x = '-'
		}
		if y == '_' {
			y = '-'
		}
		if lower(x) != lower(y) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// checkCookies applies the rule to the Cookie field lines. The cookies must
// come in one line (HTTP/2's split cookie fields are joined by the server
// before this runs); a cookie concerns NAME when its name, trimmed of
// white space, equals NAME ignoring case. Such a cookie is refused when it
// appears twice (Go reads the first, Python's http.cookies the last), is not
// spelled exactly NAME (white space around the name, which Go trims and
// others keep; a different case), has no "=", or has a value that is not
// made of cookie-octets (RFC 6265) other than "[" and "]" (which Python's
// parser stops at), optionally in double quotes; and, where a key reads it
// percent-decoded, when decoding upstreams could read it two ways
// (reqview.DecodeCookie: valid and malformed escapes together, invalid
// UTF-8 or a control character once decoded, double encoding).
func checkCookies(lines []string, names []cookieName, kv *reqview.View) error {
	if len(lines) == 0 {
		return nil
	}
	if len(lines) > 1 {
		return &AmbiguousError{Part: `header "Cookie"`, Reason: "is repeated"}
	}
	line := lines[0]
	var seenBuf [8]bool
	seen := seenBuf[:0]
	if len(names) <= len(seenBuf) {
		seen = seenBuf[:len(names)]
	} else {
		seen = make([]bool, len(names))
	}
	nparts := 0
	for i := 0; i <= len(line); i++ {
		start, eq := i, -1
		for ; i < len(line) && line[i] != ';'; i++ {
			if line[i] == '=' && eq < 0 {
				eq = i
			}
		}
		nparts++
		lo, hi := start, i // the part less white space around it (textproto.TrimString)
		for lo < hi && (line[lo] == ' ' || line[lo] == '\t') {
			lo++
		}
		for hi > lo && (line[hi-1] == ' ' || line[hi-1] == '\t') {
			hi--
		}
		if lo == hi {
			continue
		}
		rawName, val, hasEq := line[lo:hi], "", eq >= 0
		if hasEq {
			rawName, val = line[lo:eq], line[eq+1:hi]
		}
		tn := rawName
		if len(tn) > 0 && (tn[len(tn)-1] == ' ' || tn[len(tn)-1] == '\t') {
			tn = textproto.TrimString(tn)
		}
		for k := range names {
			name := names[k].name
			if len(tn) != len(name) || !strings.EqualFold(tn, name) {
				continue
			}
			fail := func(reason string) error {
				return &AmbiguousError{Part: fmt.Sprintf("cookie %q", name), Reason: reason}
			}
			if seen[k] {
				return fail("is repeated")
			}
			seen[k] = true
			switch {
			case rawName != name && textproto.TrimString(rawName) == name:
				return fail("has white space around its name")
			case rawName != name:
				return fail(fmt.Sprintf("is written as %q", clip(rawName)))
			case !hasEq:
				return fail(`has no "="`)
			}
			if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
				val = val[1 : len(val)-1]
			}
			for j := 0; j < len(val); j++ {
				if !portableCookieByte(val[j]) {
					return fail("has a malformed value")
				}
			}
			if at := names[k].raw; at >= 0 {
				kv.SetChecked(at, val)
			}
			if at := names[k].dec; at >= 0 {
				dv, why := reqview.DecodeCookie(val)
				if why != "" {
					return fail(why)
				}
				kv.SetChecked(at, dv)
			}
		}
	}
	if nparts > MaxCookies {
		return &AmbiguousError{Part: `header "Cookie"`, Reason: fmt.Sprintf("has more than %d cookies, which the upstream would not read", MaxCookies)}
	}
	return nil
}

// portableCookieByte reports whether c is an RFC 6265 cookie-octet that
// Python's http.cookies also accepts: 0x21-0x7E less DQUOTE, comma,
// semicolon, backslash, "[" and "]".
func portableCookieByte(c byte) bool {
	return 0x21 <= c && c <= 0x7e && c != '"' && c != ',' && c != ';' && c != '\\' && c != '[' && c != ']'
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
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
