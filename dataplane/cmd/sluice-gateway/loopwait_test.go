package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/dataplane/internal/delayproxy"
)

const slowRedisRules = `namespace: loopwait
routes:
  - {id: local, match: {pathPrefix: /local}, upstream: {targets: [{url: %[1]q}]}}
  - {id: cluster, match: {pathPrefix: /cluster}, upstream: {targets: [{url: %[1]q}]}}
limits:
  - {id: near, routes: [local], algorithm: token_bucket, rate: 1000000, period: 1s}
  - {id: shared, routes: [cluster], algorithm: token_bucket, rate: 1000000, period: 1s, scope: cluster, mode: exact}
`

// TestLoopSlowRedisSparesOthers is issue 27's test: a route with a scope:
// cluster limit, served on the event loop while every Redis call takes 50
// ms more, does not slow an unrelated local route served by the same loop
// (a gateway process with one event loop): the local route's p99 stays
// within 1.2x of its baseline, where Redis is not slowed.
//
// The baseline is measured at the same time as the loaded figure, on a
// twin: two gateway processes with the same rules serve the same traffic,
// the local route to paced clients (each sends a request every
// millisecond, so that the box is not saturated and the figure is not its
// run queue's) and the cluster route at 100 requests a second each; each
// reaches the machine's Redis through a proxy of its own, and one proxy
// holds every call for 50 ms, the twins swapping roles every round.
// Measured at once, both twins see the box's load alike, which on a shared
// 2-core box varies more from one second to the next than any slowdown
// this test looks for; serving the same traffic, their loops do the same
// work, so that what differs is only how long Redis takes. A decision made
// on the loop's goroutine would hold every connection of that loop for
// each 50 ms call.
func TestLoopSlowRedisSparesOthers(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of load")
	}
	const slow = 50 * time.Millisecond
	up := upstream(t)
	prefix := fmt.Sprintf("sluicetest:loopwait:%d:", time.Now().UnixNano())
	var twins [2]*gw
	var redis [2]*delayproxy.Proxy
	for i := range twins {
		redis[i] = delayproxy.Start(t, "127.0.0.1:6379", slow)
		twins[i] = startGateway(t, fmt.Sprintf(slowRedisRules, up.URL), "--redis", "redis://"+redis[i].Addr(),
			"--redis-prefix", prefix, "--redis-timeout", "3s", "--event-loops", "1")
	}

	const locals, clusters, rounds, phase, every, clusterEvery = 2, 8, 10, 200 * time.Millisecond, time.Millisecond, 80 * time.Millisecond
	var lk, ck [2][]*keepAlive
	for i, g := range twins {
		for range locals {
			lk[i] = append(lk[i], dialKeepAlive(t, g.addr, "/local"))
		}
		for range clusters {
			ck[i] = append(ck[i], dialKeepAlive(t, g.addr, "/cluster"))
		}
		// The slow route is slow: its decision waits for Redis.
		t0 := time.Now()
		if code, err := ck[i][0].do(); err != nil || code != http.StatusOK {
			t.Fatalf("cluster route: %d, %v", code, err)
		}
		if d := time.Since(t0); d < slow {
			t.Fatalf("cluster route answered in %v: Redis is not slowed", d)
		}
	}

	// pace has k send a request every interval from start (at once when
	// it falls behind) until stop, and returns the latencies.
	pace := func(k *keepAlive, start time.Time, interval time.Duration, stop func(time.Time) bool, route string) []time.Duration {
		var lat []time.Duration
		for at := start; !stop(at); at = at.Add(interval) {
			time.Sleep(time.Until(at))
			s := time.Now()
			code, err := k.do()
			if err != nil || code != http.StatusOK {
				t.Errorf("%s route: %d, %v", route, code, err)
				return lat
			}
			lat = append(lat, time.Since(s))
		}
		return lat
	}
	// The cluster route's traffic, on both twins all along.
	done := make(chan struct{})
	var clusterWG sync.WaitGroup
	var clusterServed atomic.Int64
	stopCluster := sync.OnceFunc(func() { close(done); clusterWG.Wait() })
	defer stopCluster()
	start := time.Now()
	for i := range twins {
		for j, k := range ck[i] {
			clusterWG.Go(func() {
				stop := func(time.Time) bool {
					select {
					case <-done:
						return true
					default:
						return t.Failed()
					}
				}
				n := len(pace(k, start.Add(clusterEvery*time.Duration(i*clusters+j)/(2*clusters)), clusterEvery, stop, "cluster"))
				clusterServed.Add(int64(n))
			})
		}
	}
	// measure has each local connection send a request every millisecond
	// for d, and returns their latencies, by twin.
	measure := func(d time.Duration) (by [2][]time.Duration) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := time.Now()
		stop := func(time.Time) bool { return time.Since(start) >= d }
		for i := range twins {
			for j, k := range lk[i] {
				wg.Go(func() {
					lat := pace(k, start.Add(every*time.Duration(i*locals+j)/(2*locals)), every, stop, "local")
					mu.Lock()
					by[i] = append(by[i], lat...)
					mu.Unlock()
				})
			}
		}
		wg.Wait()
		return by
	}
	// attempt measures rounds, Redis slowed for one twin in turn, and
	// returns the local route's p99 on the twin whose Redis is not slowed
	// and on the one whose Redis is.
	attempt := func() (b, l time.Duration) {
		var baseline, loaded []time.Duration
		for r := range rounds {
			s := r % 2
			redis[s].SetDelay(slow)
			redis[1-s].SetDelay(0)
			time.Sleep(slow + 10*time.Millisecond) // calls under way end as they began
			by := measure(phase)
			loaded = append(loaded, by[s]...)
			baseline = append(baseline, by[1-s]...)
		}
		if t.Failed() {
			return 0, 0
		}
		b, l = p99(baseline), p99(loaded)
		t.Logf("local route p99: %v beside the cluster route (%d requests), %v beside it with Redis slowed (%d requests)", b, len(baseline), l, len(loaded))
		return b, l
	}
	// Even measured at once, two twins' p99 differ by up to a quarter from
	// one run to the next on a shared 2-core box with nothing to tell them
	// apart: the tail is a few dozen requests, and which twin the box's
	// stalls hit is luck. So the comparison is made up to attempts times,
	// and holds if it holds once; a decision on the loop's goroutine puts
	// the loaded twin's p99 past the baseline's by two orders of magnitude
	// (about 700 ms against 3 ms), which fails at once.
	const attempts = 5
	for a := 1; ; a++ {
		b, l := attempt()
		if t.Failed() {
			return
		}
		if l <= b*12/10 {
			break
		}
		if a == attempts || l > 10*b { // not the box's luck
			t.Errorf("local route p99 %v with Redis slowed, over 1.2x its baseline %v (attempt %d)", l, b, a)
			break
		}
	}
	stopCluster()
	elapsed := time.Since(start)
	t.Logf("%d cluster requests served in %v", clusterServed.Load(), elapsed.Round(time.Millisecond))
	if want := int64(2 * clusters * elapsed / clusterEvery); clusterServed.Load() < want*8/10 {
		t.Errorf("%d cluster requests served, want about %d (%d connections on each twin, one every %v)", clusterServed.Load(), want, clusters, clusterEvery)
	}
	for _, g := range twins {
		if h := g.metric(t, "sluice_evloop_handoffs_total"); h != 0 {
			t.Errorf("%v requests served off the loop, want none", h)
		}
		if st := g.status(t)["components"]; !strings.Contains(fmt.Sprint(st), "state:ok") {
			t.Errorf("redis store status: %v", st)
		}
	}
}

