package api

import (
	"fmt"
	"maps"
	"net/textproto"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Identity verifies the JWTs callers present on its routes. A request on
// such a route that carries a token has it verified (signature with a key
// of the JWKS, algorithm, issuer, audience, expiry and not-before within
// ClockSkew); a token that fails is answered 401 and never counted as an
// anonymous caller. The verified claims are what jwt:CLAIM key parts,
// tiers and classes' claims read. A request without a token has no claims
// (its jwt: key parts are "missing") unless Required, which answers it 401.
type Identity struct {
	ID string `json:"id"`
	// Routes the identity verifies tokens on; empty means every route. A
	// route has at most one identity.
	Routes []string `json:"routes,omitempty"`
	// JWT is how tokens are read and verified. Required.
	JWT *JWTSettings `json:"jwt"`
}

// JWTSettings say where a caller's JWT is and what makes it valid.
type JWTSettings struct {
	// From is where the token is read; nil means the Authorization header
	// with the Bearer scheme (Normalize writes it out).
	From *TokenSource `json:"from,omitempty"`
	// JWKS is where the verification keys are. Required.
	JWKS JWKSSource `json:"jwks"`
	// Issuer is the iss claim a token must carry, exactly. Required.
	Issuer string `json:"issuer"`
	// Audiences: a token's aud must name at least one of them; empty means
	// aud is not checked.
	Audiences []string `json:"audiences,omitempty"`
	// Algorithms are the signature algorithms accepted (see
	// JWTAlgorithms); none and the HMAC algorithms (HS*) are refused, since
	// a gateway that holds a shared secret could mint tokens. Required.
	Algorithms []JWTAlgorithm `json:"algorithms"`
	// ClockSkew is the leeway on exp and nbf; 0 means none. At most
	// MaxClockSkew.
	ClockSkew Duration `json:"clockSkew,omitempty"`
	// Required answers 401 to a request without a token; false lets it
	// through with no claims.
	Required bool `json:"required,omitempty"`
}

// TokenSource is where a token is read: a header (with an optional auth
// scheme in front of the token) or a cookie. Exactly one of Header and
// Cookie is set.
type TokenSource struct {
	Header string `json:"header,omitempty"`
	// Scheme is the auth scheme before the token in Header ("Bearer",
	// compared ignoring case); empty means the whole value is the token.
	Scheme string `json:"scheme,omitempty"`
	Cookie string `json:"cookie,omitempty"`
}

// JWKSSource is where an identity's JSON Web Key Set is: a file, read
// again when it changes, or an http(s) URL fetched every Refresh. Either is
// read off the request path and kept when a read fails. Exactly one of
// File and URL is set.
type JWKSSource struct {
	// File is an absolute path on the gateway's host.
	File string `json:"file,omitempty"`
	URL  string `json:"url,omitempty"`
	// Refresh is how often URL is fetched; 0 means DefaultJWKSRefresh. An
	// unknown kid fetches it at most once per Refresh/10.
	Refresh Duration `json:"refresh,omitempty"`
}

// Tier is a share of a limit's callers, chosen by their verified claims,
// with rate, burst and period of its own (zero fields keep the limit's).
// A tier without Match takes every caller the tiers before it did not.
type Tier struct {
	ID     string     `json:"id"`
	Match  *TierMatch `json:"match,omitempty"`
	Rate   int64      `json:"rate,omitempty"`
	Burst  int64      `json:"burst,omitempty"`
	Period Duration   `json:"period,omitempty"`
}

// TierMatch says which callers a Tier takes: every claim listed must be
// present in the verified token with the value given (a string, or the
// JSON text of a number or boolean).
type TierMatch struct {
	Claims map[string]string `json:"claims"`
}

// Calendar is the calendar period of a quota.
type Calendar string

// The calendar periods of a quota.
const (
	CalendarDay   Calendar = "day"
	CalendarWeek  Calendar = "week" // from Monday 00:00
	CalendarMonth Calendar = "month"
)

// Calendars lists every Calendar.
var Calendars = []Calendar{CalendarDay, CalendarWeek, CalendarMonth}

// JWTAlgorithm is a JWS signature algorithm ("alg").
type JWTAlgorithm string

// JWTAlgorithms lists the signature algorithms an identity may accept:
// RSA PKCS#1 v1.5 and PSS, ECDSA P-256 and P-384, and Ed25519.
var JWTAlgorithms = []JWTAlgorithm{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"}

func jwtAlgorithmList() string {
	s := make([]string, len(JWTAlgorithms))
	for i, a := range JWTAlgorithms {
		s[i] = string(a)
	}
	return strings.Join(s, ", ")
}

// Identity defaults and bounds.
const (
	DefaultJWKSRefresh = 10 * time.Minute
	MinJWKSRefresh     = time.Second
	MaxJWKSRefresh     = 24 * time.Hour
	MaxClockSkew       = 5 * time.Minute
	MaxIdentities      = 64
	MaxTiers           = 16
	MaxClaimPath       = 128
	MaxQuotaPeriod     = 366 * 24 * time.Hour
	// DefaultTokenHeader and DefaultTokenScheme are where a token is read
	// when an identity sets no from.
	DefaultTokenHeader = "Authorization"
	DefaultTokenScheme = "Bearer"
)

// ClaimPathSource is the syntax of a claim name in jwt:CLAIM key parts and
// claims matches: names of letters, digits, _, - and $, dotted for nested
// claims (org.id). schema.json repeats it.
const ClaimPathSource = `^[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*$`

var claimPathPattern = regexp.MustCompile(ClaimPathSource)

// ValidClaimPath reports whether s is a claim path (ClaimPathSource, at
// most MaxClaimPath bytes).
func ValidClaimPath(s string) bool { return len(s) <= MaxClaimPath && claimPathPattern.MatchString(s) }

// JWTPart returns the claim path of a jwt:CLAIM key part and true, or false
// for any other part.
func JWTPart(part string) (string, bool) { return strings.CutPrefix(part, "jwt:") }

// KeysOnJWT reports whether any part of key is a jwt:CLAIM part.
func KeysOnJWT(key []string) bool {
	return slices.ContainsFunc(key, func(k string) bool { _, ok := JWTPart(k); return ok })
}

// TokenFrom returns where the identity reads its token, with the default
// for a nil From.
func (j *JWTSettings) TokenFrom() TokenSource {
	if j == nil || j.From == nil {
		return TokenSource{Header: DefaultTokenHeader, Scheme: DefaultTokenScheme}
	}
	return *j.From
}

// RefreshEvery returns the JWKS refresh period with its default.
func (s JWKSSource) RefreshEvery() time.Duration {
	if s.Refresh == 0 {
		return DefaultJWKSRefresh
	}
	return s.Refresh.D()
}

// WithTier returns l with t's non-zero settings in place of l's own: the
// limit a tier's callers get. It keeps l's id and has no tiers.
func (l Limit) WithTier(t Tier) Limit {
	l.Tiers = nil
	if t.Rate != 0 {
		l.Rate = t.Rate
	}
	if t.Burst != 0 {
		l.Burst = t.Burst
	}
	if t.Period != 0 {
		l.Period = t.Period
	}
	return l
}

// IdentityFor returns the index of the identity that covers route, or -1.
func (rs *RuleSet) IdentityFor(route string) int {
	for i := range rs.Identities {
		if Applies(rs.Identities[i].Routes, route) {
			return i
		}
	}
	return -1
}

// normalizeIdentityParts writes out the defaults of identities, tiers and
// quotas. Documents without them keep their canonical form.
func (n *RuleSet) normalizeIdentityParts() {
	for i := range n.Identities {
		j := n.Identities[i].JWT
		if j == nil {
			continue
		}
		from := j.TokenFrom()
		if from.Header != "" {
			from.Header = textproto.CanonicalMIMEHeaderKey(from.Header)
		}
		j.From = &from
		if j.JWKS.URL != "" && j.JWKS.Refresh == 0 {
			j.JWKS.Refresh = Duration(DefaultJWKSRefresh)
		}
	}
	for i := range n.Limits {
		l := &n.Limits[i]
		for j := range l.Tiers {
			t := &l.Tiers[j]
			if (l.Algorithm == TokenBucket || l.Algorithm == LeakyBucket) && t.Rate != 0 && t.Burst == 0 {
				t.Burst = t.Rate // as for the limit: zero burst means the rate
			}
		}
		if l.Algorithm == Quota && l.Calendar != "" && l.Timezone == "" {
			l.Timezone = "UTC"
		}
	}
}

// identities checks the rule set's identities and returns, per route id,
// the index of the identity that covers it.
func (v validator) identities(rs *RuleSet, routes map[string]int) {
	if len(rs.Identities) > MaxIdentities {
		v.add("identities", "has %d identities; the limit is %d", len(rs.Identities), MaxIdentities)
	}
	ids := map[string]int{}
	allRoutes := slices.Sorted(maps.Keys(routes))
	covered := map[string]string{}
	every := ""
	for i := range rs.Identities {
		id := &rs.Identities[i]
		p := fmt.Sprintf("identities[%d]", i)
		v.id(p+".id", id.ID)
		if j, dup := ids[id.ID]; dup && id.ID != "" {
			v.add(p+".id", "duplicate id %q (also identities[%d])", id.ID, j)
		} else {
			ids[id.ID] = i
		}
		v.routeRefs(p, id.Routes, routes)
		v.exclusive(p, id.Routes, allRoutes, covered, &every, "identities")
		if id.JWT == nil {
			v.add(p+".jwt", "is required")
			continue
		}
		v.jwt(p+".jwt", id.JWT)
	}
}

func (v validator) jwt(p string, j *JWTSettings) {
	if f := j.From; f != nil {
		fp := p + ".from"
		switch {
		case (f.Header == "") == (f.Cookie == ""):
			v.add(fp, "set exactly one of header and cookie")
		case f.Header != "" && !tokenPattern.MatchString(f.Header):
			v.add(fp+".header", "%q is not a valid header name", f.Header)
		case f.Cookie != "" && !cookiePattern.MatchString(f.Cookie):
			v.add(fp+".cookie", "%q is not a valid cookie name", f.Cookie)
		}
		if f.Scheme != "" {
			if f.Header == "" {
				v.add(fp+".scheme", "applies only with header")
			} else if !tokenPattern.MatchString(f.Scheme) {
				v.add(fp+".scheme", "%q is not an auth scheme (a token such as Bearer)", f.Scheme)
			}
		}
	}
	kp := p + ".jwks"
	switch k := j.JWKS; {
	case (k.File == "") == (k.URL == ""):
		v.add(kp, "set exactly one of file and url")
	case k.File != "":
		if !filepath.IsAbs(k.File) || strings.ContainsAny(k.File, "\x00\r\n") {
			v.add(kp+".file", "%q must be an absolute path", k.File)
		}
		if k.Refresh != 0 {
			v.add(kp+".refresh", "applies only to url (a file is read again when it changes)")
		}
	default:
		u, err := url.Parse(k.URL)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			v.add(kp+".url", "%q must be an http or https URL", RedactURL(k.URL))
		case u.User != nil:
			v.add(kp+".url", "%q must not carry credentials", RedactURL(k.URL))
		}
		if k.Refresh != 0 && (k.Refresh.D() < MinJWKSRefresh || k.Refresh.D() > MaxJWKSRefresh) {
			v.add(kp+".refresh", "must be between %s and %s (0 means %s)", MinJWKSRefresh, MaxJWKSRefresh, DefaultJWKSRefresh)
		}
	}
	if j.Issuer == "" {
		v.add(p+".issuer", "is required (the iss claim tokens must carry)")
	}
	var seenAud map[string]bool
	for i, a := range j.Audiences {
		if a == "" {
			v.add(fmt.Sprintf("%s.audiences[%d]", p, i), "is empty")
		} else if listedBefore(j.Audiences, i, &seenAud) {
			v.add(fmt.Sprintf("%s.audiences[%d]", p, i), "%q is listed twice", a)
		}
	}
	if len(j.Algorithms) == 0 {
		v.add(p+".algorithms", "is required (one or more of %s)", jwtAlgorithmList())
	}
	for i, a := range j.Algorithms {
		ap := fmt.Sprintf("%s.algorithms[%d]", p, i)
		switch {
		case strings.EqualFold(string(a), "none"):
			v.add(ap, "none is refused: an unsigned token proves nothing")
		case strings.HasPrefix(strings.ToUpper(string(a)), "HS"):
			v.add(ap, "%s is refused: HMAC algorithms need a shared secret, with which the gateway (or anyone who has it) could mint tokens; use %s", a, jwtAlgorithmList())
		case !slices.Contains(JWTAlgorithms, a):
			v.add(ap, "%q is not one of %s", a, jwtAlgorithmList())
		case slices.Contains(j.Algorithms[:i], a):
			v.add(ap, "%q is listed twice", a)
		}
	}
	if j.ClockSkew < 0 || j.ClockSkew.D() > MaxClockSkew {
		v.add(p+".clockSkew", "must be between 0 and %s", MaxClockSkew)
	}
}

// claims checks a claims match at p.
func (v validator) claims(p string, claims map[string]string) {
	for _, name := range slices.Sorted(maps.Keys(claims)) {
		if !ValidClaimPath(name) {
			v.add(joinKey(p, name), "%q is not a claim name (letters, digits, _, - and $, dotted for nested claims; at most %d bytes)", name, MaxClaimPath)
		}
	}
}

// identityLimit checks what this file adds to a limit: jwt: key parts
// against the identities that cover its routes, tiers, and the quota
// algorithm's calendar.
func (v validator) identityLimit(p string, l *Limit, rs *RuleSet) {
	if KeysOnJWT(l.Key) || len(l.Tiers) > 0 {
		what := "key parts jwt:"
		if !KeysOnJWT(l.Key) {
			what = "tiers"
		}
		v.coveredByIdentity(p, what, l.Routes, rs)
	}
	if len(l.Tiers) > 0 {
		switch l.Algorithm {
		case TokenBucket, SlidingWindow, FixedWindow, LeakyBucket, Quota:
		default:
			v.add(p+".tiers", "apply to token_bucket, sliding_window, fixed_window, leaky_bucket and quota, not %s", l.Algorithm)
		}
		if len(l.Variants) > 0 {
			v.add(p+".tiers", "a limit has tiers or variants, not both")
		}
	}
	if len(l.Tiers) > MaxTiers {
		v.add(p+".tiers", "has %d tiers; the limit is %d", len(l.Tiers), MaxTiers)
	}
	ids := map[string]bool{}
	for i := range l.Tiers {
		t := &l.Tiers[i]
		tp := fmt.Sprintf("%s.tiers[%d]", p, i)
		v.id(tp+".id", t.ID)
		if ids[t.ID] {
			v.add(tp+".id", "duplicate id %q", t.ID)
		}
		ids[t.ID] = true
		if t.Match == nil {
			if i != len(l.Tiers)-1 {
				v.add(tp+".match", "only the last tier may leave out match (it takes every caller the others do not; tiers after it would never apply)")
			}
		} else {
			if len(t.Match.Claims) == 0 {
				v.add(tp+".match.claims", "is required (leave out match for a default tier)")
			}
			v.claims(tp+".match.claims", t.Match.Claims)
		}
		if t.Rate == 0 && t.Burst == 0 && t.Period == 0 {
			v.add(tp, "set rate, burst or period (a tier without them is the limit itself)")
		}
		if t.Rate < 0 || t.Rate > 1_000_000_000 {
			v.add(tp+".rate", "must be between 1 and 1000000000 (0 keeps the limit's)")
		}
		if t.Burst < 0 || t.Burst > 1_000_000_000 {
			v.add(tp+".burst", "must be between 1 and 1000000000 (0 keeps the limit's)")
		} else if t.Burst != 0 && l.Algorithm != TokenBucket && l.Algorithm != LeakyBucket {
			v.add(tp+".burst", "applies only to token_bucket and leaky_bucket")
		}
		if t.Period != 0 {
			switch {
			case l.Algorithm == Quota && l.Calendar != "":
				v.add(tp+".period", "does not apply to a calendar quota")
			case t.Period.D() < time.Millisecond || t.Period.D() > periodCap(l.Algorithm):
				v.add(tp+".period", "must be between 1ms and %s (0 keeps the limit's)", shortDuration(periodCap(l.Algorithm)))
			}
		}
	}
	if l.Algorithm != Quota {
		if l.Calendar != "" {
			v.add(p+".calendar", "applies only to algorithm quota")
		}
		if l.Timezone != "" {
			v.add(p+".timezone", "applies only to algorithm quota")
		}
		return
	}
	if l.Scope != ScopeCluster {
		v.add(p+".scope", "a quota must be scope: cluster (its count lives in Redis, so that it survives restarts and is shared by every node)")
	}
	if l.Mode == ModeBatched {
		v.add(p+".mode", "a quota is exact; batched does not apply")
	}
	if l.Burst != 0 {
		v.add(p+".burst", "does not apply to a quota (rate is its capacity per period)")
	}
	if l.Calendar != "" {
		if !slices.Contains(Calendars, l.Calendar) {
			v.add(p+".calendar", "%q is not one of day, week, month", l.Calendar)
		}
		if l.Period != 0 {
			v.add(p+".period", "set calendar or period, not both")
		}
	} else if l.Period == 0 {
		v.add(p, "a quota needs calendar (day, week, month) or period")
	}
	if l.Timezone != "" {
		if l.Calendar == "" {
			v.add(p+".timezone", "applies only with calendar")
		} else if _, err := time.LoadLocation(l.Timezone); err != nil || l.Timezone == "Local" {
			v.add(p+".timezone", "%q is not an IANA time zone (such as UTC or Europe/Paris)", l.Timezone)
		}
	}
}

// QuotaWindow returns the calendar period of a quota (l normalized) that
// holds t: its start and end in l's timezone, DST-correct (a day is the
// span between two midnights, 23 or 25 hours across a change; a week
// starts on Monday; a month on its first day); or, for a quota with a
// fixed period, the period-long window aligned on the Unix epoch. ok is
// false for a limit that is not a quota or names an unknown timezone.
func (l *Limit) QuotaWindow(t time.Time) (start, end time.Time, ok bool) {
	if l.Algorithm != Quota {
		return time.Time{}, time.Time{}, false
	}
	if l.Calendar == "" {
		p := l.Period.D()
		if p <= 0 {
			return time.Time{}, time.Time{}, false
		}
		s := t.UnixNano() / int64(p) * int64(p)
		if t.UnixNano() < 0 && t.UnixNano()%int64(p) != 0 {
			s -= int64(p)
		}
		return time.Unix(0, s), time.Unix(0, s+int64(p)), true
	}
	loc, err := location(cmpOr(l.Timezone, "UTC"))
	if err != nil {
		return time.Time{}, time.Time{}, false
	}
	lt := t.In(loc)
	y, m, d := lt.Date()
	switch l.Calendar {
	case CalendarDay:
		return time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+1, 0, 0, 0, 0, loc), true
	case CalendarWeek:
		back := (int(lt.Weekday()) + 6) % 7 // days since Monday
		return time.Date(y, m, d-back, 0, 0, 0, 0, loc), time.Date(y, m, d-back+7, 0, 0, 0, 0, loc), true
	case CalendarMonth:
		return time.Date(y, m, 1, 0, 0, 0, 0, loc), time.Date(y, m+1, 1, 0, 0, 0, 0, loc), true
	}
	return time.Time{}, time.Time{}, false
}

