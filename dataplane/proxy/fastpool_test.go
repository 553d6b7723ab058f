package proxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// countingServer is an upstream on loopback that counts the connections it
// accepted.
type countingServer struct {
	addr  string
	conns atomic.Int32
}

func newCountingServer(tb testing.TB, h http.HandlerFunc) *countingServer {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &countingServer{addr: ln.Addr().String()}
	srv := &http.Server{Handler: h, ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { srv.Close() })
	return s
}

// fastGet sends a GET for path through p and reads the whole body.
func fastGet(tb testing.TB, p *fastPool, path string) (int, string, error) {
	tb.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetRequestURI(path)
	req.Header.SetHost("up.test")
	if err := p.DoDeadline(req, resp, time.Now().Add(5*time.Second)); err != nil {
		return 0, "", err
	}
	var b []byte
	var err error
	if bs := resp.BodyStream(); bs != nil {
		b, err = io.ReadAll(bs)
	}
	_ = resp.CloseBodyStream()
	return resp.StatusCode(), string(b), err
}

// TestFastPool: the fasthttp forward's pool keeps one connection alive
// across requests whatever the body's framing (length, chunked, empty, no
// body), drops a connection whose body was not read to its end or that the
// upstream asked to close, expires idle connections after idleTimeout with
// no goroutine of its own, and leaves nothing running once closed.
func TestFastPool(t *testing.T) {
	base := runtime.NumGoroutine()
	up := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/len":
			w.Header().Set("Content-Length", "5")
			_, _ = io.WriteString(w, "hello")
		case "/chunked":
			_, _ = io.WriteString(w, "chunk")
			http.NewResponseController(w).Flush()
			_, _ = io.WriteString(w, "ed")
		case "/empty":
			w.Header().Set("Content-Length", "0")
		case "/nobody":
			w.WriteHeader(http.StatusNoContent)
		case "/close":
			w.Header().Set("Connection", "close")
			_, _ = io.WriteString(w, "bye")
		case "/big":
			_, _ = io.WriteString(w, strings.Repeat("x", 1<<20))
		}
	})
	d := &net.Dialer{}
	p := newFastPool(up.addr, func(addr string) (net.Conn, error) { return d.Dial("tcp", addr) }, 200*time.Millisecond, 0)
	for _, tc := range []struct {
		path   string
		status int
		body   string
	}{{"/len", 200, "hello"}, {"/chunked", 200, "chunked"}, {"/empty", 200, ""}, {"/nobody", 204, ""}, {"/len", 200, "hello"}} {
		status, body, err := fastGet(t, p, tc.path)
		if err != nil || status != tc.status || body != tc.body {
			t.Fatalf("%s: %d %q %v, want %d %q", tc.path, status, body, err, tc.status, tc.body)
		}
	}
	if n := up.conns.Load(); n != 1 {
		t.Fatalf("%d connections for sequential requests, want 1 kept alive", n)
	}

	// A body closed before its end, or a Connection: close, ends the
	// connection.
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	req.Header.SetRequestURI("/big")
	req.Header.SetHost("up.test")
	if err := p.DoDeadline(req, resp, time.Now().Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := resp.BodyStream().Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	_ = resp.CloseBodyStream()
	fasthttp.ReleaseRequest(req)
	fasthttp.ReleaseResponse(resp)
	if _, body, err := fastGet(t, p, "/close"); err != nil || body != "bye" {
		t.Fatalf("/close: %q %v", body, err)
	}
	if _, _, err := fastGet(t, p, "/len"); err != nil {
		t.Fatal(err)
	}
	if n := up.conns.Load(); n != 3 {
		t.Fatalf("%d connections, want 3 (the cut body's and the closed one's replaced)", n)
	}

	// Idle connections expire.
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.mu.Lock()
		idle, open := len(p.idle), p.open
		p.mu.Unlock()
		if idle == 0 && open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d idle, %d open connections after the idle timeout", idle, open)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Concurrent use, then close: nothing left running.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if _, body, err := fastGet(t, p, "/len"); err != nil || body != "hello" {
				t.Errorf("request %d: %q %v", i, body, err)
			}
		})
	}
	wg.Wait()
	p.close()
	p.mu.Lock()
	if len(p.idle) != 0 || p.open != 0 || p.timer != nil {
		t.Errorf("after close: %d idle, %d open, timer %v", len(p.idle), p.open, p.timer != nil)
	}
	p.mu.Unlock()
	for range 200 {
		if runtime.NumGoroutine() <= base+1 { // the upstream's accept loop
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	t.Fatalf("%d goroutines, base %d:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
}

// TestFastPoolFull: past maxConns a request fails at once rather than
// waiting or dialing.
func TestFastPoolFull(t *testing.T) {
	p := newFastPool("127.0.0.1:1", func(string) (net.Conn, error) { return nil, fmt.Errorf("no dial expected") }, time.Second, 1)
	p.open = 1
	if _, err := p.acquire(time.Now()); err != errFastPoolFull {
		t.Fatalf("acquire on a full pool: %v", err)
	}
}

// quickGet sends a bodyless GET for path through p's quick-head path
// (doInto) with a deadline d ahead, and reads the whole answer.
func quickGet(p *fastPool, path string, d time.Duration) (int, error) {
	var h fasthttp.RequestHeader
	h.SetMethod(http.MethodGet)
	raw := []byte("GET " + path + " HTTP/1.1\r\nHost: up.test\r\n\r\n")
	out := &fasthttp.Response{}
	s, err := p.doInto(fastOut{head: raw, header: &h}, out, time.Now(), time.Now().Add(d))
	if err != nil {
		return 0, err
	}
	if s != nil {
		_, _ = io.ReadAll(s)
		s.Close()
	}
	return out.StatusCode(), nil
}

// TestFastPoolQuickHead: a head without a body goes with the read deadline
// alone (quickHead), and a connection an earlier exchange gave a write
// deadline, long past, is re-armed whole: the quick head's write does not
// fail on the stale deadline, and the answer comes on the same connection.
// A quick head to an upstream that never answers still times out.
func TestFastPoolQuickHead(t *testing.T) {
	up := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stall" {
			time.Sleep(2 * time.Second)
		}
		_, _ = io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, "ok")
	})
	p := newFastPool(up.addr, func(addr string) (net.Conn, error) { return net.Dial("tcp", addr) }, time.Minute, 4)
	defer p.close()

	// An exchange with a body: both deadlines, 100 ms ahead.
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	req.Header.SetMethod(http.MethodPost)
	req.Header.SetRequestURI("/body")
	req.Header.SetHost("up.test")
	req.SetBodyString("payload")
	if err := p.DoDeadline(req, resp, time.Now().Add(100*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if bs := resp.BodyStream(); bs != nil {
		_, _ = io.ReadAll(bs)
	}
	_ = resp.CloseBodyStream()
	fasthttp.ReleaseRequest(req)
	fasthttp.ReleaseResponse(resp)
	time.Sleep(200 * time.Millisecond) // its deadlines are past

	if status, err := quickGet(p, "/quick", 5*time.Second); err != nil || status != http.StatusOK {
		t.Fatalf("quick head on a connection with a stale write deadline: %d, %v", status, err)
	}
	if n := up.conns.Load(); n != 1 {
		t.Fatalf("%d connections, want the one kept alive", n)
	}
	start := time.Now()
	if _, err := quickGet(p, "/stall", 150*time.Millisecond); err == nil || time.Since(start) > time.Second {
		t.Fatalf("quick head to a stalled upstream: %v after %v, want a timeout at 150ms", err, time.Since(start))
	}
}

// deadlineConn counts the read deadlines set on a connection.
type deadlineConn struct {
	net.Conn
	reads *atomic.Int32
}

func (c deadlineConn) SetReadDeadline(t time.Time) error {
	c.reads.Add(1)
	return c.Conn.SetReadDeadline(t)
}

// TestFastPoolDeadlineKept: back-to-back quick exchanges on one connection
// keep the read deadline the first set (arm's slack) instead of setting
// their own; an exchange with a shorter timeout (another route to the same
// origin) gets its own, and its timeout fires on time: not before it, and
// not more than the slack after it; the timed-out GET is not retried on a
// new connection (its deadline is past).
func TestFastPoolDeadlineKept(t *testing.T) {
	up := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stall" {
			time.Sleep(2 * time.Second)
		}
		fmt.Fprint(w, "ok")
	})
	var reads atomic.Int32
	p := newFastPool(up.addr, func(addr string) (net.Conn, error) {
		c, err := net.Dial("tcp", addr)
		return deadlineConn{c, &reads}, err
	}, time.Minute, 1)
	defer p.close()
	const n = 20
	for i := range n {
		if status, err := quickGet(p, "/quick", time.Minute); err != nil || status != http.StatusOK {
			t.Fatalf("exchange %d: %d, %v", i, status, err)
		}
	}
	// A minute's slack is a second: 20 exchanges on loopback take far less.
	if got := reads.Load(); got < 1 || got > 2 {
		t.Errorf("%d exchanges set %d read deadlines, want 1 (2 if they spanned the second)", n, got)
	}
	const short = 300 * time.Millisecond
	start := time.Now()
	_, err := quickGet(p, "/stall", short)
	took := time.Since(start)
	if err == nil {
		t.Fatal("a stalled exchange did not time out")
	}
	if took < short || took > short+short/64+200*time.Millisecond {
		t.Errorf("a %v timeout fired after %v", short, took)
	}
	if up.conns.Load() != 1 {
		t.Errorf("%d connections, want the one kept alive", up.conns.Load())
	}
}

