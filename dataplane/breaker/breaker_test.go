package breaker

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/metrics"
)

const (
	ms  = int64(time.Millisecond)
	sec = int64(time.Second)
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testRule is a breaker on route "r": window 10s, minRequests 10, errorRatio
// 0.5, openFor 5s up to 20s, 3 probes.
func testRule(mod func(*api.Breaker)) api.Breaker {
	b := api.Breaker{
		ID: "b", Routes: []string{"r"}, Window: api.Duration(10 * time.Second), MinRequests: 10,
		ErrorRatio: 0.5, OpenFor: api.Duration(5 * time.Second), MaxOpenFor: api.Duration(20 * time.Second),
		HalfOpenProbes: 3,
	}
	if mod != nil {
		mod(&b)
	}
	return b
}

// validated returns rules as Compile takes them: the breakers of a rule set
// with routes r and s that api.Validated accepted, normalized.
func validated(rules []api.Breaker) ([]api.Breaker, error) {
	rs := &api.RuleSet{Namespace: "t", Breakers: rules}
	for _, id := range []string{"r", "s"} {
		rs.Routes = append(rs.Routes, api.Route{ID: id, Upstream: api.Upstream{Targets: []api.Target{{URL: "http://127.0.0.1:1"}}}})
	}
	v, err := api.Validated(rs)
	if err != nil {
		return nil, err
	}
	return v.Rules().Breakers, nil
}

func MustCompile(tb testing.TB, rules []api.Breaker, prev *Set, opts Options) *Set {
	tb.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	rules, err := validated(rules)
	if err != nil {
		tb.Fatalf("Validated: %v", err)
	}
	s, err := Compile(rules, []string{"r", "s"}, prev, opts)
	if err != nil {
		tb.Fatalf("Compile: %v", err)
	}
	return s
}

func MustBreaker(tb testing.TB, r api.Breaker) *Breaker {
	tb.Helper()
	b := MustCompile(tb, []api.Breaker{r}, nil, Options{}).ForRoute("r")
	if b == nil {
		tb.Fatal("no breaker for route r")
	}
	return b
}

// call runs one request through b at now and reports whether it was admitted.
func call(b *Breaker, now int64, failed bool, dur time.Duration) bool {
	t, err := b.Allow(now)
	if err != nil {
		return false
	}
	b.Done(t, now, failed, dur)
	return true
}

func TestTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc string
		rule func(*api.Breaker)
		// calls run in order at 1ms steps: 'o' ok, 'f' failed, 's' slow ok.
		calls string
		want  State
	}{
		{"error ratio reached at minRequests", nil, "ooooofffff", Open},
		{"error ratio below threshold", nil, "oooooofffff" + "o", Closed},
		{"error ratio above but under minRequests", nil, "fffffffff", Closed},
		{"min requests reached by a success", nil, "fffffffff" + "o", Open},
		{"slow ratio", func(b *api.Breaker) {
			b.ErrorRatio, b.SlowCallRatio, b.SlowCallDuration = 0, 0.3, api.Duration(100*time.Millisecond)
		}, "ooooooosss", Open},
		{"slow ratio not reached", func(b *api.Breaker) {
			b.ErrorRatio, b.SlowCallRatio, b.SlowCallDuration = 0, 0.3, api.Duration(100*time.Millisecond)
		}, "oooooooossoo", Closed},
		{"slow calls ignored without slowCallRatio", nil, "ssssssssssss", Closed},
		{"consecutive failures, not gated by minRequests", func(b *api.Breaker) {
			b.ErrorRatio, b.ConsecutiveFailures = 0, 3
		}, "offf", Open},
		{"consecutive failures broken by a success", func(b *api.Breaker) {
			b.ErrorRatio, b.ConsecutiveFailures = 0, 3
		}, "ffoffoffo", Closed},
		{"minRequests 0 means the default", func(b *api.Breaker) { b.MinRequests = 0 }, strings.Repeat("f", 19), Closed},
		{"default minRequests reached", func(b *api.Breaker) { b.MinRequests = 0 }, strings.Repeat("f", 20), Open},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			b := MustBreaker(t, testRule(tc.rule))
			now := 1000 * sec
			for _, c := range tc.calls {
				now += ms
				dur := time.Millisecond
				if c == 's' {
					dur = 200 * time.Millisecond
				}
				call(b, now, c == 'f', dur)
			}
			if got := b.State(); got != tc.want {
				t.Fatalf("state after %q = %s, want %s", tc.calls, got, tc.want)
			}
		})
	}
}

