package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestValidateIdentity checks every rule Validate adds for identities,
// jwt: key parts, tiers, quotas and classes by claims, each on
// testdata/identity.yaml with one thing wrong, by path and message.
func TestValidateIdentity(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc   string
		mutate func(rs *RuleSet)
		msg    string
		paths  []string
	}{
		{"alg none", func(rs *RuleSet) { rs.Identities[0].JWT.Algorithms = []JWTAlgorithm{"none"} }, "none is refused", []string{"identities[0].jwt.algorithms[0]"}},
		{"alg HS256", func(rs *RuleSet) { rs.Identities[0].JWT.Algorithms = append(rs.Identities[0].JWT.Algorithms, "HS256") }, "HMAC algorithms need a shared secret", []string{"identities[0].jwt.algorithms[3]"}},
		{"alg hs512 lower case", func(rs *RuleSet) { rs.Identities[0].JWT.Algorithms = []JWTAlgorithm{"hs512"} }, "is refused", []string{"identities[0].jwt.algorithms[0]"}},
		{"alg unknown", func(rs *RuleSet) { rs.Identities[0].JWT.Algorithms = []JWTAlgorithm{"ES512"} }, "is not one of RS256", []string{"identities[0].jwt.algorithms[0]"}},
		{"alg twice", func(rs *RuleSet) { rs.Identities[0].JWT.Algorithms = []JWTAlgorithm{"RS256", "RS256"} }, "listed twice", []string{"identities[0].jwt.algorithms[1]"}},
		{"no algorithms", func(rs *RuleSet) { rs.Identities[0].JWT.Algorithms = nil }, "is required", []string{"identities[0].jwt.algorithms"}},
		{"no issuer", func(rs *RuleSet) { rs.Identities[0].JWT.Issuer = "" }, "is required", []string{"identities[0].jwt.issuer"}},
		{"no jwt", func(rs *RuleSet) { rs.Identities[1].JWT = nil }, "is required", []string{"identities[1].jwt"}},
		{"jwks file and url", func(rs *RuleSet) { rs.Identities[0].JWT.JWKS.File = "/x" }, "exactly one of file and url", []string{"identities[0].jwt.jwks"}},
		{"jwks neither", func(rs *RuleSet) { rs.Identities[1].JWT.JWKS.File = "" }, "exactly one of file and url", []string{"identities[1].jwt.jwks"}},
		{"jwks file relative", func(rs *RuleSet) { rs.Identities[1].JWT.JWKS.File = "jwks.json" }, "absolute path", []string{"identities[1].jwt.jwks.file"}},
		{"jwks url ftp", func(rs *RuleSet) { rs.Identities[0].JWT.JWKS.URL = "ftp://idp/jwks" }, "http or https URL", []string{"identities[0].jwt.jwks.url"}},
		{"jwks url credentials", func(rs *RuleSet) { rs.Identities[0].JWT.JWKS.URL = "https://u:secret@idp/jwks" }, "must not carry credentials", []string{"identities[0].jwt.jwks.url"}},
		{"jwks refresh too short", func(rs *RuleSet) { rs.Identities[0].JWT.JWKS.Refresh = Duration(time.Millisecond) }, "between 1s and 24h", []string{"identities[0].jwt.jwks.refresh"}},
		{"jwks refresh with file", func(rs *RuleSet) { rs.Identities[1].JWT.JWKS.Refresh = Duration(time.Minute) }, "applies only to url", []string{"identities[1].jwt.jwks.refresh"}},
		{"from header and cookie", func(rs *RuleSet) { rs.Identities[0].JWT.From.Cookie = "s" }, "exactly one of header and cookie", []string{"identities[0].jwt.from"}},
		{"from scheme without header", func(rs *RuleSet) { rs.Identities[1].JWT.From.Scheme = "Bearer" }, "applies only with header", []string{"identities[1].jwt.from.scheme"}},
		{"from bad header", func(rs *RuleSet) { rs.Identities[0].JWT.From.Header = "X Token" }, "not a valid header name", []string{"identities[0].jwt.from.header"}},
		{"clock skew too large", func(rs *RuleSet) { rs.Identities[0].JWT.ClockSkew = Duration(time.Hour) }, "between 0 and 5m", []string{"identities[0].jwt.clockSkew"}},
		{"audience empty", func(rs *RuleSet) { rs.Identities[0].JWT.Audiences = []string{""} }, "is empty", []string{"identities[0].jwt.audiences[0]"}},
		{"identity duplicate id", func(rs *RuleSet) { rs.Identities[1].ID = "users" }, "duplicate id", []string{"identities[1].id"}},
		{"identities share a route", func(rs *RuleSet) { rs.Identities[1].Routes = []string{"orders", "reports"} }, "already covered by identities[0]", []string{"identities[1].routes"}},
		{"identity unknown route", func(rs *RuleSet) { rs.Identities[1].Routes = []string{"nope"} }, "does not exist",
			[]string{"identities[1].routes[0]", "limits[2].routes"}},
		{"jwt key without identities", func(rs *RuleSet) { rs.Identities = nil }, "no identity is declared",
			[]string{"limits[0]", "limits[1]", "limits[2]"}},
		{"jwt key on an uncovered route", func(rs *RuleSet) {
			rs.Limits[0].Routes = nil
			rs.Identities[1].Routes = []string{"orders"}
			rs.Identities[0].Routes = []string{"reports"}
			rs.Identities = rs.Identities[:1]
		},
			"no identity covers route \"orders\"", []string{"limits[0].routes", "limits[1].routes"}},
		{"jwt key bad claim", func(rs *RuleSet) { rs.Limits[0].Key = []string{"jwt:org..id"} }, "is not a claim name", []string{"limits[0].key[0]"}},
		{"jwt key empty claim", func(rs *RuleSet) { rs.Limits[0].Key = []string{"jwt:"} }, "is not a claim name", []string{"limits[0].key[0]"}},
		{"jwt key claim too long", func(rs *RuleSet) { rs.Limits[0].Key = []string{"jwt:" + strings.Repeat("a", 129)} }, "at most 128 bytes", []string{"limits[0].key[0]"}},
		{"tier default not last", func(rs *RuleSet) { ts := rs.Limits[0].Tiers; ts[1], ts[2] = ts[2], ts[1] }, "only the last tier may leave out match", []string{"limits[0].tiers[1].match"}},
		{"tier without settings", func(rs *RuleSet) { rs.Limits[0].Tiers[1].Period = 0 }, "set rate, burst or period", []string{"limits[0].tiers[1]"}},
		{"tier duplicate id", func(rs *RuleSet) { rs.Limits[0].Tiers[1].ID = "pro" }, "duplicate id", []string{"limits[0].tiers[1].id"}},
		{"tier empty claims", func(rs *RuleSet) { rs.Limits[0].Tiers[0].Match.Claims = nil }, "is required", []string{"limits[0].tiers[0].match.claims"}},
		{"tier bad claim", func(rs *RuleSet) { rs.Limits[0].Tiers[0].Match.Claims = map[string]string{"a b": "x"} }, "not a claim name", []string{"limits[0].tiers[0].match.claims.a b"}},
		{"tier burst on sliding window", func(rs *RuleSet) {
			rs.Limits[0].Algorithm = SlidingWindow
			rs.Limits[0].Tiers[1].Period = 0
			rs.Limits[0].Tiers[1].Burst = 0
			rs.Limits[0].Tiers[0].Burst = 0
			rs.Limits[0].Tiers[1].Rate = 5
			rs.Limits[0].Tiers[2].Burst = 3
		},
			"applies only to token_bucket and leaky_bucket", []string{"limits[0].tiers[2].burst"}},
		{"tiers on concurrency", func(rs *RuleSet) { rs.Limits[0].Algorithm = Concurrency; rs.Limits[0].Period = 0 }, "not concurrency", []string{"limits[0].tiers", "limits[0].tiers[0].burst"}},
		{"tiers and variants", func(rs *RuleSet) { rs.Limits[0].Variants = []LimitVariant{{ID: "v", Weight: 10, Rate: 5}} }, "tiers or variants, not both", []string{"limits[0].tiers"}},
		{"tier period on calendar quota", func(rs *RuleSet) { rs.Limits[1].Tiers[0].Period = Duration(time.Hour) }, "does not apply to a calendar quota", []string{"limits[1].tiers[0].period"}},
		{"quota node scope", func(rs *RuleSet) { rs.Limits[1].Scope = ScopeNode }, "must be scope: cluster", []string{"limits[1].scope"}},
		{"quota batched", func(rs *RuleSet) { rs.Limits[1].Mode = ModeBatched }, "batched does not apply", []string{"limits[1].mode"}},
		{"quota burst", func(rs *RuleSet) { rs.Limits[1].Burst = 5 }, "does not apply to a quota", []string{"limits[1].burst"}},
		{"quota calendar and period", func(rs *RuleSet) { rs.Limits[1].Period = Duration(time.Hour) }, "calendar or period, not both", []string{"limits[1].period"}},
		{"quota neither", func(rs *RuleSet) { rs.Limits[1].Calendar, rs.Limits[1].Timezone = "", "" }, "needs calendar", []string{"limits[1]"}},
		{"quota calendar year", func(rs *RuleSet) { rs.Limits[1].Calendar = "year" }, "not one of day, week, month", []string{"limits[1].calendar"}},
		{"quota timezone unknown", func(rs *RuleSet) { rs.Limits[1].Timezone = "Mars/Olympus" }, "not an IANA time zone", []string{"limits[1].timezone"}},
		{"quota timezone Local", func(rs *RuleSet) { rs.Limits[1].Timezone = "Local" }, "not an IANA time zone", []string{"limits[1].timezone"}},
		{"quota timezone without calendar", func(rs *RuleSet) { rs.Limits[2].Timezone = "UTC" }, "applies only with calendar", []string{"limits[2].timezone"}},
		{"quota period above 366 days", func(rs *RuleSet) { rs.Limits[2].Period = Duration(400 * 24 * time.Hour) }, "at most 8784h", []string{"limits[2].period"}},
		{"calendar on token bucket", func(rs *RuleSet) { rs.Limits[0].Calendar = CalendarDay }, "applies only to algorithm quota", []string{"limits[0].calendar"}},
		{"quota scope check names quota", func(rs *RuleSet) { rs.Limits[0].Scope = ScopeCluster; rs.Limits[0].Algorithm = LeakyBucket }, "token_bucket, sliding_window, fixed_window and quota", []string{"limits[0].scope"}},
		{"class claims bad name", func(rs *RuleSet) { rs.Classes[0].Match.Claims = map[string]string{"": "x"} }, "not a claim name", []string{"classes[0].match.claims."}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			rs := MustValid(t, "identity.yaml")
			tt.mutate(rs)
			wantErrors(t, rs.Validate(), tt.msg, tt.paths...)
		})
	}
}

