package proxy

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluicegw/sluice/dataplane/metrics"
)

// flaky is an upstream that answers 500 while failing is set, and counts the
// requests it gets (health checks apart).
type flaky struct {
	*httptest.Server
	failing atomic.Bool
	hits    atomic.Int64
	checks  atomic.Int64
}

func newFlaky(tb testing.TB, name string) *flaky {
	tb.Helper()
	f := &flaky{}
	echo := echoHandler(name)
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			f.checks.Add(1)
			if f.failing.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
			return
		}
		f.hits.Add(1)
		if f.failing.Load() {
			http.Error(w, "broken", http.StatusInternalServerError)
			return
		}
		echo.ServeHTTP(w, r)
	}))
	tb.Cleanup(f.Close)
	return f
}

func compileWith(tb testing.TB, doc string, m *metrics.Metrics) *Router {
	tb.Helper()
	tr := quietTransports()
	rt, err := NewRouterWith(mustRoutes(tb, doc), tr, RouterSettings{Metrics: m})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { rt.CloseIdle(); tr.CloseIdle() })
	return rt
}

func send(tb testing.TB, url string) int {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestOutlierEjection is issue 15's case: one of three targets answering
// 500 is ejected within 1s, gets nothing while ejected, and is used again
// once it has healed and its ejection is over.
func TestOutlierEjection(t *testing.T) {
	t.Parallel()
	a, b, bad := newFlaky(t, "a"), newFlaky(t, "b"), newFlaky(t, "bad")
	bad.failing.Store(true)
	m := metrics.New()
	rt := compileWith(t, oneRoute("r", "{}", fmt.Sprintf(
		`{targets: [{url: "%s"}, {url: "%s"}, {url: "%s"}], outlier: {consecutiveFailures: 3, baseEjection: 300ms, maxEjection: 5s}}`,
		a.URL, b.URL, bad.URL)), m)
	gw := newGateway(t, rt, nil)
	start := time.Now()
	var ejectedAt time.Duration
	for ejectedAt == 0 && time.Since(start) < 2*time.Second {
		send(t, gw.URL+"/")
		if h := rt.Health(); !h[2].Healthy {
			ejectedAt = time.Since(start)
		}
	}
	if ejectedAt == 0 || ejectedAt > time.Second {
		t.Fatalf("the failing target was not ejected within 1s (%v)", ejectedAt)
	}
	if got := testutil.ToFloat64(m.TargetHealthy.WithLabelValues("r", bad.URL)); got != 0 {
		t.Errorf("sluice_upstream_target_healthy of the ejected target = %v", got)
	}
	hits := bad.hits.Load()
	if hits != 3 {
		t.Errorf("the failing target got %d requests before its ejection, want 3", hits)
	}
	// Ejected: every request goes to a and b and succeeds.
	for range 20 {
		if code := send(t, gw.URL+"/"); code != 200 {
			t.Fatalf("status %d while the failing target is ejected", code)
		}
	}
	if n := bad.hits.Load(); n != hits {
		t.Errorf("the ejected target got %d requests", n-hits)
	}
	// Healed: after its 300ms it is used again.
	bad.failing.Store(false)
	time.Sleep(350 * time.Millisecond) // the ejection runs on the real clock
	for range 30 {
		send(t, gw.URL+"/")
	}
	if bad.hits.Load() < hits+5 {
		t.Errorf("the healed target got %d of 30 requests after its ejection", bad.hits.Load()-hits)
	}
	// Its successes since took its ejection count back down (one per run
	// of consecutiveFailures successes).
	if h := rt.Health(); !h[2].Healthy || h[2].Ejections != 0 {
		t.Errorf("health after re-admission: %+v", h[2])
	}
	if got := testutil.ToFloat64(m.TargetEjections.WithLabelValues("r", bad.URL)); got != 1 {
		t.Errorf("ejections counted %v, want 1", got)
	}
}

// TestOutlierShare checks that no more than maxEjectedRatio of the targets
// are out at once, even when all fail, and that ejection time grows.
func TestOutlierShare(t *testing.T) {
	t.Parallel()
	fs := []*flaky{newFlaky(t, "a"), newFlaky(t, "b"), newFlaky(t, "c")}
	for _, f := range fs {
		f.failing.Store(true)
	}
	rt := compileWith(t, oneRoute("r", "{}", fmt.Sprintf(
		`{targets: [{url: "%s"}, {url: "%s"}, {url: "%s"}], outlier: {consecutiveFailures: 2, baseEjection: 1h, maxEjectedRatio: 0.5}}`,
		fs[0].URL, fs[1].URL, fs[2].URL)), nil)
	gw := newGateway(t, rt, nil)
	for range 60 {
		send(t, gw.URL+"/")
	}
	out := 0
	for _, h := range rt.Health() {
		if !h.Healthy {
			out++
		}
	}
	if out != 1 {
		t.Errorf("%d of 3 targets ejected; maxEjectedRatio 0.5 allows 1", out)
	}
	for _, f := range fs {
		if f.hits.Load() == 0 {
			t.Error("a target got nothing")
		}
	}
}

func TestEjectionGrows(t *testing.T) {
	t.Parallel()
	b := newBalancer([]int{1, 1, 1})
	rt := mustRoutes(t, oneRoute("r", "{}", `{targets: [{url: "http://127.0.0.1:1"}, {url: "http://127.0.0.1:2"}, {url: "http://127.0.0.1:3"}], outlier: {consecutiveFailures: 1, baseEjection: 1s, maxEjection: 3s}}`))
	b.configureHealth(&rt[0], []string{"a", "b", "c"}, nil, quietTransports().log)
	var got []time.Duration
	for range 4 {
		b.ts[0].inflight.Add(1)
		b.done(0, true, false)
		u := b.ts[0].until.Load()
		got = append(got, time.Duration(u-nowNs()).Round(time.Second))
		b.ts[0].until.Store(1) // over: the next failure ejects again
	}
	want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ejection times %v, want %v", got, want)
	}
}

