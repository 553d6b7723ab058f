package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestSlowBodyClients: 200 connections that each promise a 1000-byte body
// and send 10 bytes are all answered (408, or 429 from the concurrency
// limit they crowd, or closed) within the route's bodyTimeout, not the
// upstream timeout; the concurrency slots they held are free afterwards.
func TestSlowBodyClients(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(up.Close)
	const bodyTimeout = time.Second
	_, base, _ := MustStart(t, fmt.Sprintf(`namespace: slow
routes:
  - id: upload
    match: {pathPrefix: /}
    upstream: {targets: [{url: %q}], timeout: 30s, bodyTimeout: 1s}
limits:
  - {id: uploads, algorithm: concurrency, rate: 50}
`, up.URL))
	addr := strings.TrimPrefix(base, "http://")
	const conns = 200
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[string]int{}
		slowest  time.Duration
	)
	start := time.Now()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(15 * time.Second)) // bounds the test, far above the timeout
			if _, err := io.WriteString(c, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n0123456789"); err != nil {
				t.Error(err)
				return
			}
			got := "closed"
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				got = fmt.Sprint(resp.StatusCode)
				resp.Body.Close()
			} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
				got = "no answer"
			}
			mu.Lock()
			statuses[got]++
			slowest = max(slowest, time.Since(start))
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Logf("%d slow-body connections: %v; all answered within %v", conns, statuses, slowest)
	if statuses["no answer"] > 0 || statuses["504"] > 0 || statuses["200"] > 0 {
		t.Errorf("answers %v: want only 408, 429 or closed", statuses)
	}
	if statuses["408"] == 0 {
		t.Errorf("no 408 among %v", statuses)
	}
	// Generous for a loaded machine (200 connections on 2 shared cores);
	// without bodyTimeout the answer came from the 30s upstream timeout.
	if slowest > 10*bodyTimeout {
		t.Errorf("the last slow client was answered after %v; bodyTimeout is %v", slowest, bodyTimeout)
	}
	// Every slot is free again: 50 whole uploads at once are all admitted.
	var ok sync.WaitGroup
	codes := make(chan int, 50)
	for range 50 {
		ok.Add(1)
		go func() {
			defer ok.Done()
			resp, err := http.Post(base+"/up", "application/octet-stream", strings.NewReader(strings.Repeat("x", 1000)))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	ok.Wait()
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Errorf("whole upload after the slow clients: %d", c)
		}
	}
}

