package limit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/answer"
	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/dataplane/reqview"
)

// fakeClock is an injected clock; tests move it by hand.
type fakeClock struct{ t atomic.Int64 }

func newClock() *fakeClock { c := &fakeClock{}; c.t.Store(t0); return c }

func (c *fakeClock) now() int64             { return c.t.Load() }
func (c *fakeClock) add(d time.Duration)    { c.t.Add(int64(d)) }
func (c *fakeClock) opts(o Options) Options { o.Now = c.now; o.SweepInterval = -1; return o }
func limitsOf(ls ...api.Limit) []api.Limit  { return ls }
func ipInfo(ip string) RequestInfo {
	return RequestInfo{RouteID: "orders", ClientIP: netip.MustParseAddr(ip), RequestID: "req-1"}
}
func get(target string) *http.Request { return httptest.NewRequest(http.MethodGet, target, nil) }

// viewOf is the request view Admit builds for r and info.
func viewOf(r *http.Request, info RequestInfo) *reqview.View { v := info.View(r); return &v }

// normalized returns ls as Compile takes them: normalized, as in a rule set
// api.Validated made.
func normalized(ls []api.Limit) []api.Limit { return (&api.RuleSet{Limits: ls}).Normalize().Limits }

func mustCompile(tb testing.TB, limits []api.Limit, prev *Set, opts Options) *Set {
	tb.Helper()
	s, err := Compile(normalized(limits), prev, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// admit runs one request through the route's chain and returns the recorder,
// done and ok.
func admit(s *Set, r *http.Request, info RequestInfo) (*httptest.ResponseRecorder, func(), bool) {
	w := httptest.NewRecorder()
	done, ok := s.Chain(info.RouteID).Admit(w, r, info)
	return w, done, ok
}

func TestStackedLimitsConsumeNothingOnRejection(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := mustCompile(t, limitsOf(
		api.Limit{ID: "per-ip", Key: []string{"ip"}, Algorithm: api.TokenBucket, Rate: 1, Period: api.Duration(time.Hour), Burst: 3},
		api.Limit{ID: "global", Algorithm: api.FixedWindow, Rate: 1, Period: api.Duration(time.Hour)},
		api.Limit{ID: "slow", Algorithm: api.LeakyBucket, Rate: 60, Period: api.Duration(time.Hour), Burst: 5, MaxDelay: api.Duration(time.Minute)},
	), nil, clk.opts(Options{}))
	info := ipInfo("192.0.2.1")
	if _, _, ok := admit(s, get("/"), info); !ok {
		t.Fatal("first request rejected")
	}
	for range 5 {
		w, _, ok := admit(s, get("/"), info)
		if ok || w.Code != 429 || !strings.Contains(w.Body.String(), `"rule":"global"`) {
			t.Fatalf("want rejection by global, got ok=%v %d %s", ok, w.Code, w.Body)
		}
	}
	// per-ip (evaluated before global) and slow (after) gave back or never took.
	perIP := s.rules[0].local
	ks := s.rules[0].key
	h := ks.Hash(viewOf(get("/"), info))
	if d := perIP.TakeHash(h, 1, clk.now()); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("per-ip after rejections: %+v, want allowed with 1 remaining", d)
	}
	if d := s.rules[2].local.TakeHash(0, 1, clk.now()); !d.Allowed || d.Delay != time.Minute {
		t.Fatalf("leaky bucket after rejections: %+v, want the second slot (delay 1m)", d)
	}
}

func TestLeakyBucketWaitsLast(t *testing.T) {
	t.Parallel()
	clk := newClock()
	var waited []time.Duration
	opts := clk.opts(Options{Wait: func(ctx context.Context, d time.Duration) error {
		waited = append(waited, d)
		return ctx.Err()
	}})
	s := mustCompile(t, limitsOf(
		api.Limit{ID: "slow", Algorithm: api.LeakyBucket, Rate: 10, Burst: 3, MaxDelay: api.Duration(150 * time.Millisecond)},
		api.Limit{ID: "cap", Algorithm: api.FixedWindow, Rate: 3, Period: api.Duration(time.Hour)},
	), nil, opts)
	info := ipInfo("192.0.2.1")
	for i, want := range []time.Duration{0, 100 * time.Millisecond} {
		if _, _, ok := admit(s, get("/"), info); !ok {
			t.Fatalf("request %d rejected", i)
		}
		if got := waited; want > 0 && (len(got) == 0 || got[len(got)-1] != want) {
			t.Fatalf("request %d waited %v, want %v", i, got, want)
		}
	}
	// Third would wait 200ms > maxDelay: rejected by the leaky bucket, and the
	// fixed window (evaluated first) gets its unit back.
	w, _, ok := admit(s, get("/"), info)
	if ok || !strings.Contains(w.Body.String(), `"rule":"slow"`) || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("want maxDelay rejection, got %v %s %v", ok, w.Body, w.Header())
	}
	// A client that cancels while waiting gives its slot back.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	clk.add(100 * time.Millisecond) // one slot drained: the next request would wait 100ms
	w, _, ok = admit(s, get("/").WithContext(ctx), info)
	if ok || w.Code != 200 || w.Body.Len() != 0 {
		t.Fatalf("cancelled wait: ok=%v code=%d body=%q; want not ok and nothing written", ok, w.Code, w.Body)
	}
	if d := s.rules[0].local.TakeHash(0, 1, clk.now()); !d.Allowed || d.Delay != 100*time.Millisecond {
		t.Fatalf("after cancel: %+v, want the cancelled slot (delay 100ms) free again", d)
	}
	if d := s.rules[1].local.TakeHash(0, 1, clk.now()); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("fixed window after cancel: %+v, want 2 used before this one", d)
	}
}

func TestWaitHonoursContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := Wait(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	if time.Since(start) > time.Second {
		t.Fatal("Wait did not return on cancel")
	}
	if err := Wait(context.Background(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrencyRelease(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := mustCompile(t, limitsOf(api.Limit{ID: "inflight", Key: []string{"ip"}, Algorithm: api.Concurrency, Rate: 1}), nil, clk.opts(Options{}))
	info := ipInfo("192.0.2.7")
	// handle runs one request the way the integrator must: defer done.
	handle := func(r *http.Request, body func(r *http.Request)) (admitted bool) {
		done, ok := s.Chain("orders").Admit(httptest.NewRecorder(), r, info)
		if !ok {
			return false
		}
		defer done()
		body(r)
		return true
	}
	mustBeFree := func(when string) {
		t.Helper()
		if !handle(get("/"), func(*http.Request) {}) {
			t.Fatalf("slot not released after %s", when)
		}
	}
	// Completion.
	if !handle(get("/"), func(r *http.Request) {
		if _, _, ok := admit(s, get("/"), info); ok {
			t.Error("second concurrent request admitted")
		}
	}) {
		t.Fatal("first request rejected")
	}
	mustBeFree("completion")
	// Panic.
	func() {
		defer func() { _ = recover() }()
		handle(get("/"), func(*http.Request) { panic("handler bug") })
	}()
	mustBeFree("panic")
	// Client cancel: the handler returns when the client goes away.
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan bool)
	go func() {
		finished <- handle(get("/").WithContext(ctx), func(r *http.Request) { <-r.Context().Done() })
	}()
	for s.rules[0].local.Len() == 0 {
		time.Sleep(time.Millisecond) // until the goroutine holds the slot
	}
	cancel()
	if !<-finished {
		t.Fatal("request rejected")
	}
	mustBeFree("client cancel")
	// done is idempotent: calling it twice must not free a slot held by another.
	done, ok := s.Chain("orders").Admit(httptest.NewRecorder(), get("/"), info)
	if !ok {
		t.Fatal("rejected")
	}
	done()
	done()
	d2, ok := s.Chain("orders").Admit(httptest.NewRecorder(), get("/"), info)
	if !ok {
		t.Fatal("rejected after done")
	}
	if _, _, ok := admit(s, get("/"), info); ok {
		t.Fatal("double done freed a second slot")
	}
	d2()
}

func TestShadowExemptAndLogging(t *testing.T) {
	t.Parallel()
	clk := newClock()
	m := metrics.New()
	var logBuf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logBuf, nil))
	s := mustCompile(t, limitsOf(
		api.Limit{ID: "shadow", Algorithm: api.TokenBucket, Rate: 1, Shadow: true},
		api.Limit{ID: "enforced", Key: []string{"ip"}, Algorithm: api.FixedWindow, Rate: 2, Exempt: []string{"10.0.0.0/8"}},
	), nil, clk.opts(Options{Metrics: m, Logger: logger, LogBurst: 3, LogsPerSecond: 1}))
	for i := range 5 {
		w, _, ok := admit(s, get("/"), ipInfo("10.1.2.3"))
		if !ok {
			t.Fatalf("exempt request %d rejected: %s", i, w.Body)
		}
		if w.Header().Get("RateLimit") != "" {
			t.Fatalf("shadow limit advertised: %v", w.Header())
		}
	}
	rejected := 0
	for range 4 {
		if _, _, ok := admit(s, get("/"), ipInfo("192.0.2.1")); !ok {
			rejected++
		}
	}
	if rejected != 2 {
		t.Fatalf("rejected %d of 4 by enforced (rate 2), want 2", rejected)
	}
	val := func(rule, decision string) float64 {
		return testutil.ToFloat64(m.LimitDecision(rule, decision, "", "", ""))
	}
	// shadow: 1 allow, then 8 shadow rejections (9 requests reached it).
	if a, r := val("shadow", metrics.DecisionAllow), val("shadow", metrics.DecisionShadowDeny); a != 1 || r != 8 {
		t.Fatalf("shadow allow=%v shadow_reject=%v, want 1 and 8", a, r)
	}
	if e, a, r := val("enforced", metrics.DecisionExempt), val("enforced", metrics.DecisionAllow), val("enforced", metrics.DecisionReject); e != 5 || a != 2 || r != 2 {
		t.Fatalf("enforced exempt=%v allow=%v reject=%v, want 5 2 2", e, a, r)
	}
	// 10 rejections (8 shadow + 2 enforced) against a log bucket of 3 at a frozen clock.
	lines := strings.Split(strings.TrimSpace(logBuf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d log lines, want 3:\n%s", len(lines), logBuf.String())
	}
	if got := testutil.ToFloat64(m.LogsDropped); got != 7 {
		t.Fatalf("logs dropped = %v, want 7", got)
	}
	var entry map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &entry); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"traceId", "requestId", "path", "ip", "rule", "decision", "key", "limit", "remaining"} {
		if _, ok := entry[k]; !ok {
			t.Fatalf("log line lacks %q: %s", k, lines[0])
		}
	}
	if entry["msg"] != reqview.MsgRateLimit || entry["requestId"] != "req-1" || entry["ip"] != "10.1.2.3" {
		t.Fatalf("log line %s: want msg %s, requestId req-1, ip 10.1.2.3", lines[0], reqview.MsgRateLimit)
	}
	// After a second, one more line fits: the second request is a shadow
	// rejection (logged), the third one's line is dropped.
	clk.add(time.Second)
	for range 3 {
		admit(s, get("/"), ipInfo("192.0.2.1"))
	}
	if n := strings.Count(logBuf.String(), "\n"); n != 4 {
		t.Fatalf("%d log lines after refill, want 4", n)
	}
}

