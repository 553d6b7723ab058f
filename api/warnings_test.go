package api

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func warnBase() *RuleSet {
	up := Upstream{Targets: []Target{{URL: "http://10.0.0.5:8081"}}}
	return &RuleSet{Namespace: "shop",
		Routes: []Route{
			{ID: "orders", Match: Match{PathPrefix: "/api/orders"}, Upstream: up},
			{ID: "health", Match: Match{Path: "/healthz"}, Upstream: up},
			{ID: "web", Upstream: up},
		},
		Limits: []Limit{
			{ID: "per-ip", Routes: []string{"orders"}, Key: []string{"ip"}, Algorithm: TokenBucket, Rate: 100, Period: Duration(time.Second)},
			{ID: "in-flight", Algorithm: Concurrency, Rate: 100},
		},
		Breakers: []Breaker{{ID: "b", Routes: []string{"orders"}, Window: Duration(10 * time.Second), OpenFor: Duration(5 * time.Second), ErrorRatio: 0.5}},
	}
}

func TestWarnings(t *testing.T) {
	t.Parallel()
	up := Upstream{Targets: []Target{{URL: "http://10.0.0.5:8081"}}}
	addRoute := func(rs *RuleSet, r Route) {
		r.Upstream = up
		rs.Routes = append(rs.Routes, r)
	}
	tests := []struct {
		desc    string
		noOld   bool
		old     func(rs *RuleSet)
		mutate  func(rs *RuleSet)
		want    []string // "code path"
		message string   // part of the first warning's message
	}{
		{desc: "no change, nothing risky", mutate: func(*RuleSet) {}},
		{desc: "nothing published yet", noOld: true, mutate: func(*RuleSet) {}},

		// degrades
		{desc: "manual level 2 on every route", mutate: func(rs *RuleSet) {
			rs.Degrades = []Degrade{{ID: "all", Mode: DegradeManual, Level: 2}}
		}, want: []string{"degrade-manual-level-2 degrades[all].level", "degrade-level-2-all-routes degrades[all].level"}, message: "every request to every route"},
		{desc: "manual level 2 on every route, listed", mutate: func(rs *RuleSet) {
			rs.Degrades = []Degrade{{ID: "a", Routes: []string{"orders", "web"}, Mode: DegradeManual, Level: 2}, {ID: "b", Routes: []string{"health"}, Mode: DegradeManual, Level: 2}}
		}, want: []string{"degrade-manual-level-2 degrades[a].level", "degrade-manual-level-2 degrades[b].level", "degrade-level-2-all-routes degrades[a].level"}},
		{desc: "manual level 2 on one route", mutate: func(rs *RuleSet) {
			rs.Degrades = []Degrade{{ID: "o", Routes: []string{"orders"}, Mode: DegradeManual, Level: 2}}
		}, want: []string{"degrade-manual-level-2 degrades[o].level"}},
		{desc: "already at manual level 2", old: func(rs *RuleSet) {
			rs.Degrades = []Degrade{{ID: "o", Routes: []string{"orders"}, Mode: DegradeManual, Level: 2}}
		}, mutate: func(rs *RuleSet) {
			rs.Degrades = []Degrade{{ID: "o", Routes: []string{"orders"}, Mode: DegradeManual, Level: 2}}
		}},
		{desc: "auto to manual level 2", old: func(rs *RuleSet) {
			rs.Degrades = []Degrade{{ID: "o", Routes: []string{"orders"}, Mode: DegradeAuto, Triggers: &DegradeTriggers{Level1: &Trigger{QPSAbove: 10}}}}
		}, mutate: func(rs *RuleSet) {
			rs.Degrades = []Degrade{{ID: "o", Routes: []string{"orders"}, Mode: DegradeManual, Level: 2}}
		}, want: []string{"degrade-manual-level-2 degrades[o].level"}},
		{desc: "manual level 1", mutate: func(rs *RuleSet) {
			rs.Degrades = []Degrade{{ID: "all", Mode: DegradeManual, Level: 1}}
		}},

		// breakers
		{desc: "breaker judging 3 requests", mutate: func(rs *RuleSet) { rs.Breakers[0].MinRequests = 3 }, want: []string{"breaker-min-requests-low breakers[b].minRequests"}},
		{desc: "breaker judging 5 requests", mutate: func(rs *RuleSet) { rs.Breakers[0].MinRequests = 5 }},
		{desc: "breaker with the default", mutate: func(rs *RuleSet) { rs.Breakers[0].MinRequests = 0 }},

		// exempt
		{desc: "exempt every IPv4 and IPv6 client", mutate: func(rs *RuleSet) { rs.Limits[0].Exempt = []string{"10.0.0.0/8", "0.0.0.0/0", "::/0"} },
			want: []string{"exempt-everything limits[per-ip].exempt[1]", "exempt-everything limits[per-ip].exempt[2]"}, message: "every IPv4 client"},
		{desc: "exempt a private range", mutate: func(rs *RuleSet) { rs.Limits[0].Exempt = []string{"10.0.0.0/8", "::1"} }},

		// shadowed routes
		{desc: "same prefix twice", mutate: func(rs *RuleSet) { addRoute(rs, Route{ID: "orders2", Match: Match{PathPrefix: "/api/orders"}}) },
			want: []string{"route-shadowed routes[orders2].match"}, message: "route orders2 can never match: route orders"},
		{desc: "same prefix, later one has a header condition", mutate: func(rs *RuleSet) {
			addRoute(rs, Route{ID: "canary", Match: Match{PathPrefix: "/api/orders", Headers: map[string]string{"X-Canary": "1"}}})
		}},
		{desc: "same prefix, earlier one takes more methods", mutate: func(rs *RuleSet) {
			rs.Routes[0].Match.Methods = []string{"GET", "POST"}
			addRoute(rs, Route{ID: "reads", Match: Match{PathPrefix: "/api/orders", Methods: []string{"GET"}}})
		}, want: []string{"route-shadowed routes[reads].match"}},
		{desc: "HEAD goes to a route that takes GET", mutate: func(rs *RuleSet) {
			rs.Routes[0].Match.Methods = []string{"GET"}
			addRoute(rs, Route{ID: "heads", Match: Match{PathPrefix: "/api/orders", Methods: []string{"HEAD"}}})
		}, want: []string{"route-shadowed routes[heads].match"}},
		{desc: "a route listing HEAD itself is not shadowed by a later GET", mutate: func(rs *RuleSet) {
			rs.Routes[0].Match.Methods = []string{"HEAD"}
			addRoute(rs, Route{ID: "gets", Match: Match{PathPrefix: "/api/orders", Methods: []string{"GET"}}})
		}},
		{desc: "same prefix, later one takes methods the earlier does not", mutate: func(rs *RuleSet) {
			rs.Routes[0].Match.Methods = []string{"GET"}
			addRoute(rs, Route{ID: "writes", Match: Match{PathPrefix: "/api/orders", Methods: []string{"GET", "POST"}}})
		}},
		{desc: "same prefix, later one has an exact host", mutate: func(rs *RuleSet) {
			addRoute(rs, Route{ID: "admin", Match: Match{PathPrefix: "/api/orders", Hosts: []string{"admin.example.com"}}})
		}},
		{desc: "exact host under an earlier wildcard", mutate: func(rs *RuleSet) {
			rs.Routes[0].Match.Hosts = []string{"*.example.com"}
			addRoute(rs, Route{ID: "admin", Match: Match{PathPrefix: "/api/orders", Hosts: []string{"admin.example.com"}}})
		}},
		{desc: "same exact host twice", mutate: func(rs *RuleSet) {
			rs.Routes[0].Match.Hosts = []string{"shop.example.com"}
			addRoute(rs, Route{ID: "again", Match: Match{PathPrefix: "/api/orders", Hosts: []string{"shop.example.com"}}})
		}, want: []string{"route-shadowed routes[again].match"}},
		{desc: "one of two hosts shadowed", mutate: func(rs *RuleSet) {
			rs.Routes[0].Match.Hosts = []string{"shop.example.com"}
			addRoute(rs, Route{ID: "two", Match: Match{PathPrefix: "/api/orders", Hosts: []string{"shop.example.com", "other.example.com"}}})
		}},
		{desc: "a host with a port does not cover a host without", mutate: func(rs *RuleSet) {
			rs.Routes[0].Match.Hosts = []string{"shop.example.com:8443"}
			addRoute(rs, Route{ID: "any-port", Match: Match{PathPrefix: "/api/orders", Hosts: []string{"shop.example.com"}}})
		}},
		{desc: "regex inside a prefix", mutate: func(rs *RuleSet) {
			addRoute(rs, Route{ID: "by-id", Match: Match{PathRegex: "^/api/orders/[0-9]+$"}})
		}, want: []string{"route-shadowed routes[by-id].match"}, message: "prefixes come before regexes"},
		{desc: "regex beside a prefix", mutate: func(rs *RuleSet) {
			addRoute(rs, Route{ID: "ordersx", Match: Match{PathRegex: "^/api/ordersx[0-9]+$"}})
		}},
		{desc: "unanchored regex", mutate: func(rs *RuleSet) {
			addRoute(rs, Route{ID: "loose", Match: Match{PathRegex: "/api/orders/[0-9]+"}})
		}},
		{desc: "regex of one exact path", mutate: func(rs *RuleSet) {
			addRoute(rs, Route{ID: "health2", Match: Match{PathRegex: "^/healthz$"}})
		}, want: []string{"route-shadowed routes[health2].match"}, message: "exact paths come before regexes"},
		{desc: "exact path under a prefix still matches", mutate: func(rs *RuleSet) {
			addRoute(rs, Route{ID: "one", Match: Match{Path: "/api/orders/1"}})
		}},
		{desc: "two catch-alls", mutate: func(rs *RuleSet) { addRoute(rs, Route{ID: "web2", Match: Match{PathPrefix: "/"}}) },
			want: []string{"route-shadowed routes[web2].match"}},

		// upstreams
		{desc: "metadata and link-local upstreams", mutate: func(rs *RuleSet) {
			rs.Routes[0].Upstream.Targets = []Target{{URL: "http://169.254.169.254/latest"}, {URL: "http://169.254.10.1:8080"}, {URL: "http://[fe80::1]:80"},
				{URL: "http://[fd00:ec2::254]"}, {URL: "http://metadata.google.internal/"}, {URL: "http://10.0.0.1"}}
		}, want: []string{"upstream-metadata routes[orders].upstream.targets[0].url", "upstream-link-local routes[orders].upstream.targets[1].url",
			"upstream-link-local routes[orders].upstream.targets[2].url", "upstream-metadata routes[orders].upstream.targets[3].url",
			"upstream-metadata routes[orders].upstream.targets[4].url"}},

		// limits
		{desc: "rate ÷ 10", mutate: func(rs *RuleSet) { rs.Limits[0].Rate = 10 }, want: []string{"limit-tightened limits[per-ip].rate"}, message: "limit per-ip: 100 per 1s → 10 per 1s, 10× tighter"},
		{desc: "rate × 10", mutate: func(rs *RuleSet) { rs.Limits[0].Rate = 1000 }, want: []string{"limit-loosened limits[per-ip].rate"}},
		{desc: "period × 60", mutate: func(rs *RuleSet) { rs.Limits[0].Period = Duration(time.Minute) }, want: []string{"limit-tightened limits[per-ip].rate"}, message: "100 per 1m, 60× tighter"},
		{desc: "rate ÷ 5", mutate: func(rs *RuleSet) { rs.Limits[0].Rate = 20 }, want: []string{"limit-tightened limits[per-ip].rate"}},
		{desc: "100 → 15 (÷ 6.7)", mutate: func(rs *RuleSet) { rs.Limits[0].Rate = 15 }, want: []string{"limit-tightened limits[per-ip].rate"}},
		{desc: "rate ÷ 3", mutate: func(rs *RuleSet) { rs.Limits[0].Rate = 33 }, want: []string{"limit-tightened limits[per-ip].rate"}},
		{desc: "rate × 3", mutate: func(rs *RuleSet) { rs.Limits[0].Rate = 300 }, want: []string{"limit-loosened limits[per-ip].rate"}},
		{desc: "rate ÷ 2", mutate: func(rs *RuleSet) { rs.Limits[0].Rate = 50 }},
		{desc: "rate × 2.5", mutate: func(rs *RuleSet) { rs.Limits[0].Rate = 250 }},
		{desc: "concurrency ÷ 10", mutate: func(rs *RuleSet) { rs.Limits[1].Rate = 10 }, want: []string{"limit-tightened limits[in-flight].rate"}},
		{desc: "rate zero", mutate: func(rs *RuleSet) { rs.Limits[0].Rate = 0 }, want: []string{"limit-rate-zero limits[per-ip].rate"}},
		{desc: "adaptive limits have no rate", noOld: true, mutate: func(rs *RuleSet) {
			rs.Limits = append(rs.Limits, Limit{ID: "adaptive", Routes: []string{"orders"}, Algorithm: Adaptive},
				Limit{ID: "adaptive-tuned", Algorithm: Adaptive, Adaptive: &AdaptiveSettings{MinLimit: 5, MaxLimit: 50}})
		}},
		{desc: "a limit switched to adaptive", mutate: func(rs *RuleSet) {
			rs.Limits[1] = Limit{ID: "in-flight", Algorithm: Adaptive}
		}},

		// classes
		{desc: "a class by header", mutate: func(rs *RuleSet) {
			rs.Classes = []Class{{ID: "critical", Match: ClassMatch{Headers: map[string]string{"X-Priority": "critical"}}},
				{ID: "writes", Match: ClassMatch{Methods: []string{"POST"}}}, {ID: "orders", Match: ClassMatch{Routes: []string{"orders"}}}}
		}, want: []string{"class-header-untrusted classes[critical].match.headers"}, message: "only to requests whose connection comes from --trusted-proxies"},
		{desc: "a class on routes chosen by header", mutate: func(rs *RuleSet) {
			addRoute(rs, Route{ID: "canary", Match: Match{PathPrefix: "/api/orders", Headers: map[string]string{"X-Canary": "1"}}})
			rs.Classes = []Class{{ID: "canary", Match: ClassMatch{Routes: []string{"canary"}}},
				{ID: "mixed", Match: ClassMatch{Routes: []string{"canary", "orders"}}}}
		}, want: []string{"class-header-untrusted classes[canary].match.routes"}, message: "canary (X-Canary)"},
		{desc: "limit removed", mutate: func(rs *RuleSet) { rs.Limits = rs.Limits[1:] }, want: []string{"limit-removed limits[per-ip]"}},
		{desc: "route removed", mutate: func(rs *RuleSet) { rs.Routes = rs.Routes[1:]; rs.Limits[0].Routes = nil; rs.Breakers = nil },
			want: []string{"route-removed routes[orders]"}},
		{desc: "limit switched to shadow", mutate: func(rs *RuleSet) { rs.Limits[0].Shadow = true }, want: []string{"limit-shadowed limits[per-ip].shadow"}},
		{desc: "new limit in shadow", mutate: func(rs *RuleSet) {
			rs.Limits = append(rs.Limits, Limit{ID: "trial", Algorithm: TokenBucket, Rate: 5, Shadow: true})
		}},
		{desc: "cluster limit added", mutate: func(rs *RuleSet) { rs.Limits[0].Scope = ScopeCluster }, want: []string{"cluster-limit-added limits[per-ip].scope"}},
		{desc: "cluster limit kept", old: func(rs *RuleSet) { rs.Limits[0].Scope = ScopeCluster }, mutate: func(rs *RuleSet) { rs.Limits[0].Scope = ScopeCluster }},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			old, rs := warnBase(), warnBase()
			if tc.old != nil {
				tc.old(old)
			}
			tc.mutate(rs)
			if err := rs.Validate(); err != nil && !strings.Contains(tc.desc, "zero") {
				t.Fatalf("the new rules must validate: %v", err)
			}
			if tc.noOld {
				old = nil
			}
			ws := Warnings(old, rs)
			if ws == nil {
				t.Fatal("nil warnings")
			}
			var got []string
			for _, w := range ws {
				got = append(got, w.Code+" "+w.Path)
				if w.Message == "" {
					t.Errorf("%s has no message", w.Code)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("warnings %q, want %q\n%+v", got, tc.want, ws)
			}
			if tc.message != "" && !strings.Contains(ws[0].Message, tc.message) {
				t.Fatalf("message %q, want it to contain %q", ws[0].Message, tc.message)
			}
		})
	}
}