// TestFastPoolCancelledWhileDialing: a request whose context ends while
// its connection is dialed (an HTTP/2 stream the client reset) is not sent,
// and the new connection is pooled, not closed: the next request uses it.
func TestFastPoolCancelledWhileDialing(t *testing.T) {
	t.Parallel()
	var reqs atomic.Int32
	up := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		reqs.Add(1)
		_, _ = io.WriteString(w, "ok")
	})
	ctx, cancel := context.WithCancel(context.Background())
	p := newFastPool(up.addr, func(addr string) (net.Conn, error) {
		cancel() // the stream is reset while the connection is dialed
		return net.Dial("tcp", addr)
	}, time.Minute, 0)
	defer p.close()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetRequestURI("/x")
	req.Header.SetHost("up.test")
	if err := p.DoContext(ctx, req, resp); err != context.Canceled {
		t.Fatalf("DoContext: %v, want context.Canceled", err)
	}
	if status, body, err := fastGet(t, p, "/y"); err != nil || status != 200 || body != "ok" {
		t.Fatalf("next request: %d %q %v", status, body, err)
	}
	if n, c := reqs.Load(), up.conns.Load(); n != 1 || c != 1 {
		t.Errorf("the upstream got %d requests on %d connections, want 1 on 1", n, c)
	}
}