func TestKeys(t *testing.T) {
	t.Parallel()
	withHeader := func(target string, kv ...string) *http.Request {
		r := get(target)
		for i := 0; i < len(kv); i += 2 {
			r.Header.Add(kv[i], kv[i+1])
		}
		return r
	}
	tests := []struct {
		desc string
		key  []string
		a, b *http.Request
		ipA  string
		ipB  string
		same bool
	}{
		{"composite ip+header: same ip, different users", []string{"ip", "header:X-User"}, withHeader("/", "X-User", "alice"), withHeader("/", "X-User", "bob"), "192.0.2.1", "192.0.2.1", false},
		{"composite ip+header: same user, different ips", []string{"ip", "header:X-User"}, withHeader("/", "X-User", "alice"), withHeader("/", "X-User", "alice"), "192.0.2.1", "192.0.2.2", false},
		{"composite equal", []string{"ip", "header:X-User"}, withHeader("/", "x-user", "alice"), withHeader("/", "X-User", "alice"), "192.0.2.1", "192.0.2.1", true},
		{"missing header shares one key across ips", []string{"header:X-Api-Key"}, get("/"), get("/"), "192.0.2.1", "198.51.100.9", true},
		{"empty header is the missing key", []string{"header:X-Api-Key"}, get("/"), withHeader("/", "X-Api-Key", ""), "192.0.2.1", "192.0.2.1", true},
		{"empty query value is the missing key", []string{"query:user"}, get("/?x=1"), get("/?user="), "192.0.2.1", "192.0.2.1", true},
		{"empty cookie is the missing key", []string{"cookie:sid"}, get("/"), withHeader("/", "Cookie", `sid=""`), "192.0.2.1", "192.0.2.1", true},
		{"empty header differs from a value", []string{"header:X-Api-Key"}, withHeader("/", "X-Api-Key", "k"), withHeader("/", "X-Api-Key", ""), "192.0.2.1", "192.0.2.1", false},
		{"query values", []string{"query:user"}, get("/?a=1&user=al%69ce"), get("/?user=alice"), "192.0.2.1", "192.0.2.2", true},
		{"query differs", []string{"query:user"}, get("/?user=alice"), get("/?user=bob"), "192.0.2.1", "192.0.2.1", false},
		{"missing query shares", []string{"query:user"}, get("/?x=1"), get("/"), "192.0.2.1", "192.0.2.2", true},
		{"cookie values", []string{"cookie:sid"}, withHeader("/", "Cookie", "a=1; sid=s1"), withHeader("/", "Cookie", `sid="s1"`), "192.0.2.1", "192.0.2.2", true},
		{"cookie differs", []string{"cookie:sid"}, withHeader("/", "Cookie", "sid=s1"), withHeader("/", "Cookie", "sid=s2"), "192.0.2.1", "192.0.2.1", false},
		{"parts do not run together", []string{"header:A", "header:B"}, withHeader("/", "A", "x", "B", "yz"), withHeader("/", "A", "xy", "B", "z"), "192.0.2.1", "192.0.2.1", false},
		{"ipv4-mapped ipv6 is the ipv4 client", []string{"ip"}, get("/"), get("/"), "192.0.2.1", "::ffff:192.0.2.1", true},
		{"route", []string{"route"}, get("/"), get("/x"), "192.0.2.1", "192.0.2.2", true},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			clk := newClock()
			s := mustCompile(t, limitsOf(api.Limit{ID: "k", Key: tt.key, Algorithm: api.FixedWindow, Rate: 1}), nil, clk.opts(Options{}))
			if _, _, ok := admit(s, tt.a, ipInfo(tt.ipA)); !ok {
				t.Fatal("first request rejected")
			}
			_, _, ok := admit(s, tt.b, ipInfo(tt.ipB))
			if ok == tt.same {
				t.Fatalf("second request admitted=%v; want same key=%v", ok, tt.same)
			}
		})
	}
}