// TestNonReadingClients: ten clients that request a 16 MB response and never
// read it fill a concurrency limit of ten; within the route's writeTimeout
// (not the 30s upstream timeout) their connections are closed and their
// slots are free for others.
func TestNonReadingClients(t *testing.T) {
	const writeTimeout = time.Second
	addr, big := startSlowDownload(t, 10)
	d := nonReadingDialer()
	for range 10 {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	// The slots are taken: a newcomer is refused while the ten hang...
	start := time.Now()
	status := func() int {
		resp, err := http.Get("http://" + addr + "/small")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// No probe goes out before the ten reached the upstream: a probe
	// admitted before the tenth arrived would take its slot for a moment
	// and have it refused.
	for big.started.Load() < 10 {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("only %d of the ten non-reading clients reached the upstream", big.started.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	for status() != http.StatusTooManyRequests {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("the ten non-reading clients never filled the limit (upstream: %d started, %d written whole)", big.started.Load(), big.done.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// ...until their writes time out: then all ten slots are free (ten
	// requests at once are all admitted).
	allFree := func() bool {
		var wg sync.WaitGroup
		var refused atomic.Int32
		for range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if status() != http.StatusOK {
					refused.Add(1)
				}
			}()
		}
		wg.Wait()
		return refused.Load() == 0
	}
	for !allFree() {
		if time.Since(start) > 20*time.Second {
			t.Fatalf("slots still held after %v", time.Since(start))
		}
		time.Sleep(50 * time.Millisecond)
	}
	freed := time.Since(start)
	t.Logf("the ten non-reading clients held concurrency slots for at most %v (writeTimeout %v)", freed, writeTimeout)
	// Generous for a loaded machine; without writeTimeout the slots were
	// held until the 30s upstream timeout.
	if freed > 10*writeTimeout {
		t.Errorf("slots freed after %v; writeTimeout is %v", freed, writeTimeout)
	}
}

// TestStalledBodyTimeouts: a client that sends its header and part of its
// body, then nothing, is answered by whichever of the route's timeouts fires
// first, on either HTTP/1.1 engine: the route's timeout with a prompt 504,
// bodyTimeout with 408; the client's connection is closed after either
// answer, and so is the upstream's (not pooled). (A
// stall within the first 8 KiB, which the fasthttp engine reads before the
// route is known, is bounded by bodyTimeout alone: TestSlowBodyClients.)
func TestStalledBodyTimeouts(t *testing.T) {
	var opened, closed atomic.Int32
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			opened.Add(1)
		case http.StateClosed:
			closed.Add(1)
		}
	}
	up.Start()
	t.Cleanup(up.Close)
	// The same upstream over h2c: on the fasthttp engine, reached through
	// the net/http bridge (Forward), whose connections are multiplexed, not
	// closed per request.
	h2cAddr := newH2CUpstream(t, up.Config.Handler)
	for _, tc := range []struct {
		desc                 string
		timeout, bodyTimeout string
		status               int
		detail               string
		h2c                  bool
	}{
		{desc: "route timeout first", timeout: "200ms", bodyTimeout: "5s", status: http.StatusGatewayTimeout, detail: "within 200ms"},
		{desc: "body timeout first", timeout: "5s", bodyTimeout: "200ms", status: http.StatusRequestTimeout, detail: "nothing arrived for 200ms"},
		{desc: "bridge to h2c, route timeout first", timeout: "200ms", bodyTimeout: "5s", status: http.StatusGatewayTimeout, detail: "within 200ms", h2c: true},
		{desc: "bridge to h2c, body timeout first", timeout: "5s", bodyTimeout: "200ms", status: http.StatusRequestTimeout, detail: "nothing arrived for 200ms", h2c: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			target := up.URL
			if tc.h2c {
				target = "h2c://" + h2cAddr
			}
			_, base, _ := MustStartConfig(t, fmt.Sprintf(`namespace: stall
routes:
  - id: upload
    match: {pathPrefix: /}
    upstream: {targets: [{url: %q}], timeout: %s, bodyTimeout: %s}
`, target, tc.timeout, tc.bodyTimeout), Config{})
			c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			start := time.Now()
			// 10 KiB of 100: past the 8 KiB the fasthttp engine reads
			// before its handler runs (fastHeaderReceived), so that on
			// either engine the stall comes while the body is forwarded.
			if _, err := io.WriteString(c, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 102400\r\n\r\n"+strings.Repeat("x", 10<<10)); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("after %v: %v", time.Since(start), err)
			}
			body, _ := io.ReadAll(resp.Body)
			took := time.Since(start)
			t.Logf("answered %d after %v", resp.StatusCode, took)
			if resp.StatusCode != tc.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") ||
				!strings.Contains(string(body), tc.detail) {
				t.Fatalf("stalled body: %d %s %s, want %d problem+json saying %q", resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.status, tc.detail)
			}
			if took > 2*time.Second { // generous for a loaded machine; the other timeout is 5s
				t.Errorf("answered after %v", took)
			}
			if n, err := br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
				t.Errorf("client connection after the answer: read %d, %v; want it closed", n, err)
			}
			for deadline := time.Now().Add(2 * time.Second); !tc.h2c && closed.Load() < opened.Load(); {
				if time.Now().After(deadline) {
					t.Fatalf("upstream connections: %d opened, %d closed", opened.Load(), closed.Load())
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestSlowMovingUpload: bodyTimeout bounds a body that stops, not one that
// keeps moving. A client that sends its body in small parts 100ms apart,
// for 1s in all, through a route whose bodyTimeout is 300ms, is forwarded
// whole on every engine: to an HTTP/1.1 target and to an h2c one (on the
// fasthttp engine through the net/http bridge), with a body the event loop
// reads itself (under proxy.LoopBodyMax) and one it hands over.
func TestSlowMovingUpload(t *testing.T) {
	count := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%d %v", n, err)
	})
	plain := newPlainUpstream(t, count)
	h2cAddr := newH2CUpstream(t, count)
	rules := fmt.Sprintf(`namespace: slow
routes:
  - {id: plain, match: {pathPrefix: /plain/}, upstream: {bodyTimeout: 300ms, targets: [{url: %q}]}}
  - {id: h2c, match: {pathPrefix: /h2c/}, upstream: {bodyTimeout: 300ms, targets: [{url: "h2c://%s"}]}}
`, plain, h2cAddr)
	t.Parallel()
	_, base, _ := MustStartConfig(t, rules, Config{})
	for _, path := range []string{"/plain/", "/h2c/"} {
		for _, first := range []int{8 << 10, 100 << 10} {
			const parts, part = 10, 1000
			pr, pw := io.Pipe()
			go func() {
				_, _ = pw.Write(bytes.Repeat([]byte("x"), first))
				for range parts {
					time.Sleep(100 * time.Millisecond)
					_, _ = pw.Write(bytes.Repeat([]byte("y"), part))
				}
				pw.Close()
			}()
			req, err := http.NewRequest("POST", base+path+"up", pr)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = int64(first + parts*part)
			resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := fmt.Sprintf("%d <nil>", req.ContentLength); resp.StatusCode != 200 || string(body) != want {
				t.Fatalf("%s, %d bytes 100ms apart: %d %s; want 200 %q", path, req.ContentLength, resp.StatusCode, body, want)
			}
		}
	}
}

// bigCounts are the slow-download upstream's /big answers: started, and
// written whole.
type bigCounts struct{ started, done atomic.Int32 }

// startSlowDownload starts an upstream whose /big answers 16 MB (anything
// else: "ok") and a gateway routing every path to it with a 30s timeout,
// writeTimeout 1s and a concurrency limit of slots; it returns the
// gateway's host:port and the upstream's counts.
func startSlowDownload(t *testing.T, slots int) (string, *bigCounts) {
	t.Helper()
	body := strings.Repeat("x", 16<<20)
	big := &bigCounts{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			big.started.Add(1)
			_, _ = io.WriteString(w, body)
			big.done.Add(1)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(up.Close)
	_, base, _ := MustStart(t, fmt.Sprintf(`namespace: slow
routes:
  - id: download
    match: {pathPrefix: /}
    upstream: {targets: [{url: %q}], timeout: 30s, writeTimeout: 1s}
limits:
  - {id: downloads, algorithm: concurrency, rate: %d}
`, up.URL, slots))
	return strings.TrimPrefix(base, "http://"), big
}

// nonReadingDialer dials as a client that does not read: a fixed 64 KiB
// receive buffer (set before connecting, as a real client's would be)
// instead of Linux's autotuning up to tcp_rmem's 32 MB, which would swallow
// the response.
func nonReadingDialer() *net.Dialer {
	return &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10) })
	}}
}
