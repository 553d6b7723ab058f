package limit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/dataplane/reqview"
	"github.com/sluicegw/sluice/dataplane/reqview/classify"
)

func claims(kv ...string) *reqview.Claims {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return reqview.NewClaims("users", m)
}

// TestTiers checks that the first tier whose claims match replaces the
// limit's rate, that a tier without match takes the rest, that each tier
// counts apart (sluice_limit_decisions_total{tier}) and names its own
// quota in RateLimit-Policy, and that jwt:sub keys each caller apart.
func TestTiers(t *testing.T) {
	t.Parallel()
	rs := &api.RuleSet{Namespace: "t",
		Routes:     []api.Route{{ID: "r", Upstream: api.Upstream{Targets: []api.Target{{URL: "http://h"}}}}},
		Identities: []api.Identity{{ID: "users", JWT: &api.JWTSettings{JWKS: api.JWKSSource{File: "/j"}, Issuer: "i", Algorithms: []api.JWTAlgorithm{"RS256"}}}},
		Limits: []api.Limit{{ID: "per-user", Key: []string{"jwt:sub"}, Algorithm: api.FixedWindow, Rate: 1, Period: api.Duration(3600e9),
			Tiers: []api.Tier{
				{ID: "pro", Match: &api.TierMatch{Claims: map[string]string{"plan": "pro", "org.tier": "gold"}}, Rate: 3},
				{ID: "free", Rate: 2},
			}}}}
	v, err := api.Validated(rs)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	set, err := Compile(v.Rules().Limits, nil, Options{Metrics: m, Now: func() int64 { return 1e18 }})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	c := set.Chain("r")
	admit := func(cl *reqview.Claims) (int, string) {
		view := reqview.View{Method: "GET", RouteID: "r", Claims: cl}
		w := httptest.NewRecorder()
		done, ok := c.AdmitView(w, &view)
		if ok {
			done()
			return 200, w.Header().Get("RateLimit-Policy")
		}
		return w.Code, w.Header().Get("RateLimit-Policy")
	}
	pro := claims("sub", "alice", "plan", "pro", "org.tier", "gold")
	notQuite := claims("sub", "bob", "plan", "pro") // no org.tier: free
	anon := (*reqview.Claims)(nil)                  // no token: free, "missing" key
	for i, tc := range []struct {
		c      *reqview.Claims
		want   int
		policy string
	}{
		{pro, 200, `"per-user";q=3;w=3600`}, {pro, 200, ""}, {pro, 200, ""}, {pro, 429, ""},
		{notQuite, 200, `"per-user";q=2;w=3600`}, {notQuite, 200, ""}, {notQuite, 429, ""},
		{anon, 200, ""}, {anon, 200, ""}, {anon, 429, ""},
	} {
		code, policy := admit(tc.c)
		if code != tc.want {
			t.Fatalf("request %d: %d, want %d", i, code, tc.want)
		}
		if tc.policy != "" && policy != tc.policy {
			t.Errorf("request %d: RateLimit-Policy %q, want %q", i, policy, tc.policy)
		}
	}
	for tier, want := range map[string]float64{"pro": 1, "free": 2} {
		if got := testutil.ToFloat64(m.LimitDecision("per-user", metrics.DecisionReject, "", "", tier)); got != want {
			t.Errorf("tier %s rejections %v, want %v", tier, got, want)
		}
	}
	if got := TierOf(&rs.Limits[0], pro); got != "pro" {
		t.Errorf("TierOf = %q", got)
	}
}

// TestClassByClaims checks that a class matching claims takes a request
// whose verified claims match, from any peer, and no request without
// claims.
func TestClassByClaims(t *testing.T) {
	t.Parallel()
	c := classify.NewClasses([]api.Class{{ID: "gold", Match: api.ClassMatch{Claims: map[string]string{"tier": "gold"}}}})
	for _, tc := range []struct {
		desc string
		v    reqview.View
		want string
	}{
		{"gold claims, untrusted peer", reqview.View{Claims: claims("tier", "gold")}, "gold"},
		{"silver claims", reqview.View{Claims: claims("tier", "silver")}, "default"},
		{"no claims", reqview.View{}, "default"},
		{"header claiming gold", func() reqview.View {
			v := reqview.View{TrustedPeer: true}
			v.SetHeader(http.Header{"Tier": {"gold"}})
			return v
		}(), "default"},
	} {
		if got := c.ID(c.Classify(&tc.v, "r")); got != tc.want {
			t.Errorf("%s: class %s, want %s", tc.desc, got, tc.want)
		}
	}
}