// TestIdentityCanonical checks the canonical form of what issue 28 added:
// the same rules in YAML and in JSON, with and without their defaults,
// have one checksum; the defaults are written out; Normalize is
// idempotent.
func TestIdentityCanonical(t *testing.T) {
	t.Parallel()
	rs := MustValid(t, "identity.yaml")
	js, err := json.Marshal(rs)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := MustDecode(t, js).Checksum(), rs.Checksum(); got != want {
		t.Errorf("JSON checksum %s, YAML %s", got, want)
	}
	n := rs.Normalize()
	if got := n.Limits[1].Timezone; got != "Europe/Paris" {
		t.Errorf("timezone %q", got)
	}
	if n.Limits[1].Period != 0 {
		t.Errorf("a calendar quota got period %s", n.Limits[1].Period)
	}
	if got := n.Limits[0].Tiers[0].Burst; got != 2000 {
		t.Errorf("pro burst %d, want 2000 as written", got)
	}
	if got := n.Limits[0].Tiers[2].Burst; got != 10 {
		t.Errorf("free tier burst %d, want its rate 10", got)
	}
	if f := n.Identities[1].JWT.From; f == nil || f.Cookie != "session" {
		t.Errorf("from %+v", f)
	}
	if string(n.Canonical()) != string(rs.Canonical()) {
		t.Error("Normalize is not idempotent")
	}

	// Defaults spelled out or left out: one checksum.
	bare := `namespace: a
routes: [{id: r, upstream: {targets: [{url: "http://h"}]}}]
identities: [{id: i, jwt: {jwks: {url: "https://idp/jwks"}, issuer: x, algorithms: [RS256]}}]
limits:
  - {id: q, key: [jwt:sub], algorithm: quota, rate: 5, calendar: day, scope: cluster}
  - {id: t, key: [jwt:sub], algorithm: token_bucket, rate: 5, tiers: [{id: p, match: {claims: {plan: pro}}, rate: 50}]}
`
	spelled := `namespace: a
routes: [{id: r, upstream: {targets: [{url: "http://h"}]}}]
identities: [{id: i, jwt: {from: {header: authorization, scheme: Bearer}, jwks: {url: "https://idp/jwks", refresh: 10m}, issuer: x, algorithms: [RS256]}}]
limits:
  - {id: q, key: [jwt:sub], algorithm: quota, rate: 5, calendar: day, timezone: UTC, scope: cluster, mode: exact}
  - {id: t, key: [jwt:sub], algorithm: token_bucket, rate: 5, burst: 5, period: 1s, tiers: [{id: p, match: {claims: {plan: pro}}, rate: 50, burst: 50}]}
`
	a, b := MustDecode(t, []byte(bare)), MustDecode(t, []byte(spelled))
	for _, r := range []*RuleSet{a, b} {
		if err := r.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	if a.Checksum() != b.Checksum() {
		t.Errorf("defaults change the checksum:\n%s\n%s", a.Canonical(), b.Canonical())
	}
}

// TestIdentityWarnings checks the anonymous-shared-bucket warning: a limit
// keyed only on jwt: parts on a route whose identity lets callers without
// a token through.
func TestIdentityWarnings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc   string
		mutate func(rs *RuleSet)
		want   []string // limit ids warned
	}{
		{"required false, jwt-only key", func(rs *RuleSet) {}, []string{"monthly-quota"}},
		{"required true", func(rs *RuleSet) { rs.Identities[0].JWT.Required = true }, nil},
		{"ip in the key too", func(rs *RuleSet) { rs.Limits[1].Key = []string{"jwt:sub", "ip"} }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			rs := MustValid(t, "identity.yaml")
			tt.mutate(rs)
			var got []string
			for _, w := range Warnings(nil, rs) {
				if w.Code == WarnAnonymousSharedBucket {
					got = append(got, strings.TrimSuffix(strings.TrimPrefix(w.Path, "limits["), "].key"))
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("warned %q, want %q", got, tt.want)
			}
		})
	}
}

