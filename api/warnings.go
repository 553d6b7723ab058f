package api

import (
	"fmt"
	"maps"
	"net/netip"
	"net/textproto"
	"net/url"
	"regexp/syntax"
	"slices"
	"strings"
	"time"
)

// Warning is a risk in a rule change that a reviewer should see before
// approving it: rules that validate but are probably a mistake. Code is
// stable kebab-case; Path names the field by rule id
// ("limits[orders-per-ip].rate"), empty for the whole rule set.
type Warning struct {
	Code    string `json:"code"`
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
}

// The warning codes of Warnings.
const (
	WarnDegradeAllRoutesLevel2 = "degrade-level-2-all-routes" // manual level 2 sheds every route
	WarnDegradeManualLevel2    = "degrade-manual-level-2"     // a plan switched to manual level 2
	WarnBreakerMinRequestsLow  = "breaker-min-requests-low"   // trips on fewer than 5 requests
	WarnExemptEverything       = "exempt-everything"          // 0.0.0.0/0 or ::/0 exempt
	WarnRouteShadowed          = "route-shadowed"             // an earlier route takes all its requests
	WarnUpstreamLinkLocal      = "upstream-link-local"        // 169.254.0.0/16, fe80::/10
	WarnUpstreamMetadata       = "upstream-metadata"          // a cloud metadata endpoint
	WarnLimitTightened         = "limit-tightened"            // rate ÷ RateChangeFactor or more
	WarnLimitLoosened          = "limit-loosened"             // rate × RateChangeFactor or more
	WarnLimitRateZero          = "limit-rate-zero"            // rejects everything
	WarnLimitRemoved           = "limit-removed"
	WarnLimitShadowed          = "limit-shadowed" // switched to shadow: no longer rejects
	WarnRouteRemoved           = "route-removed"
	WarnClusterLimitAdded      = "cluster-limit-added"     // every node needs Redis
	WarnClassHeaderUntrusted   = "class-header-untrusted"  // a class chosen by a header the client sends
	WarnAnonymousSharedBucket  = "anonymous-shared-bucket" // callers without a token share one jwt-keyed bucket
	WarnQuotaLowered           = "quota-lowered"           // usage counted this period stays counted
	WarnSharedBucketMismatch   = "shared-bucket-mismatch"  // one bucket, other figures: apart budgets
)

// RateChangeFactor is the factor by which a limit's rate (per second)
// must shrink or grow for Warnings to flag it: 3, so 100 → 30 is flagged
// and 100 → 50 is not.
const RateChangeFactor = 3

// MinBreakerRequests is the smallest minRequests that Warnings does not
// flag: below it, a breaker judges ratios on a handful of calls.
const MinBreakerRequests = 5

// Warnings returns the warnings of the rules in new, given the rules they
// replace (old, nil when nothing is published): problems of new alone (a
// manual level 2 over every route, a breaker judging fewer than
// MinBreakerRequests requests, an exempt CIDR covering every address, a
// route that can never match, an upstream at a link-local or metadata
// address, a cluster limit, a class a client can choose by a header; a
// rate of zero, except on an adaptive limit, which has none) and risks of the change (a limit's rate divided
// or multiplied by RateChangeFactor or more, a limit or route removed, a limit switched to
// shadow, a quota's rate or a quota tier's rate lowered by any amount, a degrade plan switched to manual level 2). Both should have been normalized or at least
// validated; Warnings reads defaults where fields are zero. The result is
// never nil.
func Warnings(old, new *RuleSet) []Warning { return WarningsIn(old, new, WarnContext{}) }

// WarnContext is what WarningsIn knows beyond the two rule sets. The zero
// value knows nothing more (Warnings).
type WarnContext struct {
	// Now is when the change is judged: the quota windows usage counts in
	// are those holding it. Zero means time.Now().
	Now time.Time
	// Usage is what the nodes reported of the quotas' usage (one per quota,
	// tier and window, folded over nodes: the highest MaxUsed, the summed
	// OverHalf); nil when the caller has none.
	Usage []QuotaUsage
}