func TestCost(t *testing.T) {
	t.Parallel()
	hdr := func(v string) *http.Request {
		r := get("/")
		if v != "-" {
			r.Header.Set("X-Cost", v)
		}
		return r
	}
	body := func(n int64) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat("x", int(max(n, 0)))))
		r.ContentLength = n
		return r
	}
	tests := []struct {
		desc      string
		cost      api.Cost
		r         *http.Request
		admitted  bool
		remaining string
	}{
		{"header value", api.Cost{Header: "X-Cost"}, hdr("4"), true, "6"},
		{"header missing costs 1", api.Cost{Header: "X-Cost"}, hdr("-"), true, "9"},
		{"header malformed costs 1", api.Cost{Header: "X-Cost"}, hdr("abc"), true, "9"},
		{"header zero costs 1", api.Cost{Header: "X-Cost"}, hdr("0"), true, "9"},
		{"header negative costs 1", api.Cost{Header: "X-Cost"}, hdr("-5"), true, "9"},
		{"header above burst is rejected", api.Cost{Header: "X-Cost"}, hdr("11"), false, "10"},
		{"header overflowing int64 is rejected", api.Cost{Header: "X-Cost"}, hdr("99999999999999999999999"), false, "10"},
		{"body rounded up", api.Cost{BodyBytesPerUnit: 100}, body(250), true, "7"},
		{"empty body costs 1", api.Cost{BodyBytesPerUnit: 100}, body(0), true, "9"},
		{"unknown length costs the capacity", api.Cost{BodyBytesPerUnit: 100}, body(-1), true, "0"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			s := mustCompile(t, limitsOf(api.Limit{ID: "cost", Algorithm: api.TokenBucket, Rate: 10, Period: api.Duration(time.Hour), Cost: &tt.cost}), nil, newClock().opts(Options{}))
			w, _, ok := admit(s, tt.r, ipInfo("192.0.2.1"))
			if ok != tt.admitted {
				t.Fatalf("admitted = %v, want %v", ok, tt.admitted)
			}
			if got := w.Header().Get("X-RateLimit-Remaining"); got != tt.remaining {
				t.Fatalf("remaining = %q, want %q", got, tt.remaining)
			}
			if !ok && w.Header().Get("Retry-After") == "" {
				t.Fatal("no Retry-After")
			}
		})
	}
}

