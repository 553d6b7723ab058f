package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// countingUpstream is a real HTTP/1.1 upstream that counts the requests it
// received (by path), the connections it accepted and the most requests it
// had in flight at once; each request takes delay.
type countingUpstream struct {
	url                       string
	requests, conns, inflight atomic.Int64
	maxInflight               atomic.Int64
	mu                        sync.Mutex
	paths                     map[string]int
}

func newCountingUpstream(tb testing.TB, delay time.Duration) *countingUpstream {
	tb.Helper()
	u := &countingUpstream{paths: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.requests.Add(1)
		u.mu.Lock()
		u.paths[r.URL.Path]++
		u.mu.Unlock()
		n := u.inflight.Add(1)
		defer u.inflight.Add(-1)
		for m := u.maxInflight.Load(); n > m && !u.maxInflight.CompareAndSwap(m, n); m = u.maxInflight.Load() {
		}
		time.Sleep(delay)
		_, _ = io.WriteString(w, "ok")
	}), ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			u.conns.Add(1)
		}
	}}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { srv.Close() })
	u.url = "http://" + ln.Addr().String()
	return u
}

// settled waits until the upstream's request count stops moving (a
// quarter second without a new one, at most 10 s) and returns it.
func (u *countingUpstream) settled() int64 {
	last, since := u.requests.Load(), time.Now()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		if n := u.requests.Load(); n != last || u.inflight.Load() > 0 {
			last, since = n, time.Now()
		} else if time.Since(since) > 250*time.Millisecond {
			break
		}
	}
	return last
}

// TestRapidReset is issue 26's reproduction of CVE-2023-44487 against a
// node on each HTTP/1 engine (the h2c preface reaches the HTTP/2 server
// from each): 20,000 HEADERS, each followed by its RST_STREAM, sent as fast
// as the connection takes them over h2c with prior knowledge, on a route
// whose concurrency limit is 2, to a real upstream that counts requests and
// connections. Before the guard no GOAWAY came and up to 2,459 requests
// reached the upstream, each on a new connection. Now a GOAWAY comes once
// the client has reset more than ResetBurst streams (ResetRate more per
// second), and the upstream sees at most one request per stream the server
// took before that: at most ResetBurst+ResetRate (300) requests, and at
// most as many connections (plus the two the limit admits).
func TestRapidReset(t *testing.T) {
	t.Parallel()
	up := newCountingUpstream(t, 2*time.Millisecond)
	_, base, _ := MustStartConfig(t, fmt.Sprintf(`namespace: rapid
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}], timeout: 5s}}
limits:
  - {id: two, algorithm: concurrency, rate: 2}
`, up.url), Config{})
	addr := strings.TrimPrefix(base, "http://")
	for _, lag := range []int{0, 10} {
		rapidResetOnce(t, up, addr, lag)
	}
}

// rapidResetOnce runs one rapid reset (see rapidReset) against a node
// forwarding to up and checks what reached up.
func rapidResetOnce(t *testing.T, up *countingUpstream, addr string, lag int) {
	reqs0, conns0 := up.requests.Load(), up.conns.Load()
	start := time.Now()
	sent, goAway := rapidReset(t, addr, 20000, lag)
	took := time.Since(start)
	if goAway == nil {
		t.Fatalf("lag %d: no GOAWAY after %d HEADERS+RST_STREAM", lag, sent)
	}
	reqs := up.settled() - reqs0
	conns := up.conns.Load() - conns0
	t.Logf("lag %d: %d streams sent before the connection ended; GOAWAY %v (last stream %d); upstream: %d requests, %d connections, at most %d in flight",
		lag, sent, goAway.ErrCode, goAway.LastStreamID, reqs, conns, up.maxInflight.Load())
	// The guard's budget: the burst, refilled at ResetRate a second for as
	// long as the attack took (at least a second; on a loaded machine the
	// 20,000 frames take longer to write, and the budget grows with it).
	bound := ResetBurst + ResetRate*int(max(1, math.Ceil(took.Seconds())))
	if reqs > int64(bound) {
		t.Errorf("%d requests reached the upstream, want at most %d", reqs, bound)
	}
	if conns > reqs+2 || conns > int64(bound) {
		t.Errorf("the upstream accepted %d connections for %d requests", conns, reqs)
	}
	if int(goAway.LastStreamID) > 2*(bound+lag)+1 {
		t.Errorf("GOAWAY's last stream %d: the server took more than %d streams", goAway.LastStreamID, bound+lag)
	}
}

// rapidReset opens n streams on a new h2c connection to addr, resetting
// each as soon as lag more are open (0: at once), and returns how many it sent before the connection ended
// and the GOAWAY it received, if any.
func rapidReset(t *testing.T, addr string, n, lag int) (int, *http2.GoAwayFrame) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	bw := bufio.NewWriterSize(c, 64<<10)
	fr := http2.NewFramer(bw, bufio.NewReader(c))
	got := make(chan *http2.GoAwayFrame, 1)
	go func() {
		var ga *http2.GoAwayFrame
		defer func() { got <- ga }()
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if g, ok := f.(*http2.GoAwayFrame); ok && ga == nil {
				ga = &http2.GoAwayFrame{LastStreamID: g.LastStreamID, ErrCode: g.ErrCode}
			}
		}
	}()
	_, _ = io.WriteString(bw, http2.ClientPreface)
	_ = fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "g.test"}, {":path", "/rapid"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	block := hb.Bytes()
	sent := 0
	start := time.Now()
	for i := 0; i < n+lag; i++ {
		if i < n {
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: block, EndStream: true, EndHeaders: true}); err != nil {
				break
			}
		}
		if j := i - lag; j >= 0 {
			if err := fr.WriteRSTStream(uint32(2*j+1), http2.ErrCodeCancel); err != nil {
				break
			}
		}
		if bw.Flush() != nil { // one write per stream, as a paced client
			break
		}
		sent++
	}
	_ = bw.Flush()
	t.Logf("%d HEADERS+RST_STREAM written in %v", sent, time.Since(start).Round(time.Millisecond))
	_ = c.(*net.TCPConn).CloseWrite()
	return sent, <-got
}