// metric sums the gateway's series of the metric name (all labels).
func (g *gw) metric(t *testing.T, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + g.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, name); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, "{")) {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
				sum += v
			}
		}
	}
	return sum
}

// keepAlive is one client connection sending requests in turn.
type keepAlive struct {
	c   net.Conn
	br  *bufio.Reader
	req []byte
}

func dialKeepAlive(t *testing.T, addr, path string) *keepAlive {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &keepAlive{c: c, br: bufio.NewReader(c), req: []byte("GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n")}
}

// do sends one request and reads its answer (a status line, fields with
// a Content-Length, a body), returning its status. It allocates nothing, so
// that the client's garbage collection does not weigh on what it measures.
func (k *keepAlive) do() (int, error) {
	_ = k.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := k.c.Write(k.req); err != nil {
		return 0, err
	}
	status, length := 0, -1
	for {
		line, err := k.br.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		switch {
		case status == 0:
			if len(line) < 12 || string(line[:9]) != "HTTP/1.1 " {
				return 0, fmt.Errorf("status line %q", line)
			}
			status = int(line[9]-'0')*100 + int(line[10]-'0')*10 + int(line[11]-'0')
			continue
		case len(line) <= 2:
			if length < 0 {
				return 0, errors.New("no Content-Length")
			}
			_, err := k.br.Discard(length)
			return status, err
		case len(line) > 16 && strings.EqualFold(string(line[:15]), "Content-Length:"):
			length = 0
			for _, c := range line[15:] {
				if c >= '0' && c <= '9' {
					length = 10*length + int(c-'0')
				}
			}
		}
	}
}

// p99 is the 99th percentile of d (sorted in place).
func p99(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)*99/100]
}