func TestRejectionResponse(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := mustCompile(t, limitsOf(
		api.Limit{ID: "orders-per-ip", Routes: []string{"orders"}, Key: []string{"ip"}, Algorithm: api.TokenBucket, Rate: 10, Period: api.Duration(time.Minute), Burst: 2},
		api.Limit{ID: "custom", Routes: []string{"custom"}, Algorithm: api.FixedWindow, Rate: 1, Response: &api.LimitResponse{Status: 503, Body: "slow down", ContentType: "text/plain"}},
	), nil, clk.opts(Options{}))
	info := ipInfo("192.0.2.1")
	w, _, ok := admit(s, get("/"), info)
	if !ok {
		t.Fatal("rejected")
	}
	// Allowed: the RateLimit headers of the (only) limit.
	want := map[string]string{
		"RateLimit-Policy":      `"orders-per-ip";q=10;w=60`,
		"RateLimit":             `"orders-per-ip";r=1;t=6`,
		"X-RateLimit-Limit":     "10",
		"X-RateLimit-Remaining": "1",
		"X-RateLimit-Reset":     "6",
	}
	for k, v := range want {
		if got := w.Header().Get(k); got != v {
			t.Errorf("allowed %s = %q, want %q", k, got, v)
		}
	}
	admit(s, get("/"), info)
	clk.add(time.Second)
	w, _, ok = admit(s, get("/"), info)
	if ok {
		t.Fatal("third request admitted")
	}
	want = map[string]string{
		"Retry-After":           "5", // next token 6s after the first take, 1s elapsed
		"RateLimit-Policy":      `"orders-per-ip";q=10;w=60`,
		"RateLimit":             `"orders-per-ip";r=0;t=11`,
		"X-RateLimit-Limit":     "10",
		"X-RateLimit-Remaining": "0",
		"X-RateLimit-Reset":     "11",
		"Content-Type":          "application/problem+json",
	}
	if w.Code != 429 {
		t.Errorf("status %d, want 429", w.Code)
	}
	for k, v := range want {
		if got := w.Header().Get(k); got != v {
			t.Errorf("rejected %s = %q, want %q", k, got, v)
		}
	}
	var p map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	wantBody := map[string]any{"type": ProblemType, "title": "Too Many Requests", "status": 429.0, "rule": "orders-per-ip", "requestId": "req-1"}
	for k, v := range wantBody {
		if p[k] != v {
			t.Errorf("body %s = %v, want %v", k, p[k], v)
		}
	}
	if d, _ := p["detail"].(string); !strings.Contains(d, "orders-per-ip") {
		t.Errorf("detail %q does not name the rule", d)
	}
	// The rule's response override.
	ci := RequestInfo{RouteID: "custom", ClientIP: info.ClientIP}
	admit(s, get("/"), ci)
	w, _, _ = admit(s, get("/"), ci)
	if w.Code != 503 || w.Body.String() != "slow down" || w.Header().Get("Content-Type") != "text/plain" || w.Header().Get("Retry-After") == "" {
		t.Fatalf("override: %d %q %v", w.Code, w.Body, w.Header())
	}
	// No limit on an unknown route.
	if c := s.Chain("other"); c != nil {
		t.Fatalf("chain for unlimited route: %+v", c)
	}
	if _, ok := (*Chain)(nil).Admit(httptest.NewRecorder(), get("/"), info); !ok {
		t.Fatal("nil chain rejected")
	}
}

func TestTightestHeaders(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, limitsOf(
		api.Limit{ID: "big", Algorithm: api.FixedWindow, Rate: 100},
		api.Limit{ID: "small", Algorithm: api.FixedWindow, Rate: 4},
		api.Limit{ID: "sub-second", Algorithm: api.FixedWindow, Rate: 30, Period: api.Duration(100 * time.Millisecond)},
	), nil, newClock().opts(Options{}))
	w, _, _ := admit(s, get("/"), ipInfo("192.0.2.1"))
	// Remaining shares: big 99/100, small 3/4, sub-second 29/30: small is tightest.
	if got := w.Header().Get("RateLimit"); got != `"small";r=3;t=1` {
		t.Fatalf("RateLimit = %q, want the small limit", got)
	}
	s2 := mustCompile(t, limitsOf(api.Limit{ID: "sub-second", Algorithm: api.FixedWindow, Rate: 30, Period: api.Duration(100 * time.Millisecond)}), nil, newClock().opts(Options{}))
	w, _, _ = admit(s2, get("/"), ipInfo("192.0.2.1"))
	if got := w.Header().Get("RateLimit-Policy"); got != `"sub-second";q=300;w=1` {
		t.Fatalf("RateLimit-Policy = %q, want the quota scaled to 1s", got)
	}
}

// closer is a cluster limiter fake that records Close.
type closer struct {
	Limiter
	closed atomic.Bool
}

func (c *closer) Close() error { c.closed.Store(true); return nil }

