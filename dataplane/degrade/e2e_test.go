package degrade

// In-process end-to-end tests: a flaky httptest upstream behind the chain the
// gateway runs (degrade → breaker → httputil.ReverseProxy → record), driven by
// bounded loopback load on the real clock with 200ms windows.

import (
	"context"

	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/breaker"
	"github.com/sluicegw/sluice/dataplane/reqview"
)

// flaky is an upstream told to succeed or fail.
type flaky struct{ failing atomic.Bool }

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.failing.Load() {
		http.Error(w, "boom", http.StatusInternalServerError)
		return
	}
	_, _ = io.WriteString(w, "ok")
}

type sets struct {
	br *breaker.Set
	dg *Set
}

// chain is the request path under test, reading its sets once per request.
type chain struct {
	cur   atomic.Pointer[sets]
	proxy *httputil.ReverseProxy
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) { s.status = code; s.ResponseWriter.WriteHeader(code) }

type transportErrKey struct{}

func newChain(t *testing.T, upstream string) *chain {
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	c := &chain{proxy: httputil.NewSingleHostReverseProxy(u)}
	c.proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		*r.Context().Value(transportErrKey{}).(*bool) = true
		w.WriteHeader(http.StatusBadGateway)
	}
	return c
}

func (c *chain) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := c.cur.Load()
	now := Now()
	ip, _ := netip.ParseAddr(r.Header.Get("X-Client"))
	dc := s.dg.ForRoute("r")
	v := reqview.FromRequest(r)
	v.ClientIP, v.RouteID = ip, "r"
	if shed, _ := dc.AdmitView(&v, now); shed {
		dc.WriteFallback(w, r, now)
		return
	}
	br := s.br.ForRoute("r")
	tk, err := br.Allow(now)
	if err != nil {
		br.WriteFallback(w, r, now)
		return
	}
	var terr bool
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	c.proxy.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), transportErrKey{}, &terr)))
	end := Now()
	failed := br.IsFailure(sw.status, terr)
	br.Done(tk, end, failed, time.Duration(end-now))
	dc.Record(end, !failed)
}

// load sends requests at about rate per second from 4 workers until stop is
// closed, calling seen with each response's status and X-Sluice header.
func load(t *testing.T, target string, rate int, stop <-chan struct{}, seen func(status int, body string)) *sync.WaitGroup {
	t.Helper()
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	client := &http.Client{Timeout: 2 * time.Second}
	var n atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				i := n.Add(1)
				req, _ := http.NewRequest("GET", target, nil)
				req.Header.Set("X-Client", "10.0."+strconv.Itoa(int(i%200))+"."+strconv.Itoa(int(i%7)))
				req.Header.Set("Accept", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				seen(resp.StatusCode, string(b))
			}
		}()
	}
	go func() { wg.Wait(); tick.Stop() }()
	return &wg
}