// WarningsIn is Warnings knowing c: a quota lowered below the usage the
// nodes reported in its current window is flagged with that usage, one
// lowered above it is not; a quota whose usage is unknown is flagged for
// any decrease.
func WarningsIn(old, new *RuleSet, c WarnContext) []Warning {
	if c.Now.IsZero() {
		c.Now = time.Now()
	}
	w := []Warning{}
	if new == nil {
		return w
	}
	if old == nil {
		old = &RuleSet{}
	}
	add := func(code, path, format string, args ...any) {
		w = append(w, Warning{Code: code, Path: path, Message: fmt.Sprintf(format, args...)})
	}

	// Routes: shadowed, removed, upstream addresses.
	for _, sh := range shadowedRoutes(new.Routes) {
		add(WarnRouteShadowed, "routes["+sh.route+"].match", "route %s can never match: route %s %s", sh.route, sh.by, sh.why)
	}
	for _, r := range new.Routes {
		for i, t := range r.Upstream.Targets {
			p := fmt.Sprintf("routes[%s].upstream.targets[%d].url", r.ID, i)
			switch kind := upstreamAddressKind(t.URL); kind {
			case WarnUpstreamMetadata:
				add(kind, p, "route %s forwards to %s, a cloud metadata endpoint: clients could read the host's credentials through the gateway", r.ID, RedactURL(t.URL))
			case WarnUpstreamLinkLocal:
				add(kind, p, "route %s forwards to %s, a link-local address: it reaches the gateway host's own network segment (metadata services live there)", r.ID, RedactURL(t.URL))
			}
		}
	}
	newRoutes := map[string]bool{}
	for _, r := range new.Routes {
		newRoutes[r.ID] = true
	}
	for _, r := range old.Routes {
		if !newRoutes[r.ID] {
			add(WarnRouteRemoved, "routes["+r.ID+"]", "route %s is removed: its requests go to another route, or get 404", r.ID)
		}
	}

	// Limits.
	oldLimits := map[string]*Limit{}
	for i := range old.Limits {
		oldLimits[old.Limits[i].ID] = &old.Limits[i]
	}
	newLimits := map[string]bool{}
	for i := range new.Limits {
		l := &new.Limits[i]
		newLimits[l.ID] = true
		p := "limits[" + l.ID + "]"
		if l.Rate <= 0 && l.Algorithm != Adaptive { // an adaptive limit has no rate: it follows latency
			add(WarnLimitRateZero, p+".rate", "limit %s has a rate of %d: it rejects every request it applies to", l.ID, l.Rate)
		}
		for j, e := range l.Exempt {
			if pfx, err := ParsePrefix(e); err == nil && pfx.Bits() == 0 {
				add(WarnExemptEverything, fmt.Sprintf("%s.exempt[%d]", p, j), "limit %s exempts %s, every %s client: it limits nobody who uses that address family", l.ID, e, family(pfx.Addr()))
			}
		}
		o := oldLimits[l.ID]
		if l.Shadow && o != nil && !o.Shadow {
			add(WarnLimitShadowed, p+".shadow", "limit %s is switched to shadow: it still counts and logs, but no longer rejects anything", l.ID)
		}
		if l.Scope == ScopeCluster && (o == nil || o.Scope != ScopeCluster) {
			add(WarnClusterLimitAdded, p+".scope", "limit %s is scope: cluster: a node without Redis (--redis or --redis-cluster) refuses this whole version and keeps its old rules", l.ID)
		}
		if o != nil && o.Algorithm == Quota && l.Algorithm == Quota {
			quotaLowered(o, l, c, add)
		}
		if o == nil || o.Rate <= 0 || l.Rate <= 0 || (o.Algorithm == Concurrency) != (l.Algorithm == Concurrency) {
			continue
		}
		before, after := perSecond(o), perSecond(l)
		switch {
		case after*RateChangeFactor <= before:
			add(WarnLimitTightened, p+".rate", "limit %s: %s → %s, %s tighter", l.ID, describeRate(o), describeRate(l), factor(before/after))
		case after >= before*RateChangeFactor:
			add(WarnLimitLoosened, p+".rate", "limit %s: %s → %s, %s looser", l.ID, describeRate(o), describeRate(l), factor(after/before))
		}
	}
	sharedBucketWarnings(new, add)
	for _, l := range old.Limits {
		if !newLimits[l.ID] {
			add(WarnLimitRemoved, "limits["+l.ID+"]", "limit %s (%s) is removed: its routes are no longer limited by it", l.ID, describeRate(&l))
		}
	}

	// Breakers.
	for _, b := range new.Breakers {
		n := b.MinRequests
		if n == 0 {
			n = DefaultBreakerMinRequests
		}
		if n < MinBreakerRequests {
			add(WarnBreakerMinRequestsLow, "breakers["+b.ID+"].minRequests", "breaker %s judges its ratios on as few as %d requests in a window: a couple of slow or failed calls open it", b.ID, n)
		}
	}

	// Classes chosen by what the client says.
	classWarnings(new, add)
	identityWarnings(new, add)

	// Degrades.
	oldDegrades := map[string]*Degrade{}
	for i := range old.Degrades {
		oldDegrades[old.Degrades[i].ID] = &old.Degrades[i]
	}
	shed := map[string]bool{}
	var level2 []string
	for _, d := range new.Degrades {
		if d.Mode != DegradeManual || d.Level != 2 {
			continue
		}
		level2 = append(level2, d.ID)
		routes := d.Routes
		if len(routes) == 0 {
			for _, r := range new.Routes {
				routes = append(routes, r.ID)
			}
		}
		for _, r := range routes {
			shed[r] = true
		}
		if o := oldDegrades[d.ID]; o == nil || o.Mode != DegradeManual || o.Level != 2 {
			add(WarnDegradeManualLevel2, "degrades["+d.ID+"].level", "degrade %s is set to manual level 2: every request to %s is shed with the fallback until someone sets it back", d.ID, routeList(d.Routes))
		}
	}
	if len(new.Routes) > 0 && len(shed) == len(new.Routes) {
		add(WarnDegradeAllRoutesLevel2, "degrades["+level2[0]+"].level", "manual level 2 (%s) covers every route: the gateway sheds all traffic", strings.Join(level2, ", "))
	}
	return w
}