// TestQuotaWindow checks calendar periods in a timezone: a month boundary,
// a day across each DST change (23 and 25 hours long), a week from Monday,
// and a fixed period aligned on the epoch.
func TestQuotaWindow(t *testing.T) {
	t.Parallel()
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	q := func(cal Calendar, tz string) *Limit {
		return &Limit{Algorithm: Quota, Calendar: cal, Timezone: tz}
	}
	at := func(s string) time.Time {
		v, err := time.ParseInLocation("2006-01-02 15:04:05", s, paris)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		desc       string
		l          *Limit
		t          time.Time
		start, end time.Time
	}{
		{"last second of January in Paris", q(CalendarMonth, "Europe/Paris"), at("2027-01-31 23:59:59"), at("2027-01-01 00:00:00"), at("2027-02-01 00:00:00")},
		{"first instant of February in Paris", q(CalendarMonth, "Europe/Paris"), at("2027-02-01 00:00:00"), at("2027-02-01 00:00:00"), at("2027-03-01 00:00:00")},
		{"January 31 23:30 Paris is February's UTC? no: UTC month", q(CalendarMonth, "UTC"), at("2027-02-01 00:30:00"), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC)},
		{"spring forward: a 23-hour day", q(CalendarDay, "Europe/Paris"), at("2027-03-28 12:00:00"), at("2027-03-28 00:00:00"), at("2027-03-29 00:00:00")},
		{"fall back: a 25-hour day", q(CalendarDay, "Europe/Paris"), at("2027-10-31 12:00:00"), at("2027-10-31 00:00:00"), at("2027-11-01 00:00:00")},
		{"week from Monday (Sunday night)", q(CalendarWeek, "Europe/Paris"), at("2027-03-28 23:00:00"), at("2027-03-22 00:00:00"), at("2027-03-29 00:00:00")},
		{"week from Monday (Monday morning)", q(CalendarWeek, "Europe/Paris"), at("2027-03-29 00:00:01"), at("2027-03-29 00:00:00"), at("2027-04-05 00:00:00")},
		{"fixed 72h period", &Limit{Algorithm: Quota, Period: Duration(72 * time.Hour)}, time.Unix(3*86400*10+5, 0), time.Unix(3*86400*10, 0), time.Unix(3*86400*11, 0)},
	}
	for _, tt := range tests {
		start, end, ok := tt.l.QuotaWindow(tt.t)
		if !ok || !start.Equal(tt.start) || !end.Equal(tt.end) {
			t.Errorf("%s: [%s, %s) ok=%v, want [%s, %s)", tt.desc, start, end, ok, tt.start, tt.end)
		}
	}
	if _, end, _ := q(CalendarDay, "Europe/Paris").QuotaWindow(at("2027-03-28 12:00:00")); end.Sub(at("2027-03-28 00:00:00")) != 23*time.Hour {
		t.Error("the spring-forward day is not 23 hours")
	}
	if _, _, ok := (&Limit{Algorithm: TokenBucket}).QuotaWindow(time.Now()); ok {
		t.Error("a token bucket has a quota window")
	}
}

