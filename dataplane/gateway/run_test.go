package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/internal/group"
	"github.com/sluicegw/sluice/dataplane/source"
)

// running is a node started with Run.
type running struct {
	n      *Node
	base   string
	done   chan error
	cancel context.CancelFunc
	logs   *syncLog
}

// syncLog is a log destination safe for concurrent writes.
type syncLog struct{ ch chan string }

func (l *syncLog) Write(p []byte) (int, error) { l.ch <- string(p); return len(p), nil }

// startRun applies rules to a new node and runs it with components on
// loopback ports; the test's cleanup stops it if the test did not.
func startRun(tb testing.TB, rules string, components ...Component) *running {
	tb.Helper()
	logs := &syncLog{ch: make(chan string, 1024)}
	n := New(Config{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", ShutdownTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err := n.Apply(context.Background(), source.Update{Data: []byte(rules), Version: 1, Source: "test"}); err != nil {
		tb.Fatalf("applying rules: %v", err)
	}
	ls, err := n.Listen()
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{n: n, base: "http://" + ls.Traffic.Addr().String(), done: make(chan error, 1), cancel: cancel, logs: logs}
	go func() { r.done <- n.Run(ctx, ls, components...) }()
	tb.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			tb.Error("Run did not return within 30s of its context ending")
		}
	})
	return r
}

// wait returns Run's error, failing the test if Run has not returned within
// a bound far above what it takes (it does not measure speed).
func (r *running) wait(tb testing.TB) error {
	tb.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(30 * time.Second):
		tb.Fatal("Run did not return")
		return nil
	}
}

// logged returns what was logged so far.
func (r *running) logged() string {
	var b strings.Builder
	for {
		select {
		case s := <-r.logs.ch:
			b.WriteString(s)
		default:
			return b.String()
		}
	}
}

func oneRoute(upstream string) string {
	return fmt.Sprintf(`namespace: run
routes:
  - id: api
    match: {pathPrefix: /api}
    upstream: {targets: [{url: %q}]}
`, upstream)
}

// TestRunComponentFails: a component that fails or panics while the node
// serves stops the node at once (not when the node is next told to stop):
// Run returns its error while Run's context is still live, the node drains,
// and a panic is logged with its stack and counted.
func TestRunComponentFails(t *testing.T) {
	up := okUpstream(t)
	for _, tc := range []struct {
		desc      string
		fail      func() error
		wantErr   string
		wantPanic bool
	}{
		{desc: "error", fail: func() error { return errors.New("watch closed") }, wantErr: "follower: watch closed"},
		{desc: "panic", fail: func() error { panic("nil map") }, wantErr: "follower panicked: nil map", wantPanic: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			trigger := make(chan struct{})
			r := startRun(t, oneRoute(up.URL), Component{Name: "follower", Run: func(ctx context.Context) error {
				select {
				case <-ctx.Done():
					return nil
				case <-trigger:
					return tc.fail()
				}
			}})
			c := &http.Client{}
			defer c.CloseIdleConnections()
			if code := get(t, c, r.base+"/api/x", ""); code != 200 {
				t.Fatalf("before the failure: status %d", code)
			}
			close(trigger)
			err := r.wait(t)
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("Run: %v, want %q", err, tc.wantErr)
			}
			var pe *group.PanicError
			if errors.As(err, &pe) != tc.wantPanic {
				t.Fatalf("Run's error %T, panic %v", err, tc.wantPanic)
			}
			if !errors.Is(r.n.Ready(), ErrDraining) {
				t.Fatalf("Ready after the failure: %v, want draining", r.n.Ready())
			}
			if _, err := c.Get(r.base + "/api/x"); err == nil {
				t.Fatal("the node still serves after a component failed")
			}
			panics := testutil.ToFloat64(r.n.metrics.Panics.WithLabelValues("follower"))
			logs := r.logged()
			if tc.wantPanic {
				if panics != 1 || !strings.Contains(logs, "component panicked") || !strings.Contains(logs, "run_test.go") {
					t.Fatalf("panics %v; logs:\n%s", panics, logs)
				}
			} else if panics != 0 || !strings.Contains(logs, "component failed") {
				t.Fatalf("panics %v; logs:\n%s", panics, logs)
			}
		})
	}
}