func TestWindowRollover(t *testing.T) {
	t.Parallel()
	b := MustBreaker(t, testRule(nil))
	now := 1000 * sec
	// Nine failures, then the window moves on past them.
	for range 9 {
		now += ms
		call(b, now, true, 0)
	}
	now += 10 * sec
	for range 9 {
		now += ms
		call(b, now, false, 0)
	}
	// 1 failure of 10 in the window: closed. Had the old failures counted,
	// 10/19 would have tripped it.
	now += ms
	call(b, now, true, 0)
	if b.State() != Closed {
		t.Fatalf("old failures still counted: %s", b.State())
	}
	// Partial rollover: failures 5s ago still count.
	b = MustBreaker(t, testRule(nil))
	now = 1000 * sec
	for range 5 {
		now += ms
		call(b, now, true, 0)
	}
	now += 5 * sec
	for range 4 {
		now += ms
		call(b, now, false, 0)
	}
	now += ms
	call(b, now, false, 0)
	if b.State() != Open {
		t.Fatalf("5 failures of 10 within the window did not trip: %s", b.State())
	}
}

// tripped returns an open breaker (tripped at 1000s) of rule r.
func tripped(t *testing.T, r api.Breaker) (*Breaker, int64) {
	t.Helper()
	b := MustBreaker(t, r)
	now := 1000 * sec
	for range 10 {
		call(b, now, true, 0)
	}
	if b.State() != Open {
		t.Fatalf("breaker did not trip: %s", b.State())
	}
	return b, now
}

func TestOpenHalfOpenClosed(t *testing.T) {
	t.Parallel()
	b, t0 := tripped(t, testRule(nil))
	if _, err := b.Allow(t0 + 5*sec - 1); !errors.Is(err, ErrOpen) {
		t.Fatalf("Allow just before openFor = %v, want ErrOpen", err)
	}
	if got := b.RetryAfter(t0 + 1500*ms); got != 4*time.Second {
		t.Fatalf("RetryAfter with 3.5s left = %s, want 4s (rounded up)", got)
	}
	now := t0 + 5*sec
	var tickets []Ticket
	for range 3 {
		tk, err := b.Allow(now)
		if err != nil || !tk.Probe() {
			t.Fatalf("probe refused: %v", err)
		}
		tickets = append(tickets, tk)
	}
	if b.State() != HalfOpen {
		t.Fatalf("state = %s, want half-open", b.State())
	}
	if _, err := b.Allow(now); !errors.Is(err, ErrOpen) {
		t.Fatalf("fourth probe: %v, want ErrOpen", err)
	}
	for i, tk := range tickets {
		b.Done(tk, now+ms, false, time.Millisecond)
		want := HalfOpen
		if i == len(tickets)-1 {
			want = Closed
		}
		if b.State() != want {
			t.Fatalf("after %d successful probes: %s, want %s", i+1, b.State(), want)
		}
	}
	// A fresh window: one failure does not re-trip on old counts.
	call(b, now+2*ms, true, 0)
	if b.State() != Closed {
		t.Fatalf("re-tripped on a stale window")
	}
}

func TestFailedProbeDoublesOpenFor(t *testing.T) {
	t.Parallel()
	b, now := tripped(t, testRule(nil))
	// openFor 5s → 10s → 20s → 20s (maxOpenFor), then success resets it.
	for _, want := range []int64{5, 10, 20, 20} {
		if _, err := b.Allow(now + want*sec - 1); !errors.Is(err, ErrOpen) {
			t.Fatalf("admitted before openFor %ds passed", want)
		}
		now += want * sec
		tk, err := b.Allow(now)
		if err != nil {
			t.Fatalf("probe after %ds refused: %v", want, err)
		}
		other, _ := b.Allow(now)
		b.Done(tk, now, true, 0)
		if b.State() != Open {
			t.Fatalf("failed probe left state %s", b.State())
		}
		b.Done(other, now, false, 0) // a late probe of the old generation changes nothing
		if b.State() != Open {
			t.Fatalf("stale probe moved the state to %s", b.State())
		}
	}
	if got, want := b.RetryAfter(now), 20*time.Second; got != want {
		t.Fatalf("RetryAfter = %s, want %s", got, want)
	}
	now += 20 * sec
	for range 3 {
		if !call(b, now, false, 0) {
			t.Fatal("probe refused")
		}
	}
	if b.State() != Closed {
		t.Fatalf("state after successful probes: %s", b.State())
	}
	for range 10 {
		call(b, now, true, 0)
	}
	if got := b.RetryAfter(now); got != 5*time.Second {
		t.Fatalf("openFor after closing = %s, want reset to 5s", got)
	}
}