// TestOpenSendClose: 2,000 HTTP/1.1 clients that each send a request and
// close at once (issue 26 saw each reach the upstream twice) reach the
// upstream at most once each, on every engine.
func TestOpenSendClose(t *testing.T) {
	t.Parallel()
	up := newCountingUpstream(t, 20*time.Millisecond)
	_, base, _ := MustStartConfig(t, fmt.Sprintf(`namespace: osc
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}], timeout: 5s}}
`, up.url), Config{})
	addr := strings.TrimPrefix(base, "http://")
	const clients, parallel = 2000, 50
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range parallel {
		wg.Go(func() {
			for i := next.Add(1); i <= clients; i = next.Add(1) {
				c, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = fmt.Fprintf(c, "GET /osc/%d HTTP/1.1\r\nHost: g.test\r\n\r\n", i)
				c.Close()
			}
		})
	}
	wg.Wait()
	reqs := up.settled()
	up.mu.Lock()
	defer up.mu.Unlock()
	twice := 0
	for p, k := range up.paths {
		if k > 1 {
			twice++
			if twice <= 3 {
				t.Errorf("%s reached the upstream %d times", p, k)
			}
		}
	}
	t.Logf("%d requests reached the upstream (of %d sent), %d twice or more, on %d connections", reqs, clients, twice, up.conns.Load())
}

// TestConcurrencyCountsH2Streams: a concurrency limit counts HTTP/2
// streams as it counts HTTP/1 requests: of 10 concurrent streams on one
// h2c connection to a route whose limit is 2, two reach the upstream (and
// hold their slots until answered), eight are refused with 429.
func TestConcurrencyCountsH2Streams(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var inflight, most atomic.Int32
	up := newPlainUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		_, _ = io.WriteString(w, "ok")
	})
	_, base, _ := MustStart(t, fmt.Sprintf(`namespace: h2conc
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}], timeout: 10s}}
limits:
  - {id: two, algorithm: concurrency, rate: 2}
`, up))
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	statuses := make(chan int, 10)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			resp, err := client.Get(base + "/c")
			if err != nil {
				t.Error(err)
				statuses <- 0
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.ProtoMajor != 2 {
				t.Errorf("served over %s", resp.Proto)
			}
			statuses <- resp.StatusCode
		})
	}
	refused := 0
	for range 8 {
		if s := <-statuses; s == http.StatusTooManyRequests {
			refused++
		} else {
			t.Errorf("status %d while two streams hold the limit", s)
		}
	}
	waitFor(t, func() bool { return inflight.Load() == 2 }) // both admitted streams are at the upstream
	close(release)
	wg.Wait()
	close(statuses)
	for s := range statuses {
		if s != http.StatusOK {
			t.Errorf("an admitted stream: %d", s)
		}
	}
	if refused != 8 || most.Load() != 2 {
		t.Errorf("%d refused, at most %d at the upstream at once; want 8 and 2", refused, most.Load())
	}
}

// TestResetStreamsKeepUpstreamConns: HTTP/2 streams reset while their
// request is at the upstream do not cost an upstream connection each (they
// closed it, and the next stream opened another): the answer that comes
// within proxy.CancelGrace is read and dropped and the connection reused.
// 20 streams, each reset once its request is at the upstream, which takes
// 30 ms to answer: 20 requests on at most 3 connections (a stream may
// find the previous one's connection not back yet).
func TestResetStreamsKeepUpstreamConns(t *testing.T) {
	t.Parallel()
	up := newCountingUpstream(t, 30*time.Millisecond)
	_, base, _ := MustStart(t, fmt.Sprintf(`namespace: keepconns
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}], timeout: 5s}}
`, up.url))
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fr := http2.NewFramer(c, bufio.NewReader(c))
	go func() {
		for {
			if _, err := fr.ReadFrame(); err != nil {
				return
			}
		}
	}()
	_, _ = io.WriteString(c, http2.ClientPreface)
	_ = fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "g.test"}, {":path", "/keep"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	const streams = 20
	for i := range streams {
		id := uint32(2*i + 1)
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return up.requests.Load() == int64(i+1) }) // at the upstream
		if err := fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return up.inflight.Load() == 0 }) // answered, within the grace
	}
	reqs, conns := up.settled(), up.conns.Load()
	t.Logf("%d streams reset mid-request: %d upstream requests on %d connections", streams, reqs, conns)
	if reqs != streams || conns > 3 {
		t.Errorf("%d upstream requests on %d connections, want %d on at most 3", reqs, conns, streams)
	}
}

// waitFor polls cond every millisecond for up to 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
	}
}