func TestWarningsNil(t *testing.T) {
	t.Parallel()
	if ws := Warnings(nil, nil); ws == nil || len(ws) != 0 {
		t.Fatalf("Warnings(nil, nil) = %#v", ws)
	}
}

// BenchmarkWarnings: the cost of a change's warnings grows with the rule
// count, not its square (routes are compared through indexes).
//
//	go test -run '^$' -bench BenchmarkWarnings -count 5 ./api/
func BenchmarkWarnings(b *testing.B) {
	for _, n := range []int{1000, 10000, 20000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			mk := func(rate int64) *RuleSet {
				rs := &RuleSet{Namespace: "big"}
				for i := range n / 2 {
					id := "r" + strconv.Itoa(i)
					rs.Routes = append(rs.Routes, Route{ID: id, Match: Match{PathPrefix: "/" + id, Methods: []string{"GET"}},
						Upstream: Upstream{Targets: []Target{{URL: "http://127.0.0.1:8081"}}}})
					rs.Limits = append(rs.Limits, Limit{ID: "l" + strconv.Itoa(i), Routes: []string{id}, Key: []string{"ip"}, Algorithm: TokenBucket, Rate: rate})
				}
				return rs
			}
			old, rs := mk(100), mk(1000)
			b.ReportAllocs()
			for b.Loop() {
				if ws := Warnings(old, rs); len(ws) != n/2 {
					b.Fatalf("%d warnings", len(ws))
				}
			}
		})
	}
}