func TestSlowProbeFails(t *testing.T) {
	t.Parallel()
	r := testRule(func(b *api.Breaker) {
		b.SlowCallRatio, b.SlowCallDuration = 0.9, api.Duration(100*time.Millisecond)
	})
	b, now := tripped(t, r)
	now += 5 * sec
	tk, err := b.Allow(now)
	if err != nil {
		t.Fatal(err)
	}
	b.Done(tk, now, false, 150*time.Millisecond)
	if b.State() != Open {
		t.Fatalf("slow probe: %s, want open", b.State())
	}
}

func TestHalfOpenProbeRace(t *testing.T) {
	t.Parallel()
	for _, probes := range []int{1, 3, 17} {
		b, now := tripped(t, testRule(func(b *api.Breaker) { b.HalfOpenProbes = probes }))
		now += 5 * sec
		var admitted atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for range 20 {
					if tk, err := b.Allow(now); err == nil {
						if !tk.Probe() {
							t.Error("non-probe ticket while half-open")
						}
						admitted.Add(1)
					}
				}
			}()
		}
		close(start)
		wg.Wait()
		if got := admitted.Load(); got != int64(probes) {
			t.Fatalf("halfOpenProbes %d: admitted %d", probes, got)
		}
	}
}

func TestConcurrentProbesComplete(t *testing.T) {
	t.Parallel()
	b, now := tripped(t, testRule(func(b *api.Breaker) { b.HalfOpenProbes = 8 }))
	now += 5 * sec
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, err := b.Allow(now)
			if err != nil {
				t.Error(err)
				return
			}
			b.Done(tk, now, false, 0)
		}()
	}
	wg.Wait()
	if b.State() != Closed {
		t.Fatalf("8 successful concurrent probes left %s", b.State())
	}
}

func TestIsFailure(t *testing.T) {
	t.Parallel()
	def := MustBreaker(t, testRule(nil))
	custom := MustBreaker(t, testRule(func(b *api.Breaker) { b.FailureStatuses = []int{502, 503, 429} }))
	tests := []struct {
		desc      string
		b         *Breaker
		status    int
		transport bool
		want      bool
	}{
		{"default 500", def, 500, false, true},
		{"default 599", def, 599, false, true},
		{"default 404", def, 404, false, false},
		{"default 200", def, 200, false, false},
		{"transport error", def, 0, true, true},
		{"custom 502", custom, 502, false, true},
		{"custom 429", custom, 429, false, true},
		{"custom 500 not listed", custom, 500, false, false},
		{"custom transport error", custom, 0, true, true},
		{"out of range", def, 10000, false, false},
		{"nil breaker transport error", nil, 0, true, true},
		{"nil breaker 503", nil, 503, false, true},
		{"nil breaker 404", nil, 404, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := tc.b.IsFailure(tc.status, tc.transport); got != tc.want {
				t.Fatalf("IsFailure(%d, %v) = %v", tc.status, tc.transport, got)
			}
		})
	}
}

func TestStaleClosedTicket(t *testing.T) {
	t.Parallel()
	b := MustBreaker(t, testRule(nil))
	now := 1000 * sec
	old, _ := b.Allow(now)
	for range 10 {
		call(b, now, true, 0)
	}
	now += 5 * sec
	for range 3 {
		call(b, now, false, 0)
	}
	if b.State() != Closed {
		t.Fatal("did not close")
	}
	// The request admitted before the trip reports now: ignored.
	for range 10 {
		b.Done(old, now, true, 0)
	}
	if c := b.counts(now / b.cfg.bucketNs); c.Total != 0 {
		t.Fatalf("stale outcomes counted: %+v", c)
	}
}

