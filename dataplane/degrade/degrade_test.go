package degrade

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/dataplane/reqview"
)

const sec = int64(time.Second)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// autoRule: window 1s; level1 at qps > 100 or success < 0.9; level2 at qps >
// 200 or success < 0.5; recoverAfter 2.
func autoRule(mod func(*api.Degrade)) api.Degrade {
	d := api.Degrade{
		ID: "d", Routes: []string{"r"}, Mode: api.DegradeAuto, Window: api.Duration(time.Second),
		Triggers: &api.DegradeTriggers{
			Level1: &api.Trigger{QPSAbove: 100, SuccessRateBelow: 0.9},
			Level2: &api.Trigger{QPSAbove: 200, SuccessRateBelow: 0.5},
		},
		RecoverAfter: 2,
		Fallback: &api.DegradeFallback{HTML: "<p>busy</p>", JSON: api.RawJSON(`{"code":5031}`),
			RetryAfter: api.Duration(30 * time.Second)},
	}
	if mod != nil {
		mod(&d)
	}
	return d
}

type clock struct{ now int64 }

func (c *clock) Now() int64 { return c.now }

// validated returns rules as Compile takes them: the degrade rules of a rule
// set with the routes routeIDs that api.Validated accepted, normalized.
func validated(rules []api.Degrade, routeIDs ...string) ([]api.Degrade, error) {
	rs := &api.RuleSet{Namespace: "t", Degrades: rules}
	for _, id := range routeIDs {
		rs.Routes = append(rs.Routes, api.Route{ID: id, Upstream: api.Upstream{Targets: []api.Target{{URL: "http://127.0.0.1:1"}}}})
	}
	v, err := api.Validated(rs)
	if err != nil {
		return nil, err
	}
	return v.Rules().Degrades, nil
}

func MustCompile(tb testing.TB, rules []api.Degrade, prev *Set, opts Options) *Set {
	tb.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	rules, err := validated(rules, "r", "s")
	if err != nil {
		tb.Fatalf("Validated: %v", err)
	}
	s, err := Compile(rules, []string{"r", "s"}, prev, opts)
	if err != nil {
		tb.Fatalf("Compile: %v", err)
	}
	return s
}

// window drives window idx of c: arrivals requests, of which the first
// recorded are forwarded and failed of those fail. It returns the level
// in force at the start of the next window.
func window(c *Controller, idx int64, arrivals, recorded, failed int) int {
	base := 1000*sec + idx*c.windowNs
	for i := range arrivals {
		c.Admit(uint64(i)*0x9e3779b97f4a7c15, base+int64(i))
	}
	for i := range recorded {
		c.Record(base+int64(i), i >= failed)
	}
	next := base + c.windowNs
	c.Record(next, true) // opens the next window (and is counted in it; harmless for these tests)
	return c.Level(next)
}

func TestAutoSteps(t *testing.T) {
	t.Parallel()
	type win struct{ arrivals, recorded, failed, want int }
	tests := []struct {
		desc string
		wins []win
	}{
		{"quiet stays 0", []win{{50, 50, 0, 0}, {100, 100, 5, 0}}},
		{"qps steps up to 1", []win{{150, 0, 0, 1}}},
		{"success rate steps up to 1", []win{{50, 50, 8, 1}}},
		{"qps level 2", []win{{250, 0, 0, 2}}},
		{"success rate level 2", []win{{50, 50, 30, 2}}},
		{"level 2 wins over level 1", []win{{150, 20, 15, 2}}},
		{"too few samples for success rate", []win{{9, 9, 9, 0}}},
		{"step down after recoverAfter healthy windows",
			[]win{{250, 0, 0, 2}, {10, 10, 0, 2}, {10, 10, 0, 1}, {10, 10, 0, 1}, {10, 10, 0, 0}}},
		{"a window at the level restarts the count",
			[]win{{150, 0, 0, 1}, {10, 0, 0, 1}, {150, 0, 0, 1}, {10, 0, 0, 1}, {10, 0, 0, 0}}},
		{"level 1 window while at 2 is healthy for 2",
			[]win{{250, 0, 0, 2}, {150, 0, 0, 2}, {150, 0, 0, 1}, {150, 0, 0, 1}}},
		{"step up from 1 to 2", []win{{150, 0, 0, 1}, {250, 0, 0, 2}}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			c := MustCompile(t, []api.Degrade{autoRule(nil)}, nil, Options{}).ForRoute("r")
			for i, w := range tc.wins {
				if got := window(c, int64(i), w.arrivals, w.recorded, w.failed); got != w.want {
					t.Fatalf("after window %d %+v: level %d, want %d", i, w, got, w.want)
				}
			}
		})
	}
}