func TestCompileAndCarryOver(t *testing.T) {
	t.Parallel()
	clk := newClock()
	tb := api.Limit{ID: "tb", Key: []string{"ip"}, Algorithm: api.TokenBucket, Rate: 10, Period: api.Duration(time.Hour), Burst: 10}
	fw := api.Limit{ID: "fw", Key: []string{"ip"}, Algorithm: api.FixedWindow, Rate: 10, Period: api.Duration(time.Hour)}
	same := api.Limit{ID: "same", Key: []string{"ip"}, Algorithm: api.SlidingWindow, Rate: 10, Period: api.Duration(time.Hour)}
	conc := api.Limit{ID: "conc", Key: []string{"ip"}, Algorithm: api.Concurrency, Rate: 10}
	var clusters []*closer
	opts := clk.opts(Options{Cluster: func(l api.Limit) (Limiter, error) {
		c := &closer{Limiter: mustLocal(t, l)}
		clusters = append(clusters, c)
		return c, nil
	}})
	cl := api.Limit{ID: "cl", Algorithm: api.TokenBucket, Rate: 10, Scope: api.ScopeCluster}
	clGone := api.Limit{ID: "cl-gone", Algorithm: api.TokenBucket, Rate: 10, Scope: api.ScopeCluster}
	s1 := mustCompile(t, limitsOf(tb, fw, same, conc, cl, clGone), nil, opts)
	info := ipInfo("192.0.2.1")
	var dones []func()
	for range 5 {
		done, ok := s1.Chain("orders").Admit(httptest.NewRecorder(), get("/"), info)
		if !ok {
			t.Fatal("rejected")
		}
		dones = append(dones, done)
	}
	// Double the capacities of tb, fw and conc; keep same and cl; drop cl-gone.
	tb2, fw2, conc2 := tb, fw, conc
	tb2.Rate, tb2.Burst, fw2.Rate, conc2.Rate = 20, 20, 20, 20
	s2 := mustCompile(t, limitsOf(tb2, fw2, same, conc2, cl), s1, opts)
	byID := func(s *Set, id string) *rule {
		for _, ru := range s.rules {
			if ru.l.ID == id {
				return ru
			}
		}
		t.Fatalf("no rule %q", id)
		return nil
	}
	if byID(s1, "same") != byID(s2, "same") || byID(s1, "cl").lim != byID(s2, "cl").lim {
		t.Fatal("unchanged rules did not keep their state objects")
	}
	if byID(s1, "tb") == byID(s2, "tb") {
		t.Fatal("changed rule kept its old settings")
	}
	h := byID(s2, "tb").key.Hash(viewOf(get("/"), info))
	// tb: 5 of 10 used (half full) → 10 of 20 used: 10 remain, 9 after this take.
	if d := byID(s2, "tb").local.TakeHash(h, 1, clk.now()); d.Remaining != 9 {
		t.Fatalf("tb carried: remaining %d after one take, want 9 (half of 20, minus 1)", d.Remaining)
	}
	if d := byID(s2, "fw").local.TakeHash(h, 1, clk.now()); d.Remaining != 9 {
		t.Fatalf("fw carried: remaining %d, want 9", d.Remaining)
	}
	// conc: 5 in flight carried unscaled; the old dones release them into the new limit.
	if d := byID(s2, "conc").local.TakeHash(h, 1, clk.now()); d.Remaining != 14 {
		t.Fatalf("conc carried: remaining %d, want 14", d.Remaining)
	}
	byID(s2, "conc").local.RefundHash(h, 1, clk.now())
	for _, done := range dones {
		done()
	}
	if d := byID(s2, "conc").local.TakeHash(h, 1, clk.now()); d.Remaining != 19 {
		t.Fatalf("conc after old requests finished: remaining %d, want 19", d.Remaining)
	}
	// The old set keeps deciding with its old state while s2 is compiled.
	if d := byID(s1, "tb").local.TakeHash(h, 1, clk.now()); d.Remaining != 4 {
		t.Fatalf("old tb disturbed: remaining %d, want 4", d.Remaining)
	}
	s1.Retire(s2)
	if clusters[0].closed.Load() || !clusters[1].closed.Load() {
		t.Fatalf("retire closed cl=%v cl-gone=%v; want only cl-gone", clusters[0].closed.Load(), clusters[1].closed.Load())
	}
	// A key change starts fresh.
	tb3 := tb2
	tb3.Key = []string{"ip", "route"}
	s3 := mustCompile(t, limitsOf(tb3), s2, opts)
	h3 := byID(s3, "tb").key.Hash(viewOf(get("/"), info))
	if d := byID(s3, "tb").local.TakeHash(h3, 1, clk.now()); d.Remaining != 19 {
		t.Fatalf("tb with new key: remaining %d, want 19", d.Remaining)
	}
	s2.Retire(s3)
	if clusters[0].closed.Load() != true {
		t.Fatal("cl not closed once dropped")
	}
}