// TestFastPoolClientGoneDrains: an exchange whose client goes away after
// the request was sent (an HTTP/2 stream reset mid-request) is given
// CancelGrace: the upstream's short answer within it is read and dropped
// and the connection kept, so that cancellations do not cost a connection
// each; a route timeout (ErrRouteTimeout) still ends it at once and closes
// the connection.
func TestFastPoolClientGoneDrains(t *testing.T) {
	t.Parallel()
	var reqs atomic.Int32
	up := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		reqs.Add(1)
		time.Sleep(30 * time.Millisecond)
		_, _ = io.WriteString(w, "ok")
	})
	p := newFastPool(up.addr, func(addr string) (net.Conn, error) { return net.Dial("tcp", addr) }, time.Minute, 0)
	defer p.close()
	send := func(cause error) (time.Duration, error) {
		ctx, cancel := context.WithCancelCause(context.Background())
		timer := time.AfterFunc(5*time.Millisecond, func() { cancel(cause) })
		defer timer.Stop()
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.Header.SetRequestURI("/x")
		req.Header.SetHost("up.test")
		start := time.Now()
		err := p.DoContext(ctx, req, resp)
		return time.Since(start), err
	}
	for i := range 5 {
		if took, err := send(nil); err != context.Canceled || took < 20*time.Millisecond {
			t.Fatalf("client gone %d: %v after %v, want context.Canceled once the answer came", i, err, took)
		}
	}
	if c := up.conns.Load(); c != 1 {
		t.Errorf("5 exchanges whose client went away used %d upstream connections, want 1", c)
	}
	if took, err := send(ErrRouteTimeout); err != context.Canceled || took > 20*time.Millisecond {
		t.Errorf("route timeout: %v after %v, want context.Canceled at once", err, took)
	}
	if status, body, err := fastGet(t, p, "/y"); err != nil || status != 200 || body != "ok" {
		t.Fatalf("next request: %d %q %v", status, body, err)
	}
	if c := up.conns.Load(); c != 2 {
		t.Errorf("after a route timeout: %d upstream connections, want 2 (the timed-out one closed)", c)
	}
}