// BucketFigures is what must agree for limits naming one shared bucket
// (Limit.Bucket) to spend one budget: the algorithm, the rate, the period
// (DefaultPeriod when unset) and the burst (the rate when unset, and always
// for the window algorithms) — the figures a cluster limiter writes into
// the bucket's Redis key (dataplane/limit/redis), so that limits naming it
// with other figures keep apart budgets.
type BucketFigures struct {
	Algorithm Algorithm
	Rate      int64
	Period    time.Duration
	Burst     int64
}

// BucketFiguresOf returns l's BucketFigures.
func BucketFiguresOf(l *Limit) BucketFigures {
	f := BucketFigures{Algorithm: l.Algorithm, Rate: l.Rate, Period: l.Period.D(), Burst: l.Burst}
	if f.Algorithm == "" {
		f.Algorithm = TokenBucket
	}
	if f.Period <= 0 {
		f.Period = DefaultPeriod
	}
	if f.Burst <= 0 || f.Algorithm == FixedWindow || f.Algorithm == SlidingWindow {
		f.Burst = f.Rate
	}
	return f
}

// String writes f as a rule would: "token_bucket 300 per 1s, burst 300".
func (f BucketFigures) String() string {
	return fmt.Sprintf("%s %d per %s, burst %d", f.Algorithm, f.Rate, shortDuration(f.Period), f.Burst)
}

// sharedBucketWarnings flags each cluster limit of rs that names a bucket an
// earlier limit of rs names with other figures: the two keep apart budgets,
// so the bucket is not the one budget it reads as.
func sharedBucketWarnings(rs *RuleSet, add func(code, path, format string, args ...any)) {
	first := map[string]*Limit{}
	for i := range rs.Limits {
		l := &rs.Limits[i]
		if l.Bucket == "" || l.Scope != ScopeCluster {
			continue
		}
		f := first[l.Bucket]
		if f == nil {
			first[l.Bucket] = l
			continue
		}
		if a, b := BucketFiguresOf(f), BucketFiguresOf(l); a != b {
			add(WarnSharedBucketMismatch, "limits["+l.ID+"].bucket", "limits %s (%s) and %s (%s) both name bucket %s with other figures: they keep apart budgets, not one shared one; give them the same algorithm, rate, period and burst", f.ID, a, l.ID, b, l.Bucket)
		}
	}
}

