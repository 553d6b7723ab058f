package api

import (
	"bytes"
	"testing"
	"time"
)

func TestValidateAdaptiveDocument(t *testing.T) {
	t.Parallel()
	MustValid(t, "adaptive.yaml")
}

// TestValidateAdaptive checks every rule issue 15's settings add, each by
// breaking one thing in adaptive.yaml and naming the paths of every error.
func TestValidateAdaptive(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc   string
		mutate func(rs *RuleSet)
		msg    string
		paths  []string
	}{
		{"class id default", func(rs *RuleSet) { rs.Classes[0].ID = DefaultClass }, "cannot be declared",
			[]string{"classes[0].id", "limits[0].reserve.critical", "limits[2].reserve.critical"}},
		{"class id duplicate", func(rs *RuleSet) { rs.Classes[1].ID = "critical" }, "duplicate id",
			[]string{"classes[1].id", "limits[2].reserve.batch", "degrades[0].shedOrder[0]"}},
		{"class match empty", func(rs *RuleSet) { rs.Classes[0].Match = ClassMatch{} }, "is required", []string{"classes[0].match"}},
		{"class match unknown route", func(rs *RuleSet) { rs.Classes[1].Match.Routes = []string{"nope"} }, "does not exist", []string{"classes[1].match.routes[0]"}},
		{"class match lower-case method", func(rs *RuleSet) { rs.Classes[1].Match.Methods = []string{"post"} }, "upper-case", []string{"classes[1].match.methods[0]"}},
		{"class match bad header", func(rs *RuleSet) { rs.Classes[0].Match.Headers = map[string]string{"X Bad": "1"} }, "not a valid header name", []string{"classes[0].match.headers.X Bad"}},
		{"adaptive with rate", func(rs *RuleSet) { rs.Limits[0].Rate = 10 }, "does not apply to the adaptive", []string{"limits[0].rate"}},
		{"adaptive with period", func(rs *RuleSet) { rs.Limits[0].Period = Duration(time.Second) }, "does not apply", []string{"limits[0].period"}},
		{"adaptive cluster", func(rs *RuleSet) { rs.Limits[0].Scope = ScopeCluster }, "cluster scope supports", []string{"limits[0].scope"}},
		{"adaptive settings on token bucket", func(rs *RuleSet) { rs.Limits[1].Adaptive = &AdaptiveSettings{} }, "only to algorithm adaptive", []string{"limits[1].adaptive"}},
		{"adaptive max below min", func(rs *RuleSet) { rs.Limits[0].Adaptive.MaxLimit = 4 }, "below minLimit", []string{"limits[0].adaptive.maxLimit", "limits[0].adaptive.initialLimit"}},
		{"adaptive initial outside", func(rs *RuleSet) { rs.Limits[0].Adaptive.InitialLimit = 2 }, "between minLimit", []string{"limits[0].adaptive.initialLimit"}},
		{"adaptive percentile", func(rs *RuleSet) { rs.Limits[0].Adaptive.Percentile = 1.5 }, "(0, 1]", []string{"limits[0].adaptive.percentile"}},
		{"adaptive buffer", func(rs *RuleSet) { rs.Limits[0].Adaptive.Buffer = -1 }, "between 0 and 10", []string{"limits[0].adaptive.buffer"}},
		{"adaptive window", func(rs *RuleSet) { rs.Limits[0].Adaptive.Window = Duration(time.Millisecond) }, "between 10ms and 1m", []string{"limits[0].adaptive.window"}},
		{"adaptive probe shorter than windows", func(rs *RuleSet) { rs.Limits[0].Adaptive.ProbeInterval = Duration(time.Second) }, "twice the window", []string{"limits[0].adaptive.probeInterval"}},
		{"reserve unknown class", func(rs *RuleSet) { rs.Limits[2].Reserve["gold"] = 0.1 }, "does not exist", []string{"limits[2].reserve.gold"}},
		{"reserve share one", func(rs *RuleSet) { rs.Limits[2].Reserve["batch"] = 1 }, "(0, 1)", []string{"limits[2].reserve.batch"}},
		{"reserve sums to one", func(rs *RuleSet) { rs.Limits[2].Reserve["batch"] = 0.8 }, "add up to 1", []string{"limits[2].reserve"}},
		{"reserve on a rate limit", func(rs *RuleSet) { rs.Limits[1].Reserve = map[string]float64{"critical": 0.5} }, "only to the concurrency and adaptive", []string{"limits[1].reserve"}},
		{"variant id base", func(rs *RuleSet) { rs.Limits[1].Variants[0].ID = BaseVariant }, "cannot be a variant's id", []string{"limits[1].variants[0].id"}},
		{"reserve for five classes", func(rs *RuleSet) {
			for _, id := range []string{"c3", "c4", "c5"} {
				rs.Classes = append(rs.Classes, Class{ID: id, Match: ClassMatch{Methods: []string{"PUT"}}})
				rs.Limits[2].Reserve[id] = 0.1
			}
		}, "the limit is 4", []string{"limits[2].reserve"}},
		{"variant weight zero", func(rs *RuleSet) { rs.Limits[1].Variants[0].Weight = 0 }, "between 1 and 100", []string{"limits[1].variants[0].weight"}},
		{"variant weights over 100", func(rs *RuleSet) {
			rs.Limits[1].Variants = append(rs.Limits[1].Variants, LimitVariant{ID: "more", Weight: 95, Rate: 5})
		}, "add up to 105%", []string{"limits[1].variants"}},
		{"variant id duplicate", func(rs *RuleSet) {
			rs.Limits[1].Variants = append(rs.Limits[1].Variants, LimitVariant{ID: "weighted", Weight: 5, Rate: 5})
		}, "duplicate id", []string{"limits[1].variants[1].id"}},
		{"variant changes nothing", func(rs *RuleSet) { rs.Limits[1].Variants[0] = LimitVariant{ID: "same", Weight: 5} }, "changes nothing", []string{"limits[1].variants[0]"}},
		{"variant rate out of range", func(rs *RuleSet) { rs.Limits[1].Variants[0].Rate = 2_000_000_000 }, "at most 1000000000", []string{"limits[1].variants[0].rate"}},
		{"variant period too short", func(rs *RuleSet) { rs.Limits[1].Variants[0].Period = Duration(time.Microsecond) }, "at least 1ms", []string{"limits[1].variants[0].period"}},
		{"variant of adaptive sets rate", func(rs *RuleSet) { rs.Limits[0].Variants[0].Rate = 5 }, "sets adaptive only", []string{"limits[0].variants[0]"}},
		{"variant adaptive settings bad", func(rs *RuleSet) { rs.Limits[0].Variants[0].Adaptive.Percentile = 2 }, "(0, 1]", []string{"limits[0].variants[0].adaptive.percentile"}},
		{"variant adaptive on rate limit", func(rs *RuleSet) { rs.Limits[1].Variants[0].Adaptive = &AdaptiveSettings{} }, "only to algorithm adaptive", []string{"limits[1].variants[0].adaptive"}},
		{"shedOrder unknown class", func(rs *RuleSet) { rs.Degrades[0].ShedOrder = []string{"gold"} }, "does not exist", []string{"degrades[0].shedOrder[0]"}},
		{"shedOrder twice", func(rs *RuleSet) { rs.Degrades[0].ShedOrder = []string{"batch", "batch"} }, "listed twice", []string{"degrades[0].shedOrder[1]"}},
		{"healthCheck path missing", func(rs *RuleSet) { rs.Routes[0].Upstream.HealthCheck.Path = "" }, "is required", []string{"routes[0].upstream.healthCheck.path"}},
		{"healthCheck path relative", func(rs *RuleSet) { rs.Routes[0].Upstream.HealthCheck.Path = "healthz" }, "must start with /", []string{"routes[0].upstream.healthCheck.path"}},
		{"healthCheck path query", func(rs *RuleSet) { rs.Routes[0].Upstream.HealthCheck.Path = "/h?x=1" }, "URL path", []string{"routes[0].upstream.healthCheck.path"}},
		{"healthCheck interval", func(rs *RuleSet) { rs.Routes[0].Upstream.HealthCheck.Interval = Duration(time.Millisecond) }, "between 100ms and 1h",
			[]string{"routes[0].upstream.healthCheck.interval", "routes[0].upstream.healthCheck.timeout"}},
		{"healthCheck timeout over interval", func(rs *RuleSet) { rs.Routes[0].Upstream.HealthCheck.Timeout = Duration(3 * time.Second) }, "longer than the interval", []string{"routes[0].upstream.healthCheck.timeout"}},
		{"healthCheck unhealthyAfter", func(rs *RuleSet) { rs.Routes[0].Upstream.HealthCheck.UnhealthyAfter = -1 }, "between 1 and 100", []string{"routes[0].upstream.healthCheck.unhealthyAfter"}},
		{"outlier failures", func(rs *RuleSet) { rs.Routes[0].Upstream.Outlier.ConsecutiveFailures = -1 }, "between 1 and 10000", []string{"routes[0].upstream.outlier.consecutiveFailures"}},
		{"outlier max below base", func(rs *RuleSet) { rs.Routes[0].Upstream.Outlier.MaxEjection = Duration(500 * time.Millisecond) }, "shorter than baseEjection", []string{"routes[0].upstream.outlier.maxEjection"}},
		{"cookieDecoding unknown", func(rs *RuleSet) { rs.Limits[3].CookieDecoding = "url" }, "not one of percent, raw", []string{"limits[3].cookieDecoding"}},
		{"cookieDecoding without a cookie part", func(rs *RuleSet) { rs.Limits[3].Key = []string{"ip"} }, "only to a key with a cookie: part", []string{"limits[3].cookieDecoding"}},
		{"outlier ratio", func(rs *RuleSet) { rs.Routes[0].Upstream.Outlier.MaxEjectedRatio = 1.5 }, "(0, 1]", []string{"routes[0].upstream.outlier.maxEjectedRatio"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			rs := MustDecode(t, MustReadFile(t, "adaptive.yaml"))
			tc.mutate(rs)
			wantErrors(t, rs.Validate(), tc.msg, tc.paths...)
		})
	}
}