func TestFlapping(t *testing.T) {
	t.Parallel()
	c := MustCompile(t, []api.Degrade{autoRule(nil)}, nil, Options{}).ForRoute("r")
	idx := int64(0)
	run := func(arrivals int, want int) {
		t.Helper()
		if got := window(c, idx, arrivals, 0, 0); got != want {
			t.Fatalf("window %d (%d arrivals): level %d, want %d", idx, arrivals, got, want)
		}
		idx++
	}
	run(150, 1)
	run(10, 1)
	run(10, 0) // stepped down at window 2
	if c.ra.Load() != 2 {
		t.Fatalf("recoverAfter = %d before any flap", c.ra.Load())
	}
	run(150, 1) // back up one window later: a flap
	if c.ra.Load() != 4 {
		t.Fatalf("recoverAfter after a flap = %d, want 4", c.ra.Load())
	}
	for range 3 {
		run(10, 1) // 4 healthy windows now needed
	}
	run(10, 0)
	run(150, 1) // flaps again: 8
	if c.ra.Load() != 8 {
		t.Fatalf("recoverAfter after a second flap = %d, want 8", c.ra.Load())
	}
	for range 7 {
		run(10, 1)
	}
	run(10, 0)
	// Relaxing: 2×8 quiet windows halve it to 4, then 2×4 more to 2.
	for range 14 {
		run(10, 0) // the step-down window was the first quiet one
	}
	if c.ra.Load() != 8 {
		t.Fatalf("relaxed too early: %d", c.ra.Load())
	}
	run(10, 0)
	if c.ra.Load() != 4 {
		t.Fatalf("recoverAfter after 16 quiet windows = %d, want 4", c.ra.Load())
	}
	for range 8 {
		run(10, 0)
	}
	if c.ra.Load() != 2 {
		t.Fatalf("recoverAfter after relaxing = %d, want 2 (the rule's)", c.ra.Load())
	}
	// A step up long after the last step down is not a flap.
	run(150, 1)
	if c.ra.Load() != 2 {
		t.Fatalf("late step up counted as a flap: %d", c.ra.Load())
	}
}

func TestFlapCap(t *testing.T) {
	t.Parallel()
	c := MustCompile(t, []api.Degrade{autoRule(func(d *api.Degrade) { d.RecoverAfter = 1 })}, nil, Options{}).ForRoute("r")
	idx := int64(0)
	for range 20 {
		window(c, idx, 150, 0, 0)
		idx++
		for c.level.Load() != 0 {
			window(c, idx, 10, 0, 0)
			idx++
		}
	}
	if got := c.ra.Load(); got != MaxRecoverFactor {
		t.Fatalf("recoverAfter after many flaps = %d, want cap %d", got, MaxRecoverFactor)
	}
}

func TestIdleRecovers(t *testing.T) {
	t.Parallel()
	c := MustCompile(t, []api.Degrade{autoRule(nil)}, nil, Options{}).ForRoute("r")
	if got := window(c, 0, 250, 0, 0); got != 2 {
		t.Fatalf("level %d, want 2", got)
	}
	// Long silence: idle windows are healthy.
	now := 1000*sec + 100*sec
	if shed, lvl := c.Admit(1, now); shed || lvl != 0 {
		t.Fatalf("after 100 idle windows: shed %v level %d", shed, lvl)
	}
}