// SharedBucketWarnings flags each cluster limit of rs (namespace ns) that
// names a bucket which a limit of another namespace's rules (others, by
// namespace; the published ones) names with other figures, as Warnings
// does within one rule set. Namespaces are taken in order, and each
// bucket's first disagreeing limit is named.
func SharedBucketWarnings(ns string, rs *RuleSet, others map[string]*RuleSet) []Warning {
	w := []Warning{}
	if rs == nil {
		return w
	}
	for i := range rs.Limits {
		l := &rs.Limits[i]
		if l.Bucket == "" || l.Scope != ScopeCluster {
			continue
		}
		mine := BucketFiguresOf(l)
	namespaces:
		for _, other := range slices.Sorted(maps.Keys(others)) {
			if other == ns || others[other] == nil {
				continue
			}
			for j := range others[other].Limits {
				o := &others[other].Limits[j]
				if o.Bucket != l.Bucket || o.Scope != ScopeCluster {
					continue
				}
				if f := BucketFiguresOf(o); f != mine {
					w = append(w, Warning{Code: WarnSharedBucketMismatch, Path: "limits[" + l.ID + "].bucket",
						Message: fmt.Sprintf("limit %s (%s) names bucket %s, which limit %s of namespace %s names with other figures (%s): they keep apart budgets, not one shared one; give them the same algorithm, rate, period and burst", l.ID, mine, l.Bucket, o.ID, other, f)})
					break namespaces
				}
			}
		}
	}
	return w
}

// quotaLowered flags a quota whose rate, or one of whose tiers' rate,
// goes down. The used count lives in Redis under a key without the rate, so
// what was counted this window stays counted. When c has the usage of the
// window that holds c.Now for both rules (the same Redis keys), the warning
// says how far the heaviest caller already is, and a decrease that stays
// above it is not flagged; without usage, every decrease is flagged, more
// softly.
func quotaLowered(o, l *Limit, c WarnContext, add func(code, path, format string, args ...any)) {
	p := "limits[" + l.ID + "]"
	one := func(path, tier string, before, after *Limit) {
		if after.Rate <= 0 || after.Rate >= before.Rate {
			return
		}
		name := "quota " + l.ID
		if tier != "" {
			name += ", tier " + tier + ","
		}
		u, end, known := quotaUsageAt(before, after, tier, c)
		if !known {
			add(WarnQuotaLowered, path, "%s is lowered from %d to %d per %s: usage already counted this period stays counted, so callers may already be over the new quota and are refused until the period ends", name, before.Rate, after.Rate, quotaPeriod(after))
			return
		}
		if u.MaxUsed <= after.Rate {
			return
		}
		msg := fmt.Sprintf("%s lowered to %d; %s heaviest caller has already used %d: callers above %d are refused until %s", name, after.Rate, quotaCurrent(after), u.MaxUsed, after.Rate, end)
		if u.OverHalf > 0 {
			who := "callers"
			if u.OverHalf == 1 {
				who = "caller"
			}
			msg += fmt.Sprintf(" (%d %s had used over half of the old quota of %d)", u.OverHalf, who, before.Rate)
		}
		add(WarnQuotaLowered, path, "%s", msg)
	}
	one(p+".rate", "", o, l)
	oldTiers := map[string]Tier{}
	for _, t := range o.Tiers {
		oldTiers[t.ID] = t
	}
	for _, t := range l.Tiers {
		ot, ok := oldTiers[t.ID]
		if !ok {
			continue
		}
		before, after := o.WithTier(ot), l.WithTier(t)
		one(p+".tiers["+t.ID+"].rate", t.ID, &before, &after)
	}
}

// quotaUsageAt returns c's usage of quota before (tier tier) in the window
// holding c.Now, and that window's end in the quota's time zone, when the
// usage is known and after counts in the same window (so in the same Redis
// keys).
func quotaUsageAt(before, after *Limit, tier string, c WarnContext) (QuotaUsage, string, bool) {
	start, end, ok := before.QuotaWindow(c.Now)
	if !ok {
		return QuotaUsage{}, "", false
	}
	if s2, _, ok := after.QuotaWindow(c.Now); !ok || !s2.Equal(start) {
		return QuotaUsage{}, "", false
	}
	if before.Calendar == "" {
		end = end.UTC() // a fixed period is aligned on the Unix epoch
	}
	for _, u := range c.Usage {
		if u.Rule == before.ID && u.Tier == tier && u.WindowStart.Equal(start) {
			return u, end.Format("2006-01-02 15:04 MST"), true
		}
	}
	return QuotaUsage{}, "", false
}

// quotaCurrent names a quota's current window as a possessive: today's,
// this week's, this month's, this period's.
func quotaCurrent(l *Limit) string {
	switch l.Calendar {
	case CalendarDay:
		return "today's"
	case CalendarWeek:
		return "this week's"
	case CalendarMonth:
		return "this month's"
	}
	return "this period's"
}