// TestActiveHealthCheckMarksDeadTarget checks that a target that is down
// when the rule set is applied never gets a request: the first check round
// runs before the router serves.
func TestActiveHealthCheckMarksDeadTarget(t *testing.T) {
	t.Parallel()
	a, b := newFlaky(t, "a"), newFlaky(t, "b")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now: connection refused
	rt := compileWith(t, oneRoute("r", "{}", fmt.Sprintf(
		`{targets: [{url: "%s"}, {url: "%s"}, {url: "%s"}], healthCheck: {path: /healthz, interval: 200ms, timeout: 100ms, healthyAfter: 2, unhealthyAfter: 2}}`,
		dead, a.URL, b.URL)), nil)
	if h := rt.Health(); h[0].Healthy || !h[0].CheckFailing || h[0].CheckError == "" || !h[1].Healthy {
		t.Fatalf("health right after compiling: %+v", h)
	}
	gw := newGateway(t, rt, nil)
	for range 30 {
		if code := send(t, gw.URL+"/"); code != 200 {
			t.Fatalf("status %d: a request went to the dead target", code)
		}
	}
	// a starts failing its checks: after 2 failed rounds it is out.
	a.failing.Store(true)
	deadline := time.Now().Add(3 * time.Second)
	for rt.Health()[1].Healthy && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if rt.Health()[1].Healthy {
		t.Fatal("a target failing its checks was not marked down")
	}
	hits := a.hits.Load()
	for range 10 {
		send(t, gw.URL+"/")
	}
	if a.hits.Load() != hits {
		t.Error("a target marked down still got requests")
	}
	// Closing the router stops the checker: no more checks arrive.
	rt.CloseIdle()
	n := b.checks.Load()
	time.Sleep(500 * time.Millisecond)
	if b.checks.Load() > n {
		t.Error("health checks go on after the router was retired")
	}
}

// TestP2CPrefersLessLoaded checks that under concurrent load a slow target
// gets less than its round-robin share, and that an idle upstream sees the
// exact weighted sequence (TestWeightedDistribution's end to end case).
func TestP2CPrefersLessLoaded(t *testing.T) {
	t.Parallel()
	var slowHits, fastHits atomic.Int64
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slowHits.Add(1)
		time.Sleep(50 * time.Millisecond)
	}))
	defer slow.Close()
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fastHits.Add(1)
		time.Sleep(time.Millisecond)
	}))
	defer fast.Close()
	rt := compileWith(t, oneRoute("r", "{}", fmt.Sprintf(`{targets: [{url: "%s"}, {url: "%s"}]}`, slow.URL, fast.URL)), nil)
	gw := newGateway(t, rt, nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				send(t, gw.URL+"/")
			}
		})
	}
	wg.Wait()
	s, f := slowHits.Load(), fastHits.Load()
	t.Logf("slow %d, fast %d", s, f)
	if s*3 > f {
		t.Errorf("slow target got %d, fast %d: round-robin would split them evenly; P2C should favour the fast one", s, f)
	}
}

func nowNs() int64 { return clockNow() }