func TestNormalizeAdaptiveDefaults(t *testing.T) {
	t.Parallel()
	rs := MustDecode(t, []byte(`namespace: shop
routes:
  - id: r
    upstream:
      targets: [{url: "http://127.0.0.1:1"}, {url: "http://127.0.0.1:2"}]
      healthCheck: {path: /h}
      outlier: {}
classes:
  - {id: gold, match: {headers: {x-tier: gold}}}
limits:
  - {id: a, algorithm: adaptive}
`))
	if err := rs.Validate(); err != nil {
		t.Fatal(err)
	}
	n := rs.Normalize()
	a := n.Limits[0].Adaptive
	want := AdaptiveSettings{MinLimit: 1, MaxLimit: 1000, InitialLimit: 20, Percentile: 0.9, Buffer: 0.1,
		Window: Duration(time.Second), ProbeInterval: Duration(time.Minute)}
	if a == nil || *a != want {
		t.Errorf("adaptive = %+v, want %+v", a, want)
	}
	if n.Limits[0].Period != 0 {
		t.Errorf("adaptive period = %v, want none", n.Limits[0].Period)
	}
	hc := n.Routes[0].Upstream.HealthCheck
	if *hc != (HealthCheck{Path: "/h", Interval: Duration(5 * time.Second), Timeout: Duration(time.Second), HealthyAfter: 2, UnhealthyAfter: 2}) {
		t.Errorf("healthCheck = %+v", hc)
	}
	o := n.Routes[0].Upstream.Outlier
	if *o != (Outlier{ConsecutiveFailures: 5, BaseEjection: Duration(5 * time.Second), MaxEjection: Duration(5 * time.Minute), MaxEjectedRatio: 0.5}) {
		t.Errorf("outlier = %+v", o)
	}
	if got := n.Classes[0].Match.Headers["X-Tier"]; got != "gold" {
		t.Errorf("class header names not canonical: %v", n.Classes[0].Match.Headers)
	}
	// Normalize is idempotent and the canonical form survives a round trip.
	c1 := n.Canonical()
	if c2 := MustDecode(t, c1).Canonical(); !bytes.Equal(c1, c2) {
		t.Errorf("canonical form not stable:\n%s\n%s", c1, c2)
	}
}

