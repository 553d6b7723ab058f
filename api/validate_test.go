package api

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestValidateFull(t *testing.T) {
	t.Parallel()
	MustValid(t, "full.yaml")
}

// TestValidateDesignExample checks the example in DESIGN.md. As written it has
// two problems, which Validate must name: its degrade names a route "coupon"
// the example does not define, and it sets onStoreError, a cluster-only
// setting, on a node-scoped limit.
func TestValidateDesignExample(t *testing.T) {
	t.Parallel()
	rs := MustDecode(t, MustReadFile(t, "design.yaml"))
	wantErrors(t, rs.Validate(), "", "degrades[0].routes[0]", "limits[0].onStoreError")

	rs.Limits[0].Scope = ScopeCluster
	rs.Routes = append(rs.Routes, Route{ID: "coupon", Match: Match{PathPrefix: "/api/coupon"}, Upstream: Upstream{Targets: []Target{{URL: "http://127.0.0.1:8082"}}}})
	if err := rs.Validate(); err != nil {
		t.Fatalf("fixed design example: %v", err)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	d := func(s string) Duration {
		v, err := time.ParseDuration(s)
		if err != nil {
			panic(err)
		}
		return Duration(v)
	}
	long := strings.Repeat("x", MaxFallbackBodyBytes+1)
	tests := []struct {
		desc   string
		mutate func(rs *RuleSet)
		msg    string   // part of the first error's message
		paths  []string // every path expected
	}{
		// namespace
		{"namespace missing", func(rs *RuleSet) { rs.Namespace = "" }, "is required", []string{"namespace"}},
		{"namespace upper case", func(rs *RuleSet) { rs.Namespace = "Shop" }, "must match", []string{"namespace"}},
		{"namespace too long", func(rs *RuleSet) { rs.Namespace = strings.Repeat("a", 64) }, "must match", []string{"namespace"}},
		{"namespace leading dash", func(rs *RuleSet) { rs.Namespace = "-shop" }, "must match", []string{"namespace"}},

		// routes
		{"route id missing", func(rs *RuleSet) { rs.Routes[2].ID = "" }, "is required", []string{"routes[2].id", "limits[4].routes[0]", "breakers[1].routes[0]", "degrades[1].routes[0]"}},
		{"route id underscore", func(rs *RuleSet) { rs.Routes[2].ID = "a_b" }, "must match", []string{"routes[2].id", "limits[4].routes[0]", "breakers[1].routes[0]", "degrades[1].routes[0]"}},
		{"route id duplicate", func(rs *RuleSet) { rs.Routes[2].ID = "orders" }, "duplicate id", []string{"routes[2].id", "limits[4].routes[0]", "breakers[1].routes[0]", "degrades[1].routes[0]"}},
		{"path and pathPrefix", func(rs *RuleSet) { rs.Routes[0].Match.Path = "/x" }, "at most one", []string{"routes[0].match"}},
		{"path not rooted", func(rs *RuleSet) { rs.Routes[2].Match.Path = "healthz" }, "must start with /", []string{"routes[2].match.path"}},
		{"pathPrefix not rooted", func(rs *RuleSet) { rs.Routes[0].Match.PathPrefix = "api" }, "must start with /", []string{"routes[0].match.pathPrefix"}},
		{"pathPrefix dot segment", func(rs *RuleSet) { rs.Routes[0].Match.PathPrefix = "/api/../admin" }, "not a clean path", []string{"routes[0].match.pathPrefix"}},
		{"path double slash", func(rs *RuleSet) { rs.Routes[2].Match.Path = "//healthz" }, "not a clean path", []string{"routes[2].match.path"}},
		{"path with query", func(rs *RuleSet) { rs.Routes[2].Match.Path = "/healthz?x=1" }, "must not contain", []string{"routes[2].match.path"}},
		{"path with space", func(rs *RuleSet) { rs.Routes[2].Match.Path = "/health z" }, "must not contain", []string{"routes[2].match.path"}},
		{"pathRegex invalid", func(rs *RuleSet) { rs.Routes[1].Match.PathRegex = "^/api/(" }, "invalid RE2", []string{"routes[1].match.pathRegex"}},
		{"pathRegex backreference (not RE2)", func(rs *RuleSet) { rs.Routes[1].Match.PathRegex = `^/(a)\1$` }, "invalid RE2", []string{"routes[1].match.pathRegex"}},
		{"pathRegex lookahead (not RE2)", func(rs *RuleSet) { rs.Routes[1].Match.PathRegex = `^/(?=a)` }, "invalid RE2", []string{"routes[1].match.pathRegex"}},
		{"pathRegex too long", func(rs *RuleSet) { rs.Routes[1].Match.PathRegex = strings.Repeat("a", MaxRegexLength+1) }, "limit is", []string{"routes[1].match.pathRegex"}},
		{"pathRegex program too large", func(rs *RuleSet) { rs.Routes[1].Match.PathRegex = `(.*a){1000}` }, "5002 RE2 instructions; the limit is 2000", []string{"routes[1].match.pathRegex"}},
		{"pathRegex repeat count over RE2's cap", func(rs *RuleSet) { rs.Routes[1].Match.PathRegex = `^/a{1001}$` }, "invalid repeat count", []string{"routes[1].match.pathRegex"}},
		{"pathRegex nested repeats over RE2's cap", func(rs *RuleSet) { rs.Routes[1].Match.PathRegex = `^/(a{100}){100}$` }, "invalid repeat count", []string{"routes[1].match.pathRegex"}},
		{"host upper case", func(rs *RuleSet) { rs.Routes[0].Match.Hosts[0] = "Shop.example.com" }, "lower-case host", []string{"routes[0].match.hosts[0]"}},
		{"host with path", func(rs *RuleSet) { rs.Routes[0].Match.Hosts[1] = "shop.example.com/x" }, "lower-case host", []string{"routes[0].match.hosts[1]"}},
		{"host port out of range", func(rs *RuleSet) { rs.Routes[0].Match.Hosts[1] = "shop.example.com:70000" }, "port", []string{"routes[0].match.hosts[1]"}},
		{"host twice", func(rs *RuleSet) { rs.Routes[0].Match.Hosts[1] = "shop.example.com" }, "listed twice", []string{"routes[0].match.hosts[1]"}},
		{"host port leading zero", func(rs *RuleSet) { rs.Routes[0].Match.Hosts[1] = "shop.example.com:080" }, "leading zeros", []string{"routes[0].match.hosts[1]"}},
		{"host port zero", func(rs *RuleSet) { rs.Routes[0].Match.Hosts[1] = "shop.example.com:0" }, "outside 1-65535", []string{"routes[0].match.hosts[1]"}},
		{"method lower case", func(rs *RuleSet) { rs.Routes[0].Match.Methods[1] = "post" }, "upper-case", []string{"routes[0].match.methods[1]"}},
		{"method with space", func(rs *RuleSet) { rs.Routes[0].Match.Methods[1] = "PO ST" }, "upper-case", []string{"routes[0].match.methods[1]"}},
		{"method twice", func(rs *RuleSet) { rs.Routes[0].Match.Methods[1] = "GET" }, "listed twice", []string{"routes[0].match.methods[1]"}},
		{"header name invalid", func(rs *RuleSet) { rs.Routes[0].Match.Headers["X Bad"] = "1" }, "not a valid header name", []string{"routes[0].match.headers.X Bad"}},
		{"header twice ignoring case", func(rs *RuleSet) { rs.Routes[0].Match.Headers["x-canary"] = "1" }, "listed twice", []string{"routes[0].match.headers.x-canary"}},
		{"header value with newline", func(rs *RuleSet) { rs.Routes[0].Match.Headers["X-Canary"] = "a\r\nX-Evil: 1" }, "CR, LF", []string{"routes[0].match.headers.X-Canary"}},
		{"no targets", func(rs *RuleSet) { rs.Routes[1].Upstream.Targets = nil }, "at least one target", []string{"routes[1].upstream.targets"}},
		{"too many targets", func(rs *RuleSet) {
			rs.Routes[1].Upstream.Targets = make([]Target, MaxTargetsPerRoute+1)
			for i := range rs.Routes[1].Upstream.Targets {
				rs.Routes[1].Upstream.Targets[i].URL = "http://127.0.0.1:1"
			}
		}, "limit is", []string{"routes[1].upstream.targets"}},
		{"target url missing", func(rs *RuleSet) { rs.Routes[0].Upstream.Targets[1].URL = "" }, "is required", []string{"routes[0].upstream.targets[1].url"}},
		{"target url scheme", func(rs *RuleSet) { rs.Routes[0].Upstream.Targets[1].URL = "ftp://x" }, "http, https or h2c", []string{"routes[0].upstream.targets[1].url"}},
		{"target url no host", func(rs *RuleSet) { rs.Routes[0].Upstream.Targets[1].URL = "http:///x" }, "no host", []string{"routes[0].upstream.targets[1].url"}},
		{"target url credentials redacted", func(rs *RuleSet) { rs.Routes[0].Upstream.Targets[1].URL = "http://u:secret@x" }, "credentials", []string{"routes[0].upstream.targets[1].url"}},
		{"target url query", func(rs *RuleSet) { rs.Routes[0].Upstream.Targets[1].URL = "http://x/?a=1" }, "query", []string{"routes[0].upstream.targets[1].url"}},
		{"target url unparseable", func(rs *RuleSet) { rs.Routes[0].Upstream.Targets[1].URL = "http://[::1" }, "invalid URL", []string{"routes[0].upstream.targets[1].url"}},
		{"target url port out of range", func(rs *RuleSet) { rs.Routes[0].Upstream.Targets[1].URL = "http://x:99999" }, "port 1-65535", []string{"routes[0].upstream.targets[1].url"}},
		{"target url space in path", func(rs *RuleSet) { rs.Routes[0].Upstream.Targets[1].URL = "http://x/a b" }, "not a valid target URL", []string{"routes[0].upstream.targets[1].url"}},
		{"target url bad IPv6", func(rs *RuleSet) { rs.Routes[0].Upstream.Targets[1].URL = "http://[::1::2]/" }, "", []string{"routes[0].upstream.targets[1].url"}},
		{"target url upper-case scheme is fine", func(rs *RuleSet) { rs.Routes[0].Upstream.Targets[1].URL = "HTTPS://x" }, "", nil},
		{"weight negative", func(rs *RuleSet) { rs.Routes[0].Upstream.Targets[0].Weight = -1 }, "between 0 and 10000", []string{"routes[0].upstream.targets[0].weight"}},
		{"weight too big", func(rs *RuleSet) { rs.Routes[0].Upstream.Targets[0].Weight = 10001 }, "between 0 and 10000", []string{"routes[0].upstream.targets[0].weight"}},
		{"timeout negative", func(rs *RuleSet) { rs.Routes[0].Upstream.Timeout = -1 }, "between 0 and 1h", []string{"routes[0].upstream.timeout"}},
		{"timeout too long", func(rs *RuleSet) { rs.Routes[0].Upstream.Timeout = d("2h") }, "between 0 and 1h", []string{"routes[0].upstream.timeout"}},
		{"stripPrefix without pathPrefix", func(rs *RuleSet) { rs.Routes[2].Upstream.StripPrefix = true }, "needs match.pathPrefix", []string{"routes[2].upstream.stripPrefix"}},

		// limits
		{"limit id missing", func(rs *RuleSet) { rs.Limits[1].ID = "" }, "is required", []string{"limits[1].id"}},
		{"limit id invalid", func(rs *RuleSet) { rs.Limits[1].ID = "Up" }, "must match", []string{"limits[1].id"}},
		{"limit id duplicate", func(rs *RuleSet) { rs.Limits[1].ID = "orders-per-ip" }, "duplicate id", []string{"limits[1].id"}},
		{"limit id may equal a route id", func(rs *RuleSet) { rs.Limits[1].ID = "orders" }, "", nil},
		{"limit dangling route", func(rs *RuleSet) { rs.Limits[1].Routes[1] = "nope" }, "does not exist", []string{"limits[1].routes[1]"}},
		{"limit route twice", func(rs *RuleSet) { rs.Limits[1].Routes[1] = "orders" }, "listed twice", []string{"limits[1].routes[1]"}},
		{"key unknown", func(rs *RuleSet) { rs.Limits[0].Key[0] = "ipv4" }, "not a key dimension", []string{"limits[0].key[0]"}},
		{"key unknown kind", func(rs *RuleSet) { rs.Limits[0].Key[0] = "body:x" }, "not a key dimension", []string{"limits[0].key[0]"}},
		{"key header empty", func(rs *RuleSet) { rs.Limits[0].Key[1] = "header:" }, "not a valid header name", []string{"limits[0].key[1]"}},
		{"key query empty", func(rs *RuleSet) { rs.Limits[1].Key[0] = "query:" }, "query parameter name", []string{"limits[1].key[0]"}},
		{"key query non-ASCII", func(rs *RuleSet) { rs.Limits[1].Key[0] = "query:名前" }, "printable ASCII", []string{"limits[1].key[0]"}},
		{"key query newline", func(rs *RuleSet) { rs.Limits[1].Key[0] = "query:a\nb" }, "printable ASCII", []string{"limits[1].key[0]"}},
		{"key cookie invalid", func(rs *RuleSet) { rs.Limits[1].Key[1] = "cookie:a b" }, "not a valid cookie name", []string{"limits[1].key[1]"}},
		{"key twice", func(rs *RuleSet) { rs.Limits[0].Key[1] = "ip" }, "listed twice", []string{"limits[0].key[1]"}},
		{"key too many parts", func(rs *RuleSet) {
			rs.Limits[0].Key = []string{"ip", "route", "global", "header:A", "header:B", "query:c", "query:d", "cookie:e", "cookie:f"}
		}, "limit is", []string{"limits[0].key"}},
		{"algorithm missing", func(rs *RuleSet) { rs.Limits[2].Algorithm = "" }, "is required", []string{"limits[2].algorithm"}},
		{"algorithm unknown", func(rs *RuleSet) { rs.Limits[2].Algorithm = "gcra" }, "is not one of", []string{"limits[2].algorithm"}},
		{"rate zero", func(rs *RuleSet) { rs.Limits[2].Rate = 0 }, "must be > 0", []string{"limits[2].rate"}},
		{"rate negative", func(rs *RuleSet) { rs.Limits[2].Rate = -5 }, "must be > 0", []string{"limits[2].rate"}},
		{"rate huge", func(rs *RuleSet) { rs.Limits[2].Rate = 1 << 40 }, "at most", []string{"limits[2].rate"}},
		{"period below 1ms", func(rs *RuleSet) { rs.Limits[2].Period = d("500us") }, "at least 1ms", []string{"limits[2].period"}},
		{"period negative", func(rs *RuleSet) { rs.Limits[2].Period = -1 }, "at least 1ms", []string{"limits[2].period"}},
		{"period above 24h", func(rs *RuleSet) { rs.Limits[2].Period = d("25h") }, "at most 24h", []string{"limits[2].period"}},
		{"concurrency with period", func(rs *RuleSet) { rs.Limits[4].Period = d("1s") }, "does not apply", []string{"limits[4].period"}},
		{"concurrency with burst", func(rs *RuleSet) { rs.Limits[4].Burst = 5 }, "does not apply", []string{"limits[4].burst"}},
		{"concurrency with cost", func(rs *RuleSet) { rs.Limits[4].Cost = &Cost{Header: "X-Cost"} }, "does not apply", []string{"limits[4].cost"}},
		{"burst negative", func(rs *RuleSet) { rs.Limits[0].Burst = -1 }, "must be >= 0", []string{"limits[0].burst"}},
		{"burst huge", func(rs *RuleSet) { rs.Limits[0].Burst = 1 << 40 }, "at most", []string{"limits[0].burst"}},
		{"burst on a window", func(rs *RuleSet) { rs.Limits[2].Burst = 10 }, "does not apply to sliding_window", []string{"limits[2].burst"}},
		{"maxDelay off leaky bucket", func(rs *RuleSet) { rs.Limits[0].MaxDelay = d("1s") }, "only to leaky_bucket", []string{"limits[0].maxDelay"}},
		{"maxDelay above 1m", func(rs *RuleSet) { rs.Limits[1].MaxDelay = d("2m") }, "between 0 and 1m", []string{"limits[1].maxDelay"}},
		{"ipv6Prefix above 128", func(rs *RuleSet) { rs.Limits[0].IPv6Prefix = 129 }, "between 1 and 128 (0 means 64)", []string{"limits[0].ipv6Prefix"}},
		{"ipv6Prefix negative", func(rs *RuleSet) { rs.Limits[0].IPv6Prefix = -1 }, "between 1 and 128", []string{"limits[0].ipv6Prefix"}},
		{"cost both", func(rs *RuleSet) { rs.Limits[0].Cost.BodyBytesPerUnit = 5 }, "not both", []string{"limits[0].cost"}},
		{"cost empty", func(rs *RuleSet) { rs.Limits[0].Cost = &Cost{} }, "set header or bodyBytesPerUnit", []string{"limits[0].cost"}},
		{"cost header invalid", func(rs *RuleSet) { rs.Limits[0].Cost.Header = "X:Cost" }, "not a valid header name", []string{"limits[0].cost.header"}},
		{"cost bodyBytesPerUnit negative", func(rs *RuleSet) { rs.Limits[1].Cost.BodyBytesPerUnit = -1 }, "between 1 and", []string{"limits[1].cost.bodyBytesPerUnit"}},
		{"cost bodyBytesPerUnit huge", func(rs *RuleSet) { rs.Limits[1].Cost.BodyBytesPerUnit = 1 << 31 }, "between 1 and", []string{"limits[1].cost.bodyBytesPerUnit"}},
		{"scope unknown", func(rs *RuleSet) { rs.Limits[2].Scope = "global" }, "not one of node, cluster", []string{"limits[2].scope"}},
		{"cluster leaky bucket", func(rs *RuleSet) { rs.Limits[1].Scope = ScopeCluster }, "cluster scope supports", []string{"limits[1].scope"}},
		{"cluster concurrency", func(rs *RuleSet) { rs.Limits[4].Scope = ScopeCluster }, "cluster scope supports", []string{"limits[4].scope"}},
		{"mode unknown", func(rs *RuleSet) { rs.Limits[0].Mode = "lazy" }, "not one of exact, batched", []string{"limits[0].mode"}},
		{"mode on node scope", func(rs *RuleSet) { rs.Limits[2].Mode = ModeExact }, "only to scope: cluster", []string{"limits[2].mode"}},
		{"onStoreError unknown", func(rs *RuleSet) { rs.Limits[0].OnStoreError = "panic" }, "not one of local, allow, deny", []string{"limits[0].onStoreError"}},
		{"onStoreError on node scope", func(rs *RuleSet) { rs.Limits[2].OnStoreError = OnStoreErrorAllow }, "only to scope: cluster", []string{"limits[2].onStoreError"}},
		{"exempt not a CIDR", func(rs *RuleSet) { rs.Limits[0].Exempt[0] = "10.0.0.0/33" }, "not a CIDR", []string{"limits[0].exempt[0]"}},
		{"exempt not an address", func(rs *RuleSet) { rs.Limits[0].Exempt[1] = "localhost" }, "not an IP address", []string{"limits[0].exempt[1]"}},
		{"response status 200", func(rs *RuleSet) { rs.Limits[0].Response.Status = 200 }, "between 400 and 599", []string{"limits[0].response.status"}},
		{"response body too big", func(rs *RuleSet) { rs.Limits[0].Response.Body = long }, "limit is", []string{"limits[0].response.body"}},
		{"response content type", func(rs *RuleSet) { rs.Limits[0].Response.ContentType = "json" }, "not a media type", []string{"limits[0].response.contentType"}},
		{"response content type newline", func(rs *RuleSet) { rs.Limits[0].Response.ContentType = "text/plain\r\nX: y" }, "not a media type", []string{"limits[0].response.contentType"}},

		// breakers
		{"breaker id missing", func(rs *RuleSet) { rs.Breakers[0].ID = "" }, "is required", []string{"breakers[0].id"}},
		{"breaker id duplicate", func(rs *RuleSet) {
			rs.Breakers = append(rs.Breakers[:1], rs.Breakers[0])
			rs.Breakers[1].Routes = []string{"health"}
		}, "duplicate id", []string{"breakers[1].id"}},
		{"breaker dangling route", func(rs *RuleSet) { rs.Breakers[0].Routes = []string{"nope"} }, "does not exist", []string{"breakers[0].routes[0]"}},
		{"two breakers on a route", func(rs *RuleSet) {
			b := rs.Breakers[0]
			b.ID = "second"
			b.Routes = nil // every route, orders included
			rs.Breakers = append(rs.Breakers[:1], b)
		}, "already covered", []string{"breakers[1].routes"}},
		{"window missing", func(rs *RuleSet) { rs.Breakers[0].Window = 0 }, "is required", []string{"breakers[0].window"}},
		{"window too short", func(rs *RuleSet) { rs.Breakers[0].Window = d("10ms") }, "between 100ms and 1h", []string{"breakers[0].window"}},
		{"window too long", func(rs *RuleSet) { rs.Breakers[0].Window = d("2h") }, "between 100ms and 1h", []string{"breakers[0].window"}},
		{"minRequests negative", func(rs *RuleSet) { rs.Breakers[0].MinRequests = -1 }, "between 1 and", []string{"breakers[0].minRequests"}},
		{"errorRatio above 1", func(rs *RuleSet) { rs.Breakers[0].ErrorRatio = 1.5 }, "(0, 1]", []string{"breakers[0].errorRatio"}},
		{"errorRatio negative", func(rs *RuleSet) { rs.Breakers[0].ErrorRatio = -0.1 }, "(0, 1]", []string{"breakers[0].errorRatio"}},
		{"errorRatio NaN", func(rs *RuleSet) { rs.Breakers[0].ErrorRatio = math.NaN() }, "(0, 1]", []string{"breakers[0].errorRatio"}},
		{"errorRatio exactly 1", func(rs *RuleSet) { rs.Breakers[0].ErrorRatio = 1 }, "", nil},
		{"slowCallRatio above 1", func(rs *RuleSet) { rs.Breakers[0].SlowCallRatio = 2 }, "(0, 1]", []string{"breakers[0].slowCallRatio"}},
		{"slowCallRatio without duration", func(rs *RuleSet) { rs.Breakers[0].SlowCallDuration = 0 }, "must be > 0 when slowCallRatio", []string{"breakers[0].slowCallDuration"}},
		{"slowCallDuration too long", func(rs *RuleSet) { rs.Breakers[0].SlowCallDuration = d("2h") }, "between 0 and 1h", []string{"breakers[0].slowCallDuration"}},
		{"consecutiveFailures negative", func(rs *RuleSet) { rs.Breakers[0].ConsecutiveFailures = -1 }, "must be >= 0", []string{"breakers[0].consecutiveFailures"}},
		{"no trip condition", func(rs *RuleSet) {
			b := &rs.Breakers[0]
			b.ErrorRatio, b.SlowCallRatio, b.ConsecutiveFailures = 0, 0, 0
		}, "at least one of", []string{"breakers[0]"}},
		{"openFor missing", func(rs *RuleSet) { rs.Breakers[0].OpenFor = 0 }, "is required", []string{"breakers[0].openFor"}},
		{"openFor negative", func(rs *RuleSet) { rs.Breakers[0].OpenFor = -1 }, "must be > 0", []string{"breakers[0].openFor"}},
		{"openFor above 1h", func(rs *RuleSet) { rs.Breakers[0].OpenFor, rs.Breakers[0].MaxOpenFor = d("2h"), d("3h") }, "at most 1h", []string{"breakers[0].openFor"}},
		{"openFor above maxOpenFor", func(rs *RuleSet) { rs.Breakers[0].OpenFor = d("2m") }, "above maxOpenFor", []string{"breakers[0].openFor"}},
		{"maxOpenFor negative", func(rs *RuleSet) { rs.Breakers[0].MaxOpenFor = -1 }, "between 0 and 24h", []string{"breakers[0].maxOpenFor"}},
		{"maxOpenFor above 24h", func(rs *RuleSet) { rs.Breakers[0].MaxOpenFor = d("25h") }, "between 0 and 24h", []string{"breakers[0].maxOpenFor"}},
		{"halfOpenProbes negative", func(rs *RuleSet) { rs.Breakers[0].HalfOpenProbes = -1 }, "between 1 and 1000", []string{"breakers[0].halfOpenProbes"}},
		{"halfOpenProbes huge", func(rs *RuleSet) { rs.Breakers[0].HalfOpenProbes = 1001 }, "between 1 and 1000", []string{"breakers[0].halfOpenProbes"}},
		{"failureStatuses not a status", func(rs *RuleSet) { rs.Breakers[0].FailureStatuses[1] = 700 }, "not an HTTP status", []string{"breakers[0].failureStatuses[1]"}},
		{"failureStatuses twice", func(rs *RuleSet) { rs.Breakers[0].FailureStatuses[1] = 500 }, "listed twice", []string{"breakers[0].failureStatuses[1]"}},
		{"breaker fallback status", func(rs *RuleSet) { rs.Breakers[0].Fallback.Status = 302 }, "between 400 and 599", []string{"breakers[0].fallback.status"}},
		{"breaker fallback retryAfter negative", func(rs *RuleSet) { rs.Breakers[0].Fallback.RetryAfter = -1 }, "must be >= 0", []string{"breakers[0].fallback.retryAfter"}},
		{"breaker fallback body too big", func(rs *RuleSet) { rs.Breakers[0].Fallback.Body = long }, "limit is", []string{"breakers[0].fallback.body"}},
		{"breaker fallback content type", func(rs *RuleSet) { rs.Breakers[0].Fallback.ContentType = "plain" }, "not a media type", []string{"breakers[0].fallback.contentType"}},

		// degrades
		{"degrade id missing", func(rs *RuleSet) { rs.Degrades[1].ID = "" }, "is required", []string{"degrades[1].id"}},
		{"degrade id duplicate", func(rs *RuleSet) { rs.Degrades[1].ID = "coupon" }, "duplicate id", []string{"degrades[1].id"}},
		{"degrade dangling route", func(rs *RuleSet) { rs.Degrades[1].Routes[0] = "gone" }, "does not exist", []string{"degrades[1].routes[0]"}},
		{"two degrades on a route", func(rs *RuleSet) { rs.Degrades[1].Routes[0] = "coupon" }, "already covered", []string{"degrades[1].routes"}},
		{"mode missing", func(rs *RuleSet) { rs.Degrades[1].Mode = "" }, "is required", []string{"degrades[1].mode"}},
		{"mode unknown", func(rs *RuleSet) { rs.Degrades[1].Mode = "sometimes" }, "not one of auto, manual", []string{"degrades[1].mode"}},
		{"auto without triggers", func(rs *RuleSet) { rs.Degrades[0].Triggers = nil }, "needs a level1 or level2 trigger", []string{"degrades[0].triggers"}},
		{"auto with empty triggers", func(rs *RuleSet) { rs.Degrades[0].Triggers = &DegradeTriggers{} }, "needs a level1 or level2 trigger", []string{"degrades[0].triggers"}},
		{"auto with a level", func(rs *RuleSet) { rs.Degrades[0].Level = 1 }, "only to manual", []string{"degrades[0].level"}},
		{"level 3", func(rs *RuleSet) { rs.Degrades[1].Level = 3 }, "0, 1 or 2", []string{"degrades[1].level"}},
		{"level negative", func(rs *RuleSet) { rs.Degrades[1].Level = -1 }, "0, 1 or 2", []string{"degrades[1].level"}},
		{"empty trigger", func(rs *RuleSet) { rs.Degrades[0].Triggers.Level1 = &Trigger{} }, "set qpsAbove or successRateBelow", []string{"degrades[0].triggers.level1"}},
		{"qpsAbove negative", func(rs *RuleSet) { rs.Degrades[0].Triggers.Level1.QPSAbove = -1 }, "finite number >= 0", []string{"degrades[0].triggers.level1.qpsAbove"}},
		{"qpsAbove infinite", func(rs *RuleSet) { rs.Degrades[0].Triggers.Level2.QPSAbove = math.Inf(1) }, "finite number", []string{"degrades[0].triggers.level2.qpsAbove"}},
		{"successRateBelow above 1", func(rs *RuleSet) { rs.Degrades[0].Triggers.Level1.SuccessRateBelow = 1.2 }, "(0, 1]", []string{"degrades[0].triggers.level1.successRateBelow"}},
		{"level2 qps looser than level1", func(rs *RuleSet) { rs.Degrades[0].Triggers.Level2.QPSAbove = 2000 }, "looser than level1", []string{"degrades[0].triggers.level2.qpsAbove"}},
		{"level2 success rate looser than level1", func(rs *RuleSet) { rs.Degrades[0].Triggers.Level2.SuccessRateBelow = 0.99 }, "looser than level1", []string{"degrades[0].triggers.level2.successRateBelow"}},
		{"level2 equal to level1", func(rs *RuleSet) { rs.Degrades[0].Triggers.Level2 = &Trigger{QPSAbove: 3000, SuccessRateBelow: 0.95} }, "", nil},
		{"only level2", func(rs *RuleSet) { rs.Degrades[0].Triggers.Level1 = nil }, "", nil},
		{"degrade window too short", func(rs *RuleSet) { rs.Degrades[0].Window = d("50ms") }, "between 100ms and 1h", []string{"degrades[0].window"}},
		{"level1ShedRatio above 1", func(rs *RuleSet) { rs.Degrades[0].Level1ShedRatio = 1.01 }, "(0, 1]", []string{"degrades[0].level1ShedRatio"}},
		{"level1ShedRatio negative", func(rs *RuleSet) { rs.Degrades[0].Level1ShedRatio = -0.5 }, "(0, 1]", []string{"degrades[0].level1ShedRatio"}},
		{"recoverAfter negative", func(rs *RuleSet) { rs.Degrades[0].RecoverAfter = -1 }, "between 1 and 10000", []string{"degrades[0].recoverAfter"}},
		{"degrade key invalid", func(rs *RuleSet) { rs.Degrades[0].Key[0] = "user" }, "not a key dimension", []string{"degrades[0].key[0]"}},
		{"degrade fallback status", func(rs *RuleSet) { rs.Degrades[0].Fallback.Status = 600 }, "between 400 and 599", []string{"degrades[0].fallback.status"}},
		{"degrade fallback retryAfter negative", func(rs *RuleSet) { rs.Degrades[0].Fallback.RetryAfter = -1 }, "must be >= 0", []string{"degrades[0].fallback.retryAfter"}},
		{"degrade fallback html too big", func(rs *RuleSet) { rs.Degrades[0].Fallback.HTML = long }, "limit is", []string{"degrades[0].fallback.html"}},
		{"degrade fallback json invalid", func(rs *RuleSet) { rs.Degrades[0].Fallback.JSON = RawJSON("{oops") }, "not valid JSON", []string{"degrades[0].fallback.json"}},

		// the whole set
		{"too many rules", func(rs *RuleSet) { rs.Limits = make([]Limit, MaxRules+1) }, "the limit is", []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			rs := MustValid(t, "full.yaml")
			tt.mutate(rs)
			err := rs.Validate()
			if len(tt.paths) == 0 {
				if err != nil {
					t.Fatalf("want no error, got:\n%v", err)
				}
				return
			}
			wantErrors(t, err, tt.msg, tt.paths...)
		})
	}
}