// fakeLimiter is a Limiter whose Take answers take.
type fakeLimiter struct {
	take func(key string, cost int64) Decision
}

func (f fakeLimiter) Take(_ context.Context, key string, cost int64, _ int64) (Decision, error) {
	return f.take(key, cost), nil
}
func (f fakeLimiter) Refund(context.Context, string, int64, int64) {}

// TestQuotaRejection checks a quota's 429: the IETF draft's quota-exceeded
// problem type, RateLimit t = seconds to the period's reset, and a
// RateLimit-Policy window of the nominal period (a month: 30 days).
func TestQuotaRejection(t *testing.T) {
	t.Parallel()
	l := api.Limit{ID: "monthly", Key: []string{"jwt:sub"}, Algorithm: api.Quota, Rate: 100, Calendar: api.CalendarMonth, Timezone: "UTC",
		Scope: api.ScopeCluster, Mode: api.ModeExact, OnStoreError: api.OnStoreErrorLocal}
	set, err := Compile([]api.Limit{l}, nil, Options{Metrics: metrics.New(), Now: func() int64 { return 1e18 },
		Cluster: func(api.Limit) (Limiter, error) {
			return fakeLimiter{take: func(string, int64) Decision {
				return Decision{Limit: 100, Remaining: 0, Reset: 90 * time.Minute, RetryAfter: 90 * time.Minute}
			}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	w := httptest.NewRecorder()
	v := reqview.View{Method: "GET", RouteID: "r", Claims: claims("sub", "alice")}
	if _, ok := set.Chain("r").AdmitView(w, &v); ok {
		t.Fatal("admitted")
	}
	if w.Code != 429 || !strings.Contains(w.Body.String(), `"type":"https://iana.org/assignments/http-problem-types#quota-exceeded"`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if got := w.Header().Get("RateLimit"); got != `"monthly";r=0;t=5400` {
		t.Errorf("RateLimit %q", got)
	}
	if got := w.Header().Get("RateLimit-Policy"); got != `"monthly";q=100;w=2592000` {
		t.Errorf("RateLimit-Policy %q", got)
	}
}

// tierFake is a cluster limiter that records the tier Compile gives it.
type tierFake struct {
	fakeLimiter
	tier *string
}

func (f tierFake) SetTier(t string) { *f.tier = t }

// TestClusterTierSetter checks that Compile tells a cluster limiter of a
// tier which tier it decides for (TierSetter), and tells the limit's own
// limiter nothing.
func TestClusterTierSetter(t *testing.T) {
	t.Parallel()
	l := api.Limit{ID: "monthly", Key: []string{"jwt:sub"}, Algorithm: api.Quota, Rate: 100, Calendar: api.CalendarMonth, Timezone: "UTC",
		Scope: api.ScopeCluster, Mode: api.ModeExact, OnStoreError: api.OnStoreErrorLocal,
		Tiers: []api.Tier{{ID: "pro", Match: &api.TierMatch{Claims: map[string]string{"plan": "pro"}}, Rate: 1000}}}
	var tiers []*string
	set, err := Compile([]api.Limit{l}, nil, Options{Metrics: metrics.New(), Now: func() int64 { return 1e18 },
		Cluster: func(api.Limit) (Limiter, error) {
			s := new(string)
			*s = "(none)"
			tiers = append(tiers, s)
			return tierFake{tier: s}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	var got []string
	for _, s := range tiers {
		got = append(got, *s)
	}
	if len(got) != 2 || got[0] != "(none)" || got[1] != "pro" {
		t.Fatalf("tiers told %q, want the limit's untold and pro", got)
	}
}