func TestNilBreaker(t *testing.T) {
	t.Parallel()
	var b *Breaker
	tk, err := b.Allow(0)
	if err != nil {
		t.Fatal(err)
	}
	b.Done(tk, 0, true, 0)
	var s *Set
	if s.ForRoute("r") != nil || s.Len() != 0 {
		t.Fatal("nil set has breakers")
	}
}

func TestWriteFallback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc       string
		fallback   *api.BreakerFallback
		wantStatus int
		wantRetry  string
		wantCT     string
		wantBody   string
	}{
		{"default", nil, 503, "3", api.ContentTypeProblemJSON, `"rule":"b"`},
		{"custom", &api.BreakerFallback{Status: 502, RetryAfter: api.Duration(7 * time.Second), Body: "down", ContentType: "text/plain"},
			502, "7", "text/plain", "down"},
		{"body without type", &api.BreakerFallback{Body: "<p>x</p>"}, 503, "3", "text/plain; charset=utf-8", "<p>x</p>"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			b, now := tripped(t, testRule(func(b *api.Breaker) { b.Fallback = tc.fallback }))
			rec := httptest.NewRecorder()
			b.WriteFallback(rec, httptest.NewRequest("GET", "/", nil), now+2500*ms)
			if rec.Code != tc.wantStatus || rec.Header().Get("Retry-After") != tc.wantRetry ||
				rec.Header().Get("Content-Type") != tc.wantCT || !strings.Contains(rec.Body.String(), tc.wantBody) {
				t.Fatalf("got %d Retry-After=%q CT=%q body=%q", rec.Code, rec.Header().Get("Retry-After"),
					rec.Header().Get("Content-Type"), rec.Body.String())
			}
		})
	}
}