func TestCarryScalesEveryAlgorithm(t *testing.T) {
	t.Parallel()
	// Half full at capacity 10 must be half full at capacity 20.
	for _, alg := range []api.Algorithm{api.TokenBucket, api.LeakyBucket, api.FixedWindow, api.SlidingWindow} {
		for _, to := range []api.Algorithm{api.TokenBucket, api.FixedWindow, api.SlidingWindow, api.LeakyBucket} {
			t.Run(string(alg)+"→"+string(to), func(t *testing.T) {
				old, err := newParams(api.Limit{Algorithm: alg, Rate: 10, Period: api.Duration(time.Hour), MaxDelay: api.Duration(time.Hour)})
				if err != nil {
					t.Fatal(err)
				}
				p, err := newParams(api.Limit{Algorithm: to, Rate: 20, Period: api.Duration(2 * time.Hour), MaxDelay: api.Duration(time.Hour)})
				if err != nil {
					t.Fatal(err)
				}
				var a, b int64
				for range 5 {
					a, b, _ = old.take(a, b, t0, 1)
				}
				na, nb, ok := p.carry(&old, a, b, t0)
				if !ok {
					t.Fatal("fill not carried")
				}
				_, _, d := p.take(na, nb, t0, 10)
				if !d.Allowed || d.Remaining != 0 {
					t.Fatalf("after carry, 10 of 20 should remain: %+v", d)
				}
				if _, _, d := p.take(na, nb, t0, 11); d.Allowed {
					t.Fatalf("after carry, 11 should not fit: %+v", d)
				}
			})
		}
	}
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	_, err := Compile(normalized(limitsOf(
		api.Limit{ID: "a", Algorithm: api.TokenBucket, Rate: 1},
		api.Limit{ID: "b", Algorithm: api.TokenBucket, Rate: 1, Scope: api.ScopeCluster},
	)), nil, Options{SweepInterval: -1})
	if err == nil || err.Error() != "limits[1]: scope cluster needs --redis on this node" {
		t.Fatalf("err = %v", err)
	}
}

func TestSetSweeper(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := mustCompile(t, limitsOf(api.Limit{ID: "tb", Key: []string{"ip"}, Algorithm: api.TokenBucket, Rate: 1}), nil, Options{Now: clk.now, SweepInterval: time.Millisecond})
	admit(s, get("/"), ipInfo("192.0.2.1"))
	if n := s.rules[0].local.Len(); n != 1 {
		t.Fatalf("%d keys, want 1", n)
	}
	clk.add(time.Second) // the bucket is full again: the key is idle
	deadline := time.Now().Add(10 * time.Second)
	for s.rules[0].local.Len() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("sweeper did not forget the idle key")
		}
		time.Sleep(time.Millisecond)
	}
	s.Close()
	s.Close() // idempotent
}

// storeLimiter is a cluster limiter whose store fails or answers as told:
// function fields, no store behind it.
type storeLimiter struct {
	take    func() (Decision, error)
	refunds atomic.Int64
}

func (l *storeLimiter) Take(context.Context, string, int64, int64) (Decision, error) { return l.take() }
func (l *storeLimiter) Refund(context.Context, string, int64, int64)                 { l.refunds.Add(1) }

// TestNoRefundToAFailedStore: a cluster limit whose store failed admitted by
// its failure policy; when a later limit rejects the request, nothing is
// refunded to the store, which never took the units (a refund would hand it
// units it never gave). One the store really admitted is refunded.
func TestNoRefundToAFailedStore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc        string
		err         error
		wantRefunds int64
	}{
		{desc: "store failed, policy allowed", err: errors.New("redis call: i/o timeout"), wantRefunds: 0},
		{desc: "store admitted", err: nil, wantRefunds: 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			clk := newClock()
			cl := &storeLimiter{take: func() (Decision, error) { return Decision{Allowed: true, Limit: 10, Remaining: 5}, tc.err }}
			s := mustCompile(t, limitsOf(
				api.Limit{ID: "shared", Algorithm: api.TokenBucket, Rate: 10, Scope: api.ScopeCluster},
				api.Limit{ID: "local", Algorithm: api.FixedWindow, Rate: 1, Period: api.Duration(time.Hour)},
			), nil, clk.opts(Options{Cluster: func(api.Limit) (Limiter, error) { return cl, nil }}))
			info := ipInfo("192.0.2.1")
			if _, _, ok := admit(s, get("/"), info); !ok {
				t.Fatal("first request rejected")
			}
			if w, _, ok := admit(s, get("/"), info); ok || !strings.Contains(w.Body.String(), `"rule":"local"`) {
				t.Fatalf("second request: ok=%v %s, want rejection by local", ok, w.Body)
			}
			if got := cl.refunds.Load(); got != tc.wantRefunds {
				t.Fatalf("%d refunds to the store, want %d", got, tc.wantRefunds)
			}
		})
	}
}