func TestValidateEveryErrorAtOnce(t *testing.T) {
	t.Parallel()
	rs := MustDecode(t, []byte(`
namespace: Bad
routes:
  - id: a
    upstream: {targets: [{url: "ftp://x"}]}
limits:
  - {id: l, algorithm: token_bucket, rate: 0}
breakers:
  - {id: b, window: 1s, errorRatio: 2, openFor: 1s}
degrades:
  - {id: d, mode: auto}
`))
	wantErrors(t, rs.Validate(), "", "namespace", "routes[0].upstream.targets[0].url", "limits[0].rate", "breakers[0].errorRatio", "degrades[0].triggers")
}

func TestValidateNil(t *testing.T) {
	t.Parallel()
	var rs *RuleSet
	if err := rs.Validate(); err == nil {
		t.Fatal("nil rule set validated")
	}
}

func TestValidateDoesNotChange(t *testing.T) {
	t.Parallel()
	rs := MustValid(t, "full.yaml")
	before := rs.Clone()
	_ = rs.Validate()
	if string(rs.Canonical()) != string(before.Canonical()) || rs.Limits[2].Period != before.Limits[2].Period {
		t.Fatal("Validate changed the rule set")
	}
}

func TestValidID(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		id   string
		want bool
	}{
		{"a", true}, {"0", true}, {"orders-per-ip", true}, {strings.Repeat("a", 63), true},
		{"", false}, {"-a", false}, {"A", false}, {"a_b", false}, {"a.b", false}, {strings.Repeat("a", 64), false}, {"ä", false},
	} {
		if got := ValidID(tt.id); got != tt.want {
			t.Errorf("ValidID(%q) = %v, want %v", tt.id, got, tt.want)
		}
	}
}

func TestParsePrefix(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in, want string
	}{
		{"10.0.0.0/8", "10.0.0.0/8"},
		{"10.1.2.3/8", "10.0.0.0/8"},
		{"10.1.2.3", "10.1.2.3/32"},
		{"::ffff:10.1.2.3", "10.1.2.3/32"},
		{"2001:db8::1", "2001:db8::1/128"},
		{"2001:db8::/32", "2001:db8::/32"},
		{"x", ""},
		{"10.0.0.0/40", ""},
	} {
		p, err := ParsePrefix(tt.in)
		if tt.want == "" {
			if err == nil {
				t.Errorf("ParsePrefix(%q) = %v, want an error", tt.in, p)
			}
			continue
		}
		if err != nil || p.String() != tt.want {
			t.Errorf("ParsePrefix(%q) = %v, %v, want %s", tt.in, p, err, tt.want)
		}
	}
}