func TestHotSwap(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	opts := Options{Metrics: m}
	r := testRule(func(b *api.Breaker) { b.Routes = nil }) // covers r and s
	s1 := MustCompile(t, []api.Breaker{r}, nil, opts)
	now := 1000 * sec
	for range 10 {
		call(s1.ForRoute("r"), now, true, 0)
	}
	if s1.ForRoute("r").State() != Open || s1.ForRoute("s").State() != Closed {
		t.Fatal("setup: r should be open, s closed")
	}
	if got := testutil.ToFloat64(m.BreakerState.WithLabelValues("b")); got != 2 {
		t.Fatalf("gauge = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.BreakerTransitions.WithLabelValues("b", "closed", "open")); got != 1 {
		t.Fatalf("transitions = %v, want 1", got)
	}

	// Same rule written with its defaults spelled out: unchanged.
	same := r
	same.Fallback = &api.BreakerFallback{Status: 503}
	s2 := MustCompile(t, []api.Breaker{same}, s1, opts)
	s1.Retire(s2)
	if s2.ForRoute("r") != s1.ForRoute("r") || s2.ForRoute("r").State() != Open {
		t.Fatal("unchanged rule lost its state")
	}
	if got := testutil.ToFloat64(m.BreakerState.WithLabelValues("b")); got != 2 {
		t.Fatalf("gauge after unchanged swap = %v, want 2", got)
	}

	// Changed rule: fresh and closed; the old breaker no longer drives the gauge.
	changed := r
	changed.ErrorRatio = 0.6
	s3 := MustCompile(t, []api.Breaker{changed}, s2, opts)
	s2.Retire(s3)
	if s3.ForRoute("r") == s2.ForRoute("r") || s3.ForRoute("r").State() != Closed {
		t.Fatal("changed rule kept its state")
	}
	if got := testutil.ToFloat64(m.BreakerState.WithLabelValues("b")); got != 0 {
		t.Fatalf("gauge after changed swap = %v, want 0", got)
	}
	// An in-flight request on the old breaker moves it: the gauge stays.
	call(s2.ForRoute("r"), now+5*sec, false, 0)
	if got := testutil.ToFloat64(m.BreakerState.WithLabelValues("b")); got != 0 {
		t.Fatalf("retired breaker wrote the gauge: %v", got)
	}

	// Rule removed: its gauge goes.
	s4 := MustCompile(t, nil, s3, opts)
	s3.Retire(s4)
	if n := testutil.CollectAndCount(m.BreakerState); n != 0 {
		t.Fatalf("%d gauge series after removing the rule", n)
	}
}

// TestRefusalsCounted checks that sluice_breaker_rejections_total counts the
// requests an open breaker refuses, and only those (node reports read it).
func TestRefusalsCounted(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	s := MustCompile(t, []api.Breaker{testRule(nil)}, nil, Options{Metrics: m})
	b := s.ForRoute("r")
	now := 1000 * sec
	for range 10 {
		call(b, now, true, 0)
	}
	if b.State() != Open {
		t.Fatal("setup: breaker should be open")
	}
	if got := testutil.ToFloat64(m.BreakerRejections.WithLabelValues("b")); got != 0 {
		t.Fatalf("rejections before any refusal = %v, want 0", got)
	}
	for range 3 {
		if _, err := b.Allow(now + ms); err != ErrOpen {
			t.Fatalf("Allow on an open breaker = %v, want ErrOpen", err)
		}
	}
	if got := testutil.ToFloat64(m.BreakerRejections.WithLabelValues("b")); got != 3 {
		t.Fatalf("rejections = %v, want 3", got)
	}
}

// TestCompileErrors checks that the rules Compile cannot serve are refused
// before it, by api.Validated (the one validation; Compile trusts its output).
func TestCompileErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc  string
		rules []api.Breaker
		want  string
	}{
		{"unknown route", []api.Breaker{testRule(func(b *api.Breaker) { b.Routes = []string{"x"} })}, `route "x", which does not exist`},
		{"route covered twice", []api.Breaker{testRule(nil), testRule(func(b *api.Breaker) { b.ID = "c" })}, "already covered"},
		{"no window", []api.Breaker{testRule(func(b *api.Breaker) { b.Window = 0 })}, "window"},
		{"no openFor", []api.Breaker{testRule(func(b *api.Breaker) { b.OpenFor = 0 })}, "openFor"},
		{"too many probes", []api.Breaker{testRule(func(b *api.Breaker) { b.HalfOpenProbes = api.MaxHalfOpenProbes + 1 })}, "halfOpenProbes"},
		{"failure status", []api.Breaker{testRule(func(b *api.Breaker) { b.FailureStatuses = []int{600} })}, "not an HTTP status"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := validated(tc.rules)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestAdminHandler(t *testing.T) {
	t.Parallel()
	clock := 1000 * sec
	s := MustCompile(t, []api.Breaker{testRule(nil)}, nil, Options{Now: func() int64 { return clock }})
	for range 10 {
		call(s.ForRoute("r"), clock, true, 0)
	}
	clock += sec
	h := Handlers(func() *Set { return s })["GET /breakers"]
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/breakers", nil))
	var got struct{ Breakers []Status }
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("%d %v: %s", rec.Code, err, rec.Body)
	}
	if len(got.Breakers) != 1 || got.Breakers[0].State != "open" || got.Breakers[0].Route != "r" {
		t.Fatalf("got %+v", got.Breakers)
	}
	if left := time.Until(got.Breakers[0].OpenUntil); left < 3*time.Second || left > 5*time.Second {
		t.Fatalf("openUntil is %s away, want about 4s", left)
	}
	rec = httptest.NewRecorder()
	Handlers(func() *Set { return nil })["GET /breakers"].ServeHTTP(rec, httptest.NewRequest("GET", "/breakers", nil))
	if !strings.Contains(rec.Body.String(), `"breakers": []`) {
		t.Fatalf("no rules: %s", rec.Body)
	}
}

func TestHealthyPathAllocs(t *testing.T) {
	b := MustBreaker(t, testRule(func(b *api.Breaker) { b.SlowCallRatio, b.SlowCallDuration = 0.5, api.Duration(time.Second) }))
	now := 1000 * sec
	allocs := testing.AllocsPerRun(1000, func() {
		now += ms
		tk, err := b.Allow(now)
		if err != nil {
			t.Fatal(err)
		}
		b.Done(tk, now, false, time.Millisecond)
	})
	if allocs != 0 {
		t.Fatalf("Allow+Done allocates %v times", allocs)
	}
}