func TestManualAndOverride(t *testing.T) {
	t.Parallel()
	clk := &clock{now: 1000 * sec}
	m := metrics.New()
	s := MustCompile(t, []api.Degrade{
		{ID: "m", Routes: []string{"r"}, Mode: api.DegradeManual, Level: 2},
		autoRule(func(d *api.Degrade) { d.Routes = []string{"s"} }),
	}, nil, Options{Now: clk.Now, Metrics: m})
	mc, ac := s.ForRoute("r"), s.ForRoute("s")
	if shed, lvl := mc.Admit(1, clk.now); !shed || lvl != 2 {
		t.Fatalf("manual level 2: shed %v level %d", shed, lvl)
	}
	if got := testutil.ToFloat64(m.DegradeLevel.WithLabelValues("m")); got != 2 {
		t.Fatalf("gauge = %v", got)
	}
	// Manual windows do not move the level.
	if got := window(mc, 0, 1000, 0, 0); got != 2 {
		t.Fatalf("manual level moved to %d", got)
	}
	clk.now = 2000 * sec
	if err := s.SetOverrideFor("m", 0, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if shed, lvl := mc.Admit(1, clk.now+9*sec); shed || lvl != 0 {
		t.Fatalf("override 0: shed %v level %d", shed, lvl)
	}
	if err := s.SetOverride("d", 2, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if shed, lvl := ac.Admit(1, clk.now+59*sec); !shed || lvl != 2 {
		t.Fatalf("override 2 on auto: shed %v level %d", shed, lvl)
	}
	if got := ac.RetryAfter(clk.now + 59*sec); got != 30*time.Second {
		t.Fatalf("RetryAfter with a configured value = %s", got)
	}
	if got := testutil.ToFloat64(m.DegradeTransitions.WithLabelValues("d", "0", "2")); got != 1 {
		t.Fatalf("override transition counted %v times", got)
	}
	// Expiry, by itself.
	if shed, lvl := mc.Admit(1, clk.now+10*sec); !shed || lvl != 2 {
		t.Fatalf("after override expiry: shed %v level %d, want the manual 2", shed, lvl)
	}
	if mc.ov.Load() != 0 {
		t.Fatal("expired override not cleared")
	}
	if got := testutil.ToFloat64(m.DegradeTransitions.WithLabelValues("m", "0", "2")); got != 1 {
		t.Fatalf("expiry transition counted %v times", got)
	}
	if err := s.ClearOverride("d"); err != nil || ac.Level(clk.now+sec) != 0 {
		t.Fatalf("ClearOverride: %v, level %d", err, ac.Level(clk.now+sec))
	}

	for _, tc := range []struct {
		desc  string
		err   error
		apply func() error
	}{
		{"unknown rule", ErrUnknownRule, func() error { return s.SetOverrideFor("nope", 1, time.Minute) }},
		{"level 3", ErrBadLevel, func() error { return s.SetOverrideFor("m", 3, time.Minute) }},
		{"level -1", ErrBadLevel, func() error { return s.SetOverrideFor("m", -1, time.Minute) }},
		{"zero ttl", ErrBadTTL, func() error { return s.SetOverrideFor("m", 1, 0) }},
		{"past", ErrBadTTL, func() error { return s.SetOverride("m", 1, time.Now().Add(-time.Second)) }},
		{"too long", ErrBadTTL, func() error { return s.SetOverrideFor("m", 1, MaxOverrideTTL+time.Second) }},
	} {
		if err := tc.apply(); !errors.Is(err, tc.err) {
			t.Errorf("%s: err %v, want %v", tc.desc, err, tc.err)
		}
	}
}

func TestConsistentShedding(t *testing.T) {
	t.Parallel()
	mk := func(id string, ratio float64) *Controller {
		return MustCompile(t, []api.Degrade{{ID: id, Mode: api.DegradeManual, Level: 1, Level1ShedRatio: ratio}},
			nil, Options{}).ForRoute("r")
	}
	for _, ratio := range []float64{0.1, 0.5, 0.9, 1} {
		c := mk("d", ratio)
		const clients = 20000
		shed := 0
		r := httptest.NewRequest("GET", "/", nil)
		for i := range clients {
			ip := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
			k := c.KeyHash(viewOf(r, ip))
			first, _ := c.Admit(k, 1000*sec)
			for j := range 3 {
				if again, _ := c.Admit(k, 1000*sec+int64(j)); again != first {
					t.Fatalf("client %v flipped", ip)
				}
			}
			if first {
				shed++
			}
		}
		if got := float64(shed) / clients; math.Abs(got-ratio) > 0.015 {
			t.Fatalf("ratio %v: shed %.4f of clients", ratio, got)
		}
	}
	// Another rule (seed) sheds a different half.
	a, b := mk("a", 0.5), mk("b", 0.5)
	same := 0
	for i := range 1000 {
		sa, _ := a.Admit(uint64(i), 0)
		sb, _ := b.Admit(uint64(i), 0)
		if sa == sb {
			same++
		}
	}
	if same > 600 || same < 400 {
		t.Fatalf("rules a and b agree on %d of 1000 clients; seeds look shared", same)
	}
}

// viewOf is the request view of r from the client ip on route "r".
func viewOf(r *http.Request, ip netip.Addr) *reqview.View {
	v := reqview.FromRequest(r)
	v.ClientIP, v.RouteID = ip, "r"
	return &v
}

func TestKeyHash(t *testing.T) {
	mk := func(key ...string) *Controller {
		return MustCompile(t, []api.Degrade{{ID: "d", Mode: api.DegradeManual, Key: key}}, nil, Options{}).ForRoute("r")
	}
	ip1, ip2 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	req := func(target string, hdr ...string) *http.Request {
		r := httptest.NewRequest("GET", target, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Add(hdr[i], hdr[i+1])
		}
		return r
	}
	tests := []struct {
		desc string
		key  []string
		a, b *http.Request
		ipA  netip.Addr
		ipB  netip.Addr
		same bool
	}{
		{"ip differs", nil, req("/"), req("/"), ip1, ip2, false},
		{"ip same", nil, req("/x"), req("/y"), ip1, ip1, true},
		{"header differs", []string{"header:x-user"}, req("/", "X-User", "a"), req("/", "X-User", "b"), ip1, ip1, false},
		{"header same, ip ignored", []string{"header:X-User"}, req("/", "X-User", "a"), req("/", "X-User", "a"), ip1, ip2, true},
		{"query", []string{"query:u"}, req("/?u=1&v=2"), req("/?v=2&u=2"), ip1, ip1, false},
		{"query same", []string{"query:u"}, req("/?u=1&v=2"), req("/?v=3&u=1"), ip1, ip1, true},
		{"query respelled is one client", []string{"query:u"}, req("/?u=al%69ce"), req("/?u=alice"), ip1, ip1, true},
		{"ipv6 clients of one /64 are one client", nil, req("/"), req("/"), netip.MustParseAddr("2001:db8:1:2::1"), netip.MustParseAddr("2001:db8:1:2::ff"), true},
		{"ipv6 clients of two /64s", nil, req("/"), req("/"), netip.MustParseAddr("2001:db8:1:2::1"), netip.MustParseAddr("2001:db8:1:3::1"), false},
		{"cookie", []string{"cookie:sid"}, req("/", "Cookie", "a=1; sid=x"), req("/", "Cookie", "sid=y"), ip1, ip1, false},
		{"cookie same", []string{"cookie:sid"}, req("/", "Cookie", "a=1; sid=x"), req("/", "Cookie", "sid=x; b=2"), ip1, ip1, true},
		{"composite", []string{"ip", "header:X-User"}, req("/", "X-User", "a"), req("/", "X-User", "a"), ip1, ip2, false},
		{"global", []string{"global"}, req("/a"), req("/b"), ip1, ip2, true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			c := mk(tc.key...)
			ha, hb := c.KeyHash(viewOf(tc.a, tc.ipA)), c.KeyHash(viewOf(tc.b, tc.ipB))
			if (ha == hb) != tc.same {
				t.Fatalf("hashes %x %x, same=%v want %v", ha, hb, ha == hb, tc.same)
			}
		})
	}
	c := mk("ip", "header:X-User", "query:u", "cookie:sid")
	r := req("/?u=1", "X-User", "a", "Cookie", "sid=x")
	v := viewOf(r, ip1)
	if n := testing.AllocsPerRun(100, func() { c.KeyHash(v) }); n != 0 {
		t.Fatalf("KeyHash allocates %v times", n)
	}
}

func TestNegotiate(t *testing.T) {
	t.Parallel()
	const firefox = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	tests := []struct {
		desc          string
		accept        string
		html, js      bool
		want          bodyKind
		wantCT, wantB string
	}{
		{"browser", firefox, true, true, bodyHTML, "text/html; charset=utf-8", "<p>busy</p>"},
		{"api client", "application/json", true, true, bodyJSON, "application/json", `{"code":5031}`},
		{"curl */*", "*/*", true, true, bodyJSON, "application/json", `{"code":5031}`},
		{"no accept", "", true, true, bodyJSON, "application/json", `{"code":5031}`},
		{"*/* and only html", "*/*", true, false, bodyNone, "", ""},
		{"browser and only json", firefox, false, true, bodyJSON, "application/json", `{"code":5031}`},
		{"json preferred by q", "text/html;q=0.5, application/json", true, true, bodyJSON, "application/json", `{"code":5031}`},
		{"html preferred by q", "application/json;q=0.4, text/html", true, true, bodyHTML, "text/html; charset=utf-8", "<p>busy</p>"},
		{"equal q, first listed", "application/json, text/html", true, true, bodyJSON, "application/json", `{"code":5031}`},
		{"text/* is html", "text/*", true, true, bodyHTML, "text/html; charset=utf-8", "<p>busy</p>"},
		{"application/*", "application/*", true, true, bodyJSON, "application/json", `{"code":5031}`},
		{"json refused", "application/json;q=0", true, true, bodyNone, "", ""},
		{"specific q=0 beats wildcard", "application/json;q=0, */*", true, true, bodyNone, "", ""},
		{"plain text", "text/plain", true, true, bodyNone, "", ""},
		{"image", "image/png", true, true, bodyNone, "", ""},
		{"nothing configured", firefox, false, false, bodyNone, "", ""},
		{"case and spaces", " Text/HTML ; Q=1 ", true, true, bodyHTML, "text/html; charset=utf-8", "<p>busy</p>"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := negotiate(tc.accept, tc.html, tc.js); got != tc.want {
				t.Fatalf("negotiate(%q) = %d, want %d", tc.accept, got, tc.want)
			}
			fb := &api.DegradeFallback{RetryAfter: api.Duration(time.Second)}
			if tc.html {
				fb.HTML = "<p>busy</p>"
			}
			if tc.js {
				fb.JSON = api.RawJSON(`{"code":5031}`)
			}
			c := MustCompile(t, []api.Degrade{{ID: "d", Mode: api.DegradeManual, Level: 2, Fallback: fb}}, nil, Options{}).ForRoute("r")
			r := httptest.NewRequest("GET", "/", nil)
			if tc.accept != "" {
				r.Header.Set("Accept", tc.accept)
			}
			rec := httptest.NewRecorder()
			c.WriteFallback(rec, r, 1000*sec)
			if rec.Code != 503 || rec.Header().Get("Retry-After") != "1" || rec.Header().Get("Vary") != "Accept" ||
				rec.Header().Get("Content-Type") != tc.wantCT || rec.Body.String() != tc.wantB {
				t.Fatalf("got %d RA=%q CT=%q body=%q", rec.Code, rec.Header().Get("Retry-After"),
					rec.Header().Get("Content-Type"), rec.Body.String())
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	clk := &clock{now: 1000 * sec}
	s := MustCompile(t, []api.Degrade{autoRule(func(d *api.Degrade) { d.Fallback.RetryAfter = 0; d.Window = api.Duration(3 * time.Second) })},
		nil, Options{Now: clk.Now})
	c := s.ForRoute("r")
	if got := c.RetryAfter(clk.now); got != 6*time.Second {
		t.Fatalf("auto RetryAfter = %s, want window × recoverAfter = 6s", got)
	}
	_ = s.SetOverrideFor("d", 2, 90*time.Second+time.Millisecond)
	if got := c.RetryAfter(clk.now); got != 91*time.Second {
		t.Fatalf("override RetryAfter = %s, want 91s", got)
	}
}

func TestHotSwap(t *testing.T) {
	t.Parallel()
	clk := &clock{now: 1000 * sec}
	m := metrics.New()
	opts := Options{Now: clk.Now, Metrics: m}
	manual := api.Degrade{ID: "m", Routes: []string{"s"}, Mode: api.DegradeManual, Level: 1}
	s1 := MustCompile(t, []api.Degrade{autoRule(nil), manual}, nil, opts)
	c1 := s1.ForRoute("r")
	window(c1, 0, 250, 0, 0) // auto level 2
	if err := s1.SetOverrideFor("m", 0, time.Hour); err != nil {
		t.Fatal(err)
	}
	clk.now = 1001*sec + 1

	// Unchanged (defaults spelled out): same controller, same level.
	same := autoRule(func(d *api.Degrade) { d.Key = []string{"ip"}; d.Level1ShedRatio = 0.5 })
	s2 := MustCompile(t, []api.Degrade{same, manual}, s1, opts)
	s1.Retire(s2)
	if s2.ForRoute("r") != c1 || s2.ForRoute("r").Level(clk.now) != 2 {
		t.Fatal("unchanged rule lost its level")
	}
	if s2.ForRoute("s").Level(clk.now) != 0 {
		t.Fatal("override lost across an unchanged swap")
	}

	// Changed: fresh controller at 0; the override of the changed manual rule stays.
	changedAuto := autoRule(func(d *api.Degrade) { d.RecoverAfter = 3 })
	changedManual := manual
	changedManual.Level = 2
	s3 := MustCompile(t, []api.Degrade{changedAuto, changedManual}, s2, opts)
	s2.Retire(s3)
	if c := s3.ForRoute("r"); c == c1 || c.Level(clk.now) != 0 {
		t.Fatal("changed rule kept its state")
	}
	if got := testutil.ToFloat64(m.DegradeLevel.WithLabelValues("d")); got != 0 {
		t.Fatalf("gauge after changed swap = %v", got)
	}
	if s3.ForRoute("s").Level(clk.now) != 0 {
		t.Fatal("override lost across a changed swap")
	}
	// An override set on the old set after the swap still lands.
	if err := s2.SetOverrideFor("d", 1, time.Minute); err != nil || s3.ForRoute("r").Level(clk.now) != 1 {
		t.Fatalf("override through the old set: %v", err)
	}

	// Removed: the override goes with the rule and does not come back.
	s4 := MustCompile(t, []api.Degrade{changedAuto}, s3, opts)
	s3.Retire(s4)
	s5 := MustCompile(t, []api.Degrade{changedAuto, changedManual}, s4, opts)
	s4.Retire(s5)
	if s5.ForRoute("s").Level(clk.now) != 2 {
		t.Fatal("override of a removed rule came back")
	}
}

// TestCompileErrors checks that the rules Compile cannot serve are refused
// before it, by api.Validated (the one validation; Compile trusts its output).
func TestCompileErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc  string
		rules []api.Degrade
		want  string
	}{
		{"unknown route", []api.Degrade{autoRule(func(d *api.Degrade) { d.Routes = []string{"x"} })}, `route "x", which does not exist`},
		{"route twice", []api.Degrade{autoRule(nil), autoRule(func(d *api.Degrade) { d.ID = "e" })}, "already covered"},
		{"bad key", []api.Degrade{autoRule(func(d *api.Degrade) { d.Key = []string{"nose"} })}, "key"},
		{"bad mode", []api.Degrade{autoRule(func(d *api.Degrade) { d.Mode = "sometimes" })}, "mode"},
		{"bad level", []api.Degrade{{ID: "m", Mode: api.DegradeManual, Level: 3}}, "must be 0, 1 or 2"},
		{"shed ratio", []api.Degrade{autoRule(func(d *api.Degrade) { d.Level1ShedRatio = 1.5 })}, "level1ShedRatio"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := validated(tc.rules, "r", "s")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestAdminHandlers(t *testing.T) {
	t.Parallel()
	clk := &clock{now: 1000 * sec}
	s := MustCompile(t, []api.Degrade{autoRule(nil)}, nil, Options{Now: clk.Now})
	hs := Handlers(func() *Set { return s })
	post := func(body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		hs["POST /degrade"].ServeHTTP(rec, httptest.NewRequest("POST", "/degrade", strings.NewReader(body)))
		return rec
	}
	bad := []struct{ desc, body string }{
		{"unknown rule", `{"rule":"nope","level":1,"ttl":"1m"}`},
		{"level 3", `{"rule":"d","level":3,"ttl":"1m"}`},
		{"level -1", `{"rule":"d","level":-1,"ttl":"1m"}`},
		{"level missing", `{"rule":"d","ttl":"1m"}`},
		{"level not a number", `{"rule":"d","level":"1","ttl":"1m"}`},
		{"ttl missing", `{"rule":"d","level":1}`},
		{"ttl malformed", `{"rule":"d","level":1,"ttl":"soon"}`},
		{"ttl negative", `{"rule":"d","level":1,"ttl":"-1m"}`},
		{"ttl zero", `{"rule":"d","level":1,"ttl":"0s"}`},
		{"ttl too long", `{"rule":"d","level":1,"ttl":"10000h"}`},
		{"ttl a number", `{"rule":"d","level":1,"ttl":60}`},
		{"unknown field", `{"rule":"d","level":1,"ttl":"1m","force":true}`},
		{"not json", `level=1`},
		{"two objects", `{"rule":"d","level":1,"ttl":"1m"}{}`},
		{"empty", ``},
	}
	for _, tc := range bad {
		t.Run(tc.desc, func(t *testing.T) {
			rec := post(tc.body)
			if rec.Code != http.StatusBadRequest || rec.Header().Get("Content-Type") != api.ContentTypeProblemJSON {
				t.Fatalf("%s → %d %s: %s", tc.body, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
			}
		})
	}
	if s.ForRoute("r").ov.Load() != 0 {
		t.Fatal("a refused override was applied")
	}
	rec := post(`{"rule":"d","level":2,"ttl":"30s"}`)
	var st Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || rec.Code != 200 || st.Level != 2 || st.Override == nil {
		t.Fatalf("%d %v %+v", rec.Code, err, st)
	}
	clk.now += 31 * sec
	rec = httptest.NewRecorder()
	hs["GET /degrades"].ServeHTTP(rec, httptest.NewRequest("GET", "/degrades", nil))
	var list struct{ Degrades []Status }
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || len(list.Degrades) != 1 {
		t.Fatalf("%v %s", err, rec.Body)
	}
	if d := list.Degrades[0]; d.Level != 0 || d.Override != nil || d.Mode != "auto" || d.Rule != "d" {
		t.Fatalf("after expiry: %+v", d)
	}
	// No rules applied yet.
	none := Handlers(func() *Set { return nil })
	rec = httptest.NewRecorder()
	none["POST /degrade"].ServeHTTP(rec, httptest.NewRequest("POST", "/degrade", strings.NewReader(`{"rule":"d","level":1,"ttl":"1m"}`)))
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("no rules: %d", rec.Code)
	}
}

func TestShedMetricsAndLogBudget(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	c := MustCompile(t, []api.Degrade{{ID: "m", Mode: api.DegradeManual, Level: 2}}, nil, Options{Metrics: m}).ForRoute("r")
	now := 1000 * sec
	for range 100 {
		c.Admit(1, now) // all at one instant: the burst passes, the rest is dropped
	}
	if got := testutil.ToFloat64(m.DegradeShed.WithLabelValues("m")); got != 100 {
		t.Fatalf("shed counted %v", got)
	}
	if got := testutil.ToFloat64(m.LogsDropped); got != 100-ShedLogBurst {
		t.Fatalf("log lines dropped %v, want %d", got, 100-ShedLogBurst)
	}
	// One second later the bucket refilled ShedLogRate lines.
	for range 100 {
		c.Admit(1, now+sec)
	}
	if got := testutil.ToFloat64(m.LogsDropped); got != 200-ShedLogBurst-ShedLogRate {
		t.Fatalf("log lines dropped %v after refill", got)
	}
}

func TestHealthyPathAllocs(t *testing.T) {
	c := MustCompile(t, []api.Degrade{autoRule(nil)}, nil, Options{}).ForRoute("r")
	now := 1000 * sec
	if n := testing.AllocsPerRun(1000, func() {
		now += int64(time.Millisecond)
		if shed, _ := c.Admit(42, now); !shed {
			c.Record(now, true)
		}
	}); n != 0 {
		t.Fatalf("Admit+Record allocates %v times", n)
	}
}