// TestSharedBucketMismatch: cluster limits of one rule set, or of two
// namespaces, that name one bucket are flagged when their budget's figures
// differ (algorithm, rate, period, burst, defaults read), not otherwise.
func TestSharedBucketMismatch(t *testing.T) {
	t.Parallel()
	lim := func(id string, f func(l *Limit)) Limit {
		l := Limit{ID: id, Key: []string{"header:X-User"}, Algorithm: TokenBucket, Rate: 300, Period: Duration(time.Second),
			Burst: 300, Scope: ScopeCluster, Bucket: "orders-per-user"}
		if f != nil {
			f(&l)
		}
		return l
	}
	tests := []struct {
		desc   string
		second func(l *Limit)
		want   bool
	}{
		{desc: "same figures", want: false},
		{desc: "same figures, defaults spelt out or not", second: func(l *Limit) { l.Burst, l.Period, l.Algorithm = 0, 0, "" }, want: false},
		{desc: "another bucket", second: func(l *Limit) { l.Rate, l.Bucket = 10, "other" }, want: false},
		{desc: "node scope names no bucket", second: func(l *Limit) { l.Rate, l.Scope = 10, ScopeNode }, want: false},
		{desc: "rate", second: func(l *Limit) { l.Rate = 200 }, want: true},
		{desc: "burst", second: func(l *Limit) { l.Burst = 600 }, want: true},
		{desc: "period", second: func(l *Limit) { l.Period = Duration(time.Minute) }, want: true},
		{desc: "algorithm", second: func(l *Limit) { l.Algorithm, l.Burst = FixedWindow, 0 }, want: true},
		{desc: "window burst is the rate", second: func(l *Limit) { l.Algorithm, l.Burst = SlidingWindow, 0 }, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			rs := &RuleSet{Namespace: "shop", Limits: []Limit{lim("a", nil), lim("b", tc.second)}}
			var got []string
			for _, w := range Warnings(rs, rs) {
				got = append(got, w.Code+" "+w.Path)
			}
			if tc.want != (len(got) == 1 && got[0] == "shared-bucket-mismatch limits[b].bucket") || !tc.want && len(got) != 0 {
				t.Fatalf("warnings %q, want a mismatch: %v", got, tc.want)
			}
			// Across namespaces: b alone in namespace orders-svc, against
			// shop's a.
			svc := &RuleSet{Namespace: "orders-svc", Limits: []Limit{lim("b", tc.second)}}
			shop := &RuleSet{Namespace: "shop", Limits: []Limit{lim("a", nil)}}
			ws := SharedBucketWarnings("orders-svc", svc, map[string]*RuleSet{"shop": shop, "orders-svc": {Limits: []Limit{lim("old", func(l *Limit) { l.Rate = 1 })}}})
			if tc.want != (len(ws) == 1) || tc.want && (ws[0].Path != "limits[b].bucket" || !strings.Contains(ws[0].Message, "namespace shop")) {
				t.Fatalf("across namespaces: %#v, want a mismatch: %v", ws, tc.want)
			}
		})
	}
	if ws := SharedBucketWarnings("x", nil, nil); ws == nil || len(ws) != 0 {
		t.Fatalf("nil rules: %#v", ws)
	}
}