func TestWithVariant(t *testing.T) {
	t.Parallel()
	base := Limit{ID: "l", Algorithm: TokenBucket, Rate: 10, Period: Duration(time.Second), Burst: 20,
		Variants: []LimitVariant{{ID: "v", Weight: 10}}}
	tests := []struct {
		desc string
		v    LimitVariant
		want Limit
	}{
		{"rate only", LimitVariant{Rate: 100}, Limit{ID: "l", Algorithm: TokenBucket, Rate: 100, Period: Duration(time.Second), Burst: 20}},
		{"cost", LimitVariant{Cost: &Cost{BodyBytesPerUnit: 1024}}, Limit{ID: "l", Algorithm: TokenBucket, Rate: 10, Period: Duration(time.Second), Burst: 20, Cost: &Cost{BodyBytesPerUnit: 1024}}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got := base.WithVariant(tc.v)
			if got.Rate != tc.want.Rate || got.Burst != tc.want.Burst || got.Period != tc.want.Period || got.Variants != nil ||
				(got.Cost == nil) != (tc.want.Cost == nil) || (got.Cost != nil && *got.Cost != *tc.want.Cost) {
				t.Errorf("WithVariant = %+v, want %+v", got, tc.want)
			}
		})
	}
	ad := Limit{ID: "a", Algorithm: Adaptive, Adaptive: &AdaptiveSettings{MinLimit: 5, MaxLimit: 100}}
	got := ad.WithVariant(LimitVariant{Adaptive: &AdaptiveSettings{MaxLimit: 50}})
	if *got.Adaptive != (AdaptiveSettings{MinLimit: 5, MaxLimit: 50}) || ad.Adaptive.MaxLimit != 100 {
		t.Errorf("adaptive merge = %+v (base now %+v)", got.Adaptive, ad.Adaptive)
	}
}

// TestNormalizeCookieDecoding: percent is the default and written as absent,
// so a document that spells it out and one that omits it have one canonical
// form (and checksum); raw is kept.
func TestNormalizeCookieDecoding(t *testing.T) {
	t.Parallel()
	doc := func(decoding string) *RuleSet {
		rs := MustDecode(t, MustReadFile(t, "adaptive.yaml"))
		rs.Limits[3].CookieDecoding = CookieDecoding(decoding)
		if err := rs.Validate(); err != nil {
			t.Fatal(err)
		}
		return rs
	}
	absent, percent, raw := doc("").Normalize(), doc("percent").Normalize(), doc("raw").Normalize()
	if percent.Limits[3].CookieDecoding != "" || !bytes.Equal(absent.Canonical(), percent.Canonical()) {
		t.Errorf("cookieDecoding: percent normalizes to %q; want it absent, with the canonical form of a document without it", percent.Limits[3].CookieDecoding)
	}
	if raw.Limits[3].CookieDecoding != CookieRaw || bytes.Equal(absent.Canonical(), raw.Canonical()) {
		t.Errorf("cookieDecoding: raw normalizes to %q, or to the default's canonical form", raw.Limits[3].CookieDecoding)
	}
}