// quotaPeriod names a quota's period: its calendar or its fixed period.
func quotaPeriod(l *Limit) string {
	if l.Calendar != "" {
		return string(l.Calendar)
	}
	return shortDuration(l.Period.D())
}

// classWarnings flags the classes a client can put itself in by what it
// sends: a class that matches headers (honoured only from --trusted-proxies;
// a direct client's request is in the default class), and a class limited
// to routes that clients choose by a header (route header matches are
// honoured from anyone).
func classWarnings(rs *RuleSet, add func(code, path, format string, args ...any)) {
	var byHeader map[string][]string // route id → its match's header names
	for _, r := range rs.Routes {
		if len(r.Match.Headers) > 0 {
			if byHeader == nil {
				byHeader = map[string][]string{}
			}
			byHeader[r.ID] = slices.Sorted(maps.Keys(r.Match.Headers))
		}
	}
	for _, c := range rs.Classes {
		p := "classes[" + c.ID + "].match"
		if len(c.Match.Headers) > 0 {
			add(WarnClassHeaderUntrusted, p+".headers", "class %s matches the header(s) %s, which any client can send: it applies only to requests whose connection comes from --trusted-proxies (a proxy that sets or strips them); from any other peer the request is in the default class", c.ID, strings.Join(slices.Sorted(maps.Keys(c.Match.Headers)), ", "))
		}
		if len(c.Match.Routes) == 0 {
			continue
		}
		chosen := true
		for _, r := range c.Match.Routes {
			if byHeader[r] == nil {
				chosen = false
				break
			}
		}
		if chosen {
			var hs []string
			for _, r := range c.Match.Routes {
				hs = append(hs, r+" ("+strings.Join(byHeader[r], ", ")+")")
			}
			add(WarnClassHeaderUntrusted, p+".routes", "class %s applies only on routes that clients choose by a header: %s; any client that sends it is in the class, trusted proxy or not", c.ID, strings.Join(hs, ", "))
		}
	}
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

func routeList(routes []string) string {
	if len(routes) == 0 {
		return "every route"
	}
	return "route " + strings.Join(routes, ", ")
}

// perSecond is a limit's rate per second, or its concurrency.
func perSecond(l *Limit) float64 {
	if l.Algorithm == Concurrency {
		return float64(l.Rate)
	}
	p := l.NominalPeriod() // a calendar quota's day, week or month
	if p <= 0 {
		p = DefaultPeriod
	}
	return float64(l.Rate) / p.Seconds()
}

func describeRate(l *Limit) string {
	if l.Algorithm == Concurrency {
		return fmt.Sprintf("%d in flight", l.Rate)
	}
	if l.Calendar != "" {
		return fmt.Sprintf("%d per %s (%s)", l.Rate, l.Calendar, cmpOr(l.Timezone, "UTC"))
	}
	p := l.Period.D()
	if p <= 0 {
		p = DefaultPeriod
	}
	return fmt.Sprintf("%d per %s", l.Rate, shortDuration(p))
}

// shortDuration writes 1m rather than 1m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func factor(f float64) string {
	if f == float64(int64(f)) {
		return fmt.Sprintf("%d×", int64(f))
	}
	return fmt.Sprintf("%.1f×", f)
}

var (
	linkLocal4 = netip.MustParsePrefix("169.254.0.0/16")
	linkLocal6 = netip.MustParsePrefix("fe80::/10")
	metadata   = []netip.Addr{netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("fd00:ec2::254"), netip.MustParseAddr("169.254.170.2")}
	// Host names of metadata services (GCP's resolves to 169.254.169.254).
	metadataNames = []string{"metadata.google.internal", "metadata.goog", "instance-data.ec2.internal"}
)

// upstreamAddressKind says whether a target URL names a metadata endpoint
// (WarnUpstreamMetadata), another link-local address
// (WarnUpstreamLinkLocal), or neither (""). Host names other than the known
// metadata names are not resolved.
func upstreamAddressKind(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if slices.Contains(metadataNames, host) {
		return WarnUpstreamMetadata
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return ""
	}
	a = a.Unmap().WithZone("")
	switch {
	case slices.Contains(metadata, a):
		return WarnUpstreamMetadata
	case linkLocal4.Contains(a), linkLocal6.Contains(a):
		return WarnUpstreamLinkLocal
	}
	return ""
}

// ---- shadowed routes ----