// waitFor polls cond every 5ms until it holds or d passes, and returns how
// long it took (or -1).
func waitFor(d time.Duration, cond func() bool) time.Duration {
	start := time.Now()
	for time.Since(start) < d {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return -1
}

func TestEndToEndBreaker(t *testing.T) {
	if testing.Short() {
		t.Skip("real-clock end-to-end test")
	}
	up := &flaky{}
	us := httptest.NewServer(up)
	defer us.Close()
	ch := newChain(t, us.URL)
	routes := []string{"r"}
	rules := []api.Breaker{{
		ID: "b", Routes: routes, Window: api.Duration(200 * time.Millisecond), MinRequests: 5, ErrorRatio: 0.5,
		OpenFor: api.Duration(200 * time.Millisecond), MaxOpenFor: api.Duration(400 * time.Millisecond), HalfOpenProbes: 2,
	}}
	rules = (&api.RuleSet{Breakers: rules}).Normalize().Breakers // as api.Validated gives them
	compile := func(prev *breaker.Set) *breaker.Set {
		s, err := breaker.Compile(rules, routes, prev, breaker.Options{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	dg := MustCompile(t, nil, nil, Options{})
	ch.cur.Store(&sets{br: compile(nil), dg: dg})
	gw := httptest.NewServer(ch)
	defer gw.Close()

	var ok, upstream500, open atomic.Int64
	stop := make(chan struct{})
	wg := load(t, gw.URL, 200, stop, func(status int, body string) {
		switch {
		case status == 200:
			ok.Add(1)
		case status == 500:
			upstream500.Add(1)
		case status == 503:
			open.Add(1)
		}
	})
	defer func() { close(stop); wg.Wait() }()
	br := func() *breaker.Breaker { return ch.cur.Load().br.ForRoute("r") }

	if waitFor(2*time.Second, func() bool { return ok.Load() >= 20 }) < 0 {
		t.Fatalf("healthy phase: only %d ok", ok.Load())
	}
	if open.Load() != 0 || br().State() != breaker.Closed {
		t.Fatal("breaker open while healthy")
	}
	up.failing.Store(true)
	took := waitFor(2*time.Second, func() bool { return br().State() == breaker.Open })
	if took < 0 || took > 200*time.Millisecond {
		t.Fatalf("breaker opened after %s, want within one window (200ms)", took)
	}
	if waitFor(time.Second, func() bool { return open.Load() > 0 }) < 0 {
		t.Fatal("no fallback answers while open")
	}
	// Recompile mid-flight with the same rules: the state stays.
	prev := ch.cur.Load()
	next := compile(prev.br)
	ch.cur.Store(&sets{br: next, dg: dg})
	prev.br.Retire(next)
	if next.ForRoute("r") != prev.br.ForRoute("r") || next.ForRoute("r").State() == breaker.Closed {
		t.Fatal("recompile lost the breaker state")
	}
	up.failing.Store(false)
	took = waitFor(3*time.Second, func() bool { return br().State() == breaker.Closed })
	if took < 0 {
		t.Fatalf("breaker did not close after the upstream healed: %s", br().State())
	}
	before := ok.Load()
	if waitFor(2*time.Second, func() bool { return ok.Load() >= before+20 }) < 0 || br().State() != breaker.Closed {
		t.Fatalf("traffic did not resume: state %s", br().State())
	}
	t.Logf("ok %d, upstream 500 %d, breaker fallbacks %d; closed %s after healing", ok.Load(), upstream500.Load(), open.Load(), took)
}

func TestEndToEndDegrade(t *testing.T) {
	if testing.Short() {
		t.Skip("real-clock end-to-end test")
	}
	up := &flaky{}
	us := httptest.NewServer(up)
	defer us.Close()
	ch := newChain(t, us.URL)
	routes := []string{"r"}
	rules := []api.Degrade{{
		ID: "d", Routes: routes, Mode: api.DegradeAuto, Window: api.Duration(200 * time.Millisecond),
		Triggers: &api.DegradeTriggers{
			Level1: &api.Trigger{QPSAbove: 80},
			Level2: &api.Trigger{SuccessRateBelow: 0.5},
		},
		RecoverAfter: 2, Level1ShedRatio: 0.5,
		Fallback: &api.DegradeFallback{JSON: api.RawJSON(`{"code":5031}`)},
	}}
	rules, err := validated(rules, routes...)
	if err != nil {
		t.Fatal(err)
	}
	compile := func(prev *Set) *Set {
		s, err := Compile(rules, routes, prev, Options{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	brs, err := breaker.Compile(nil, routes, nil, breaker.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ch.cur.Store(&sets{br: brs, dg: compile(nil)})
	gw := httptest.NewServer(ch)
	defer gw.Close()
	ctrl := func() *Controller { return ch.cur.Load().dg.ForRoute("r") }
	level := func() int { return ctrl().Level(Now()) }

	var shedJSON atomic.Int64
	count := func(status int, body string) {
		if status == 503 && body == `{"code":5031}` {
			shedJSON.Add(1)
		}
	}
	phase := func(rate int, d time.Duration, poll func() bool) time.Duration {
		stop := make(chan struct{})
		wg := load(t, gw.URL, rate, stop, count)
		took := waitFor(d, poll)
		close(stop)
		wg.Wait()
		return took
	}
	// Light load: level 0.
	if phase(20, 500*time.Millisecond, func() bool { return level() != 0 }) >= 0 {
		t.Fatalf("light load raised the level to %d", level())
	}
	// Heavy load (about 400/s against qpsAbove 80): level 1, and shedding.
	stop := make(chan struct{})
	wg := load(t, gw.URL, 400, stop, count)
	if waitFor(3*time.Second, func() bool { return level() == 1 }) < 0 {
		close(stop)
		wg.Wait()
		t.Fatalf("heavy load did not reach level 1 (level %d)", level())
	}
	if waitFor(2*time.Second, func() bool { return shedJSON.Load() > 0 }) < 0 {
		t.Fatal("level 1 shed nothing")
	}
	// The upstream fails: the forwarded half's success rate falls: level 2.
	up.failing.Store(true)
	if waitFor(3*time.Second, func() bool { return level() == 2 }) < 0 {
		close(stop)
		wg.Wait()
		t.Fatalf("failing upstream did not reach level 2: %+v", ch.cur.Load().dg.Status(Now()))
	}
	// Recompile mid-flight: same rules keep the level.
	prev := ch.cur.Load()
	next := compile(prev.dg)
	ch.cur.Store(&sets{br: brs, dg: next})
	prev.dg.Retire(next)
	if next.ForRoute("r") != prev.dg.ForRoute("r") || level() != 2 {
		t.Fatalf("recompile lost the level: %d", level())
	}
	close(stop)
	wg.Wait()
	// Heal and go light: back down one level at a time, with hysteresis
	// (recoverAfter 2 healthy windows per level: at least 4 windows = 800ms
	// from 2 to 0).
	up.failing.Store(false)
	healed := time.Now()
	var sawOne atomic.Bool
	took := phase(20, 5*time.Second, func() bool {
		l := level()
		if l == 1 {
			sawOne.Store(true)
		}
		return l == 0
	})
	if took < 0 {
		t.Fatalf("level did not come back to 0 (level %d)", level())
	}
	if !sawOne.Load() {
		t.Fatal("stepped from 2 to 0 without passing level 1")
	}
	if since := time.Since(healed); since < 600*time.Millisecond {
		t.Fatalf("back to 0 after %s: no hysteresis", since)
	}
	t.Logf("shed %d requests with the JSON fallback; back to level 0 %s after healing", shedJSON.Load(), took)
}