// takerRecorder is a ResponseWriter that takes the RateLimit fields by
// value, as the fasthttp engine's exchange does.
type takerRecorder struct {
	*httptest.ResponseRecorder
	f     Fields
	taken int
}

func (r *takerRecorder) TakeRateLimit(f Fields) { r.f, r.taken = f, r.taken+1 }

// TestFieldsAppend: the values a taker formats (Fields.Append) are the
// ones the Header map gets, for a limit with a window and a concurrency
// limit (no w, no t), and admitting allocates nothing for a taker.
func TestFieldsAppend(t *testing.T) {
	// Not parallel: AllocsPerRun.
	clk := newClock()
	s := mustCompile(t, limitsOf(
		api.Limit{ID: "orders-per-ip", Routes: []string{"orders"}, Key: []string{"ip"}, Algorithm: api.TokenBucket, Rate: 10, Period: api.Duration(time.Minute), Burst: 2},
		api.Limit{ID: "inflight", Routes: []string{"conc"}, Key: []string{"ip"}, Algorithm: api.Concurrency, Rate: 3},
		api.Limit{ID: "wide", Routes: []string{"wide"}, Key: []string{"ip"}, Algorithm: api.Concurrency, Rate: 123456789},
	), nil, clk.opts(Options{}))
	info := ipInfo("192.0.2.1")
	for _, tc := range []struct {
		route string
		want  [5]string
	}{
		{"orders", [5]string{`"orders-per-ip";q=10;w=60`, `"orders-per-ip";r=1;t=6`, "10", "1", "6"}},
		{"conc", [5]string{`"inflight";q=3`, `"inflight";r=2`, "3", "2", "0"}},
		{"wide", [5]string{`"wide";q=123456789`, `"wide";r=123456788`, "123456789", "123456788", "0"}},
	} {
		w := &takerRecorder{ResponseRecorder: httptest.NewRecorder()}
		done, ok := s.Chain(tc.route).Admit(w, get("/"), info)
		if !ok || w.taken != 1 {
			t.Fatalf("%s: admitted %v, fields taken %d times, want once", tc.route, ok, w.taken)
		}
		if len(w.Header()) != 0 {
			t.Errorf("%s: a taker's Header map got %v", tc.route, w.Header())
		}
		b, ends := w.f.Append([]byte("prefix"))
		start := len("prefix")
		for i, name := range answer.RateLimitNames {
			if got := string(b[start:ends[i]]); got != tc.want[i] {
				t.Errorf("%s: %s = %q, want %q", tc.route, name, got, tc.want[i])
			}
			start = ends[i]
		}
		h := http.Header{}
		setHeaders(h, w.f.ru, w.f.d)
		for i, name := range answer.RateLimitNames {
			if got := h.Get(name); got != tc.want[i] {
				t.Errorf("%s: map %s = %q, want %q", tc.route, name, got, tc.want[i])
			}
		}
		done()
	}
	big := mustCompile(t, limitsOf(api.Limit{ID: "big", Key: []string{"ip"}, Algorithm: api.TokenBucket, Rate: 1e9, Period: api.Duration(time.Second), Burst: 1e9}), nil, clk.opts(Options{}))
	w := &takerRecorder{ResponseRecorder: httptest.NewRecorder()}
	ch, r := big.Chain("orders"), get("/")
	if n := testing.AllocsPerRun(100, func() {
		if _, ok := ch.Admit(w, r, info); !ok {
			t.Fatal("rejected")
		}
	}); n != 0 {
		t.Errorf("admitting with a taker allocates %v times, want 0", n)
	}
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { buf, _ = w.f.Append(buf[:0]) }); n != 0 {
		t.Errorf("Fields.Append allocates %v times, want 0", n)
	}
}