// TestRunWaitsForEveryGoroutine: once Run returns, every goroutine it
// started (serving, statistics, components, connections) is gone.
func TestRunWaitsForEveryGoroutine(t *testing.T) {
	up := okUpstream(t)
	c := &http.Client{}
	base := countGoroutines(t)
	var running atomic.Int32
	var comps []Component
	for i := range 3 {
		comps = append(comps, Component{Name: fmt.Sprint("c", i), Run: func(ctx context.Context) error {
			running.Add(1)
			defer running.Add(-1)
			<-ctx.Done()
			time.Sleep(5 * time.Millisecond) // still stopping when Serve is done
			return nil
		}})
	}
	r := startRun(t, oneRoute(up.URL), comps...)
	for range 5 {
		if code := get(t, c, r.base+"/api/x", ""); code != 200 {
			t.Fatalf("status %d", code)
		}
	}
	c.CloseIdleConnections()
	r.cancel()
	if err := r.wait(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := running.Load(); n != 0 {
		t.Fatalf("Run returned with %d components running", n)
	}
	waitGoroutines(t, base)
}

// waitGoroutines waits (bounded) for the goroutine count (countGoroutines)
// to fall to base: goroutines that ended may take a moment to be reaped,
// and closed connections' readers a moment to notice.
func waitGoroutines(tb testing.TB, base int) {
	tb.Helper()
	for range 400 {
		if countGoroutines(tb) <= base {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	tb.Fatalf("%d goroutines, want at most %d:\n%s", countGoroutines(tb), base, buf[:runtime.Stack(buf, true)])
}

// processDate names the one goroutine countGoroutines leaves out:
// fasthttp's Date refresher, which the first response the fasthttp engine
// writes in the process starts (sync.Once) and nothing stops. It belongs to
// the process, not to a Run: one, however many nodes ran, and fasthttp
// cannot write a Date without it (see Node.newFastServer).
const processDate = "github.com/valyala/fasthttp.updateServerDate.func1("

// countGoroutines is runtime.NumGoroutine less fasthttp's process-wide Date
// refresher (processDate), failing tb if there is more than one of those.
func countGoroutines(tb testing.TB) int {
	tb.Helper()
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	all, dates := 0, 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.HasPrefix(g, "goroutine ") {
			continue
		}
		all++
		if strings.Contains(g, "\n"+processDate) {
			dates++
		}
	}
	if dates > 1 {
		tb.Fatalf("%d goroutines of fasthttp's Date refresher, want at most 1", dates)
	}
	return all - dates
}

// collectCounter is a collector that counts how often it is collected.
type collectCounter struct{ n atomic.Int32 }

func (c *collectCounter) Describe(ch chan<- *prometheus.Desc) {
	ch <- prometheus.NewDesc("test_collects", "Collections.", nil, nil)
}

func (c *collectCounter) Collect(ch chan<- prometheus.Metric) {
	c.n.Add(1)
	ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("test_collects", "Collections.", nil, nil), prometheus.GaugeValue, 0)
}

// TestStatsCountServed: the node's last-minute figures count exactly the
// requests it answered (routed, rejected, unrouted, looped), from totals
// kept where requests finish, without gathering the metrics registry.
func TestStatsCountServed(t *testing.T) {
	up := okUpstream(t)
	n, base, _ := MustStartConfig(t, fmt.Sprintf(`namespace: stats
routes:
  - id: api
    match: {pathPrefix: /api}
    upstream: {targets: [{url: %q}]}
limits:
  - id: few
    routes: [api]
    algorithm: token_bucket
    rate: 3
    period: 1h
`, up.URL), Config{})
	collects := &collectCounter{}
	n.metrics.Registry.MustRegister(collects)
	n.stats.sample(&n.metrics.Served)
	c := &http.Client{}
	defer c.CloseIdleConnections()
	codes := map[int]int{}
	for range 10 {
		codes[get(t, c, base+"/api/x", "")]++
	}
	for range 2 {
		codes[get(t, c, base+"/elsewhere", "")]++
	}
	looped, _ := http.NewRequest("GET", base+"/api/x", nil)
	looped.Header.Set("Via", strings.Repeat("1.1 p, ", 9)+"1.1 p") // too many hops: 508
	resp, err := c.Do(looped)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	codes[resp.StatusCode]++
	if codes[200] != 3 || codes[429] != 7 || codes[404] != 2 || codes[508] != 1 {
		t.Fatalf("answers %v, want 3×200, 7×429, 2×404, 1×508", codes)
	}
	n.stats.sample(&n.metrics.Served)
	if got := collects.n.Load(); got != 0 {
		t.Fatalf("sampling gathered the registry %d times", got)
	}
	tot := n.metrics.Served.Totals()
	if tot.Total != 13 || tot.Rejected != 7 || tot.Cumulative[len(tot.Cumulative)-1] != 10 {
		t.Fatalf("totals %+v, want 13 requests, 7 rejected, 10 with a duration", tot)
	}
	// The same as sluice_requests_total, over every route and code.
	var want float64
	mfs, err := n.metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "sluice_requests_total" {
			for _, m := range mf.GetMetric() {
				want += m.GetCounter().GetValue()
			}
		}
	}
	if float64(tot.Total) != want {
		t.Fatalf("Served counts %d, sluice_requests_total %v", tot.Total, want)
	}
	rps, reject, p99 := n.stats.lastMinute()
	if rps != 13 || reject != 7.0/13 || p99 <= 0 || p99 > 10 {
		t.Fatalf("last minute: rps %v reject %v p99 %v, want 13, %v, in (0, 10]", rps, reject, p99, 7.0/13)
	}
	st := n.NodeStatus(api.NodeStatus{})
	if st.RPS != 13 {
		t.Fatalf("NodeStatus RPS %v", st.RPS)
	}
}
