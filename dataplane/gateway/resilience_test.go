package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/dataplane/source"
)

// flaky is an upstream told to succeed or fail.
type flaky struct {
	*httptest.Server
	failing atomic.Bool
}

func newFlaky(tb testing.TB) *flaky {
	f := &flaky{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	tb.Cleanup(f.Close)
	return f
}

// drive sends GETs at about rps until ctx ends, with the header set by hdr,
// and reports each status to record. Bounded: it stops with ctx.
func drive(ctx context.Context, c *http.Client, url string, rps int, hdr func(i int) (string, string), record func(code int)) {
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rps))
	defer tick.Stop()
	sem := make(chan struct{}, 32)
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-tick.C:
		}
		select {
		case sem <- struct{}{}:
		default:
			continue // the gateway is behind: skip rather than queue unboundedly
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			req, _ := http.NewRequest("GET", url, nil)
			if hdr != nil {
				k, v := hdr(i)
				req.Header.Set(k, v)
			}
			resp, err := c.Do(req)
			if err != nil {
				record(-1)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			record(resp.StatusCode)
		}()
	}
}

func adminJSON(tb testing.TB, url string, v any) {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		tb.Fatal(err)
	}
}

func breakerRules(up string, extraRate int) string {
	return fmt.Sprintf(`namespace: resilience
routes:
  - id: api
    match: {pathPrefix: /api}
    upstream: {targets: [{url: %q}], timeout: 2s}
limits:
  - id: unrelated
    algorithm: token_bucket
    rate: %d
breakers:
  - id: api-breaker
    routes: [api]
    window: 1s
    minRequests: 10
    errorRatio: 0.5
    openFor: 400ms
    maxOpenFor: 2s
    halfOpenProbes: 2
`, up, extraRate)
}

// TestBreakerEndToEnd: through the real node, the breaker opens within one
// window of the upstream failing, keeps its state across a hot swap, and
// closes after the upstream heals.
func TestBreakerEndToEnd(t *testing.T) {
	up := newFlaky(t)
	n, base, adminURL := MustStart(t, breakerRules(up.URL, 1000000))
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}

	var opened atomic.Int64 // unix nanos of the first breaker 503
	var last atomic.Int64   // last status seen
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		drive(ctx, c, base+"/api/x", 200, nil, func(code int) {
			last.Store(int64(code))
			if code == http.StatusServiceUnavailable {
				opened.CompareAndSwap(0, time.Now().UnixNano())
			}
		})
	}()
	time.Sleep(300 * time.Millisecond)
	failStart := time.Now()
	up.failing.Store(true)
	deadline := time.Now().Add(3 * time.Second)
	for opened.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if opened.Load() == 0 {
		t.Fatal("the breaker never opened")
	}
	if took := time.Duration(opened.Load() - failStart.UnixNano()); took > time.Second {
		t.Fatalf("breaker opened %v after the failure started; want within one window (1s)", took)
	} else {
		t.Logf("breaker opened %v after the upstream started failing", took)
	}

	// A hot swap that changes only an unrelated limit keeps the breaker's state.
	var before, after struct {
		Breakers []struct {
			Rule, State string
		} `json:"breakers"`
	}
	adminJSON(t, adminURL+"/breakers", &before)
	if err := n.Apply(ctx, source.Update{Data: []byte(breakerRules(up.URL, 999999)), Version: 2, Source: "test"}); err != nil {
		t.Fatal(err)
	}
	adminJSON(t, adminURL+"/breakers", &after)
	if len(before.Breakers) != 1 || before.Breakers[0].State == "closed" || after.Breakers[0].State != before.Breakers[0].State {
		t.Fatalf("breaker state across the swap: before %+v, after %+v", before, after)
	}

	healed := time.Now()
	up.failing.Store(false)
	deadline = time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		adminJSON(t, adminURL+"/breakers", &after)
		if after.Breakers[0].State == "closed" && last.Load() == 200 {
			t.Logf("breaker closed %v after the upstream healed", time.Since(healed))
			cancel()
			<-done
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("breaker did not close after the upstream healed: %+v", after)
}