// TestDiffIdentities checks that a changed identity (what a reviewer must
// see: a new issuer or key source) is in the rule set diff.
func TestDiffIdentities(t *testing.T) {
	t.Parallel()
	a := MustValid(t, "identity.yaml")
	b := a.Clone()
	b.Identities[0].JWT.Issuer = "https://evil.example"
	b.Identities = b.Identities[:1]
	d := DiffRuleSets(a, b)
	var got []string
	for _, r := range d.Rules {
		if r.Kind == "identities" {
			got = append(got, r.ID+":"+string(r.Op))
		}
	}
	if strings.Join(got, ",") != "partners:removed,users:changed" {
		t.Errorf("identity diffs %q", got)
	}
}

// TestQuotaRateWarnings checks that a calendar quota's rate change is
// judged per its calendar period: 1000 a day to 1000 a month is a cut by
// 30, not "unchanged".
func TestQuotaRateWarnings(t *testing.T) {
	t.Parallel()
	old := MustValid(t, "identity.yaml")
	old.Limits[1].Calendar, old.Limits[1].Rate = CalendarDay, 1000
	cur := old.Clone()
	cur.Limits[1].Calendar = CalendarMonth
	var found *Warning
	for _, w := range Warnings(old, cur) {
		if w.Code == WarnLimitTightened && strings.Contains(w.Path, "monthly-quota") {
			found = &w
		}
	}
	if found == nil || !strings.Contains(found.Message, "1000 per month (Europe/Paris)") {
		t.Fatalf("warning %+v", found)
	}
}