// The router's precedence (docs/rules.md "Route precedence", dataplane/proxy):
// tiers exact path, then path prefix (longest first, segment-aware), then
// path regex, then catch-all (pathPrefix "/" or no path). Within one key of
// a tier, entries are tried in order: exact host before *.wildcard (longer
// suffix first) before any host, then more method/header conditions (the
// methods count once, each header once), then document order. A route with
// several hosts is one entry per host.

type routeEntry struct {
	route   string
	order   int
	host    hostMatch
	methods []string          // nil: any
	headers map[string]string // canonical name → value
	nconstr int
	tier    int // 0 exact, 1 prefix, 2 regex, 3 catch-all
	key     string
	// For regex entries: lit is the literal every matched path starts
	// with (anchored), whole reports that the regex matches lit alone.
	lit   string
	whole bool
}

type hostMatch struct {
	kind int // 0 any, 1 wildcard, 2 exact
	name string
	port string
}

func routeEntries(i int, r *Route) []routeEntry {
	m := &r.Match
	base := routeEntry{route: r.ID, order: i}
	if len(m.Methods) > 0 {
		base.methods = m.Methods
		base.nconstr++
	}
	if len(m.Headers) > 0 {
		base.headers = map[string]string{}
		for k, v := range m.Headers {
			base.headers[textproto.CanonicalMIMEHeaderKey(k)] = v
			base.nconstr++
		}
	}
	switch {
	case m.Path != "":
		base.tier, base.key = 0, m.Path
	case m.PathPrefix != "" && m.PathPrefix != "/":
		base.tier, base.key = 1, m.PathPrefix
	case m.PathRegex != "":
		base.tier, base.key = 2, m.PathRegex
		base.lit, base.whole = regexLiteral(m.PathRegex)
	default:
		base.tier = 3
	}
	hosts := []hostMatch{{}}
	if len(m.Hosts) > 0 {
		hosts = hosts[:0]
		for _, h := range m.Hosts {
			h = strings.ToLower(h)
			var hm hostMatch
			if name, port, ok := strings.Cut(h, ":"); ok {
				h, hm.port = name, port
			}
			if suffix, ok := strings.CutPrefix(h, "*"); ok {
				hm.kind, hm.name = 1, suffix
			} else {
				hm.kind, hm.name = 2, h
			}
			hosts = append(hosts, hm)
		}
	}
	out := make([]routeEntry, len(hosts))
	for j, h := range hosts {
		out[j] = base
		out[j].host = h
	}
	return out
}

// regexLiteral returns the literal that every match of an anchored regex
// starts with, and whether the regex matches exactly that literal.
func regexLiteral(expr string) (string, bool) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return "", false
	}
	re = re.Simplify()
	if re.Op != syntax.OpConcat || len(re.Sub) == 0 || re.Sub[0].Op != syntax.OpBeginText {
		return "", false
	}
	var b strings.Builder
	subs := re.Sub[1:]
	for len(subs) > 0 && subs[0].Op == syntax.OpLiteral && subs[0].Flags&syntax.FoldCase == 0 {
		b.WriteString(string(subs[0].Rune))
		subs = subs[1:]
	}
	whole := len(subs) == 1 && subs[0].Op == syntax.OpEndText
	return b.String(), whole
}

// precedes reports whether the router tries a before b within one key.
func (a *routeEntry) precedes(b *routeEntry) bool {
	if a.host.kind != b.host.kind {
		return a.host.kind > b.host.kind
	}
	if len(a.host.name) != len(b.host.name) {
		return len(a.host.name) > len(b.host.name)
	}
	if a.nconstr != b.nconstr {
		return a.nconstr > b.nconstr
	}
	return a.order < b.order
}