func degradeRules(up string) string {
	return fmt.Sprintf(`namespace: resilience
routes:
  - id: shop
    match: {pathPrefix: /shop}
    upstream: {targets: [{url: %q}]}
degrades:
  - id: shop-degrade
    routes: [shop]
    mode: auto
    key: ["header:X-Client"]
    window: 200ms
    recoverAfter: 2
    level1ShedRatio: 0.5
    triggers:
      level1: {qpsAbove: 60}
      level2: {qpsAbove: 180}
    fallback:
      json: {code: 5031, message: busy}
      status: 503
`, up)
}

// TestDegradeEndToEnd: auto degrade climbs to level 1 then 2 under bounded
// loopback load, sheds level 1 consistently per client, and steps back down
// one level at a time once the load is gone.
func TestDegradeEndToEnd(t *testing.T) {
	up := newFlaky(t)
	_, base, adminURL := MustStart(t, degradeRules(up.URL))
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	level := func() int {
		var st struct {
			Degrades []struct {
				Level int `json:"level"`
			} `json:"degrades"`
		}
		adminJSON(t, adminURL+"/degrades", &st)
		if len(st.Degrades) != 1 {
			t.Fatalf("degrades: %+v", st)
		}
		return st.Degrades[0].Level
	}
	waitLevel := func(want int, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for time.Now().Before(deadline) {
			if level() == want {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("degrade level %d, want %d within %v", level(), want, within)
	}

	// Level 1: about 100 rps from 20 clients; each client is either always
	// shed or never.
	var mu sync.Mutex
	seen := map[string]map[int]bool{}
	ctx, cancel := context.WithCancel(context.Background())
	client := func(i int) (string, string) { return "X-Client", "c" + strconv.Itoa(i%20) }
	go drive(ctx, c, base+"/shop", 100, client, func(int) {})
	waitLevel(1, 3*time.Second)
	// Now sample which clients are shed at level 1, with sequential requests.
	// On a loaded machine the paced load can bunch up (level 2) or stall
	// (level 0) for a window; only answers given while the plan was at level
	// 1 before and after them count.
	for i, kept := 0, 0; kept < 200 && i < 2000; i++ {
		k, v := client(i)
		req, _ := http.NewRequest("GET", base+"/shop", nil)
		req.Header.Set(k, v)
		before := level()
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if before != 1 || level() != 1 {
			continue
		}
		kept++
		mu.Lock()
		if seen[v] == nil {
			seen[v] = map[int]bool{}
		}
		seen[v][resp.StatusCode] = true
		mu.Unlock()
	}
	cancel()
	shed := 0
	for cl, codes := range seen {
		if len(codes) != 1 {
			t.Errorf("client %s got %v at level 1: shedding is not consistent per client", cl, codes)
		}
		if codes[503] {
			shed++
		}
	}
	if shed == 0 || shed == len(seen) {
		t.Errorf("at level 1, %d of %d clients shed; want some but not all", shed, len(seen))
	}

	// Level 2 at about 250 rps: everything is shed, with the JSON fallback.
	ctx, cancel = context.WithCancel(context.Background())
	go drive(ctx, c, base+"/shop", 250, client, func(int) {})
	waitLevel(2, 3*time.Second)
	req, _ := http.NewRequest("GET", base+"/shop", nil)
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || string(body) != `{"code":5031,"message":"busy"}` {
		t.Errorf("level 2 answer: %d Retry-After=%q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	cancel()

	// Load gone: down one level at a time (2 → 1 → 0), never straight to 0.
	levels := []int{}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		l := level()
		if len(levels) == 0 || levels[len(levels)-1] != l {
			levels = append(levels, l)
		}
		if l == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if fmt.Sprint(levels) != "[2 1 0]" {
		t.Fatalf("levels while recovering: %v, want [2 1 0]", levels)
	}
}