// locations caches the time zones QuotaWindow loaded (name →
// *time.Location), so that a quota decision does not read the zone
// database (time.LoadLocation does, each call). Only zones that exist are
// kept: at most the database's few hundred.
var locations sync.Map

func location(name string) (*time.Location, error) {
	if l, ok := locations.Load(name); ok {
		return l.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err == nil {
		locations.Store(name, loc)
	}
	return loc, err
}

// NominalPeriod is a quota's period for what needs one length (the
// RateLimit-Policy window, the local fallback): its fixed period, or 24h,
// 7 days or 30 days for a calendar day, week or month. Other limits: their
// period.
func (l *Limit) NominalPeriod() time.Duration {
	switch l.Calendar {
	case CalendarDay:
		return 24 * time.Hour
	case CalendarWeek:
		return 7 * 24 * time.Hour
	case CalendarMonth:
		return 30 * 24 * time.Hour
	}
	return l.Period.D()
}

// periodCap is the longest period of a limit of algorithm a.
func periodCap(a Algorithm) time.Duration {
	if a == Quota {
		return MaxQuotaPeriod
	}
	return 24 * time.Hour
}

// coveredByIdentity checks that an identity covers every route of a rule
// whose key or tiers read claims (what names the feature): without one its
// claims are always missing.
func (v validator) coveredByIdentity(p, what string, ruleRoutes []string, rs *RuleSet) {
	if len(rs.Identities) == 0 {
		v.add(p, "%s read verified claims, but no identity is declared (add identities)", what)
		return
	}
	names := ruleRoutes
	if len(names) == 0 {
		for _, r := range rs.Routes {
			names = append(names, r.ID)
		}
	}
	for _, r := range names {
		if rs.IdentityFor(r) < 0 {
			v.add(p+".routes", "%s read verified claims, but no identity covers route %q", what, r)
			return
		}
	}
}

// identityWarnings flags limits whose key is made of jwt: parts only on a
// route whose identity lets callers without a token through (required:
// false): every such caller has the same ("missing") key, so they all share
// one bucket.
func identityWarnings(rs *RuleSet, add func(code, path, format string, args ...any)) {
	for _, l := range rs.Limits {
		if len(l.Key) == 0 || slices.ContainsFunc(l.Key, func(k string) bool { _, ok := JWTPart(k); return !ok }) {
			continue
		}
		names := l.Routes
		if len(names) == 0 {
			for _, r := range rs.Routes {
				names = append(names, r.ID)
			}
		}
		for _, r := range names {
			i := rs.IdentityFor(r)
			if i < 0 || rs.Identities[i].JWT == nil || rs.Identities[i].JWT.Required {
				continue
			}
			add(WarnAnonymousSharedBucket, "limits["+l.ID+"].key", "limit %s keys only on verified claims (%s), and identity %s lets callers without a token through on route %s: they all share one bucket; set required: true or add ip to the key", l.ID, strings.Join(l.Key, ", "), rs.Identities[i].ID, r)
			break
		}
	}
}