// covers reports whether every request that b's host, method and header
// conditions admit is admitted by a's.
func (a *routeEntry) covers(b *routeEntry) bool {
	if a.host.port != "" && a.host.port != b.host.port {
		return false
	}
	switch a.host.kind {
	case 2:
		if b.host.kind != 2 || b.host.name != a.host.name {
			return false
		}
	case 1:
		if b.host.kind == 0 || !strings.HasSuffix(b.host.name, a.host.name) || (b.host.kind == 2 && len(b.host.name) <= len(a.host.name)) {
			return false
		}
	}
	if a.methods != nil {
		if b.methods == nil {
			return false
		}
		for _, m := range effectiveMethods(b.methods) {
			if !slices.Contains(effectiveMethods(a.methods), m) {
				return false
			}
		}
	}
	for k, v := range a.headers {
		if bv, ok := b.headers[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// effectiveMethods is what a route's methods admit: a route that lists GET
// takes HEAD too (as the router does).
func effectiveMethods(ms []string) []string {
	if slices.Contains(ms, "GET") && !slices.Contains(ms, "HEAD") {
		return append(slices.Clip(ms), "HEAD")
	}
	return ms
}

// prefixCovers reports whether prefix p matches every path that starts
// with lit (segment-aware: /api matches /api and /api/..., not /apix).
func prefixCovers(p, lit string) bool {
	if !strings.HasPrefix(lit, p) {
		return false
	}
	return strings.HasSuffix(p, "/") || (len(lit) > len(p) && lit[len(p)] == '/')
}

// prefixMatches reports whether prefix p matches the path path.
func prefixMatches(p, path string) bool {
	return path == p || prefixCovers(p, path)
}

type shadow struct{ route, by, why string }

// shadowedRoutes lists the routes every one of whose entries is taken by
// another route first, with the first route found to take them. Candidates
// come from indexes, so that the cost grows with the number of routes, not
// its square: within one key of a tier, an entry that is tried first and
// admits everything another admits has the same host pattern (a more
// specific host is tried first but admits less); across tiers, a regex can
// only lose to the prefixes along its literal or to its one exact path.
func shadowedRoutes(routes []Route) []shadow {
	type groupKey struct {
		tier     int
		key      string
		hostKind int
		hostName string
	}
	all := make([][]routeEntry, len(routes))
	groups := map[groupKey][]*routeEntry{}
	byPath := [2]map[string][]*routeEntry{{}, {}} // exact, prefix
	for i := range routes {
		all[i] = routeEntries(i, &routes[i])
		for k := range all[i] {
			e := &all[i][k]
			g := groupKey{e.tier, e.key, e.host.kind, e.host.name}
			groups[g] = append(groups[g], e)
			if e.tier <= 1 {
				byPath[e.tier][e.key] = append(byPath[e.tier][e.key], e)
			}
		}
	}
	find := func(b *routeEntry) (*routeEntry, string) {
		for _, a := range groups[groupKey{b.tier, b.key, b.host.kind, b.host.name}] {
			if a.route != b.route {
				if w, ok := shadows(a, b); ok {
					return a, w
				}
			}
		}
		if b.tier != 2 || b.lit == "" {
			return nil, ""
		}
		var cands []*routeEntry
		for i := 1; i < len(b.lit); i++ {
			if b.lit[i] == '/' {
				cands = append(cands, byPath[1][b.lit[:i]]...)
				cands = append(cands, byPath[1][b.lit[:i+1]]...)
			}
		}
		if b.whole {
			cands = append(cands, byPath[1][b.lit]...)
			cands = append(cands, byPath[0][b.lit]...)
		}
		for _, a := range cands {
			if w, ok := shadows(a, b); ok {
				return a, w
			}
		}
		return nil, ""
	}
	var out []shadow
	for i, es := range all {
		by, why := "", ""
		for k := range es {
			a, w := find(&es[k])
			if a == nil {
				by = ""
				break
			}
			if by == "" {
				by, why = a.route, w
			}
		}
		if by != "" {
			out = append(out, shadow{route: routes[i].ID, by: by, why: why})
		}
	}
	return out
}

// shadows reports whether the router sends every request that entry b
// admits to entry a (or to a route at least as specific as a), and why.
func shadows(a, b *routeEntry) (string, bool) {
	if !a.covers(b) {
		return "", false
	}
	switch {
	case a.tier == b.tier && a.key == b.key:
		if !a.precedes(b) {
			return "", false
		}
		return "matches the same requests and comes first (more specific host, more conditions, or earlier in the document)", true
	case b.tier == 2 && b.lit != "" && a.tier == 1 && prefixCovers(a.key, b.lit):
		return fmt.Sprintf("(pathPrefix %s) takes every path the regex can match, and prefixes come before regexes", a.key), true
	case b.tier == 2 && b.whole && a.tier == 0 && a.key == b.lit:
		return fmt.Sprintf("(path %s) is the only path the regex matches, and exact paths come before regexes", a.key), true
	case b.tier == 2 && b.whole && a.tier == 1 && prefixMatches(a.key, b.lit):
		return fmt.Sprintf("(pathPrefix %s) takes the only path the regex matches, and prefixes come before regexes", a.key), true
	}
	return "", false
}