// TestQuotaLoweredWarning checks quota-lowered: any decrease of a quota's
// rate or of one of its tiers' rates is flagged (counted usage stays
// counted), a raise or a decrease of a non-quota limit is not.
func TestQuotaLoweredWarning(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc   string
		mutate func(rs *RuleSet)
		want   []string // paths warned
	}{
		{"unchanged", func(rs *RuleSet) {}, nil},
		{"raised", func(rs *RuleSet) { rs.Limits[1].Rate = 200000 }, nil},
		{"lowered by one", func(rs *RuleSet) { rs.Limits[1].Rate = 99999 }, []string{"limits[monthly-quota].rate"}},
		{"fixed period quota lowered", func(rs *RuleSet) { rs.Limits[2].Rate = 4000 }, []string{"limits[partner-quota].rate"}},
		{"tier lowered", func(rs *RuleSet) { rs.Limits[1].Tiers[0].Rate = 999999 }, []string{"limits[monthly-quota].tiers[pro].rate"}},
		{"token bucket lowered", func(rs *RuleSet) { rs.Limits[0].Rate = 99 }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			old, rs := MustValid(t, "identity.yaml"), MustValid(t, "identity.yaml")
			tt.mutate(rs)
			var got []string
			for _, w := range Warnings(old, rs) {
				if w.Code == WarnQuotaLowered {
					got = append(got, w.Path)
					if !strings.Contains(w.Message, "stays counted") {
						t.Errorf("message %q does not say usage stays counted", w.Message)
					}
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("warned %q, want %q", got, tt.want)
			}
		})
	}
}
