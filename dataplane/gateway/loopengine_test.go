//go:build linux

package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/dataplane/source"
)

// startLoop runs a node on the event-loop engine with rules.
func startLoop(t *testing.T, rules string) (*Node, string) {
	t.Helper()
	n, base, _ := MustStart(t, rules)
	return n, strings.TrimPrefix(base, "http://")
}

// handoffs returns the node's hand-overs to the fasthttp engine, by reason.
func handoffs(t *testing.T, n *Node) map[string]int {
	t.Helper()
	mfs, err := n.metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_evloop_handoffs_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = int(m.GetCounter().GetValue())
		}
	}
	return got
}

// exchange writes raw on a new connection and reads as many answers.
func exchange(t *testing.T, addr, raw string, answers int) []*http.Response {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	return readAnswers(t, bufio.NewReader(c), answers)
}

func readAnswers(t *testing.T, br *bufio.Reader, answers int) []*http.Response {
	t.Helper()
	var out []*http.Response
	for i := 0; i < answers; i++ {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", i+1, err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("answer %d's body: %v", i+1, err)
		}
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(b))
		out = append(out, resp)
	}
	return out
}

func bodyOf(resp *http.Response) string {
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestLoopServesOnLoop: what an event loop serves itself it serves whole,
// with nothing handed to the fasthttp engine: GET, HEAD, a POST with a
// small body, requests pipelined in one write, a request that comes a few
// bytes at a time, answers without a body (204, 304), an interim 100
// Continue before the answer, and an upstream that closes its connection
// after an answer. The upstream sees the gateway's forwarded fields.
func TestLoopServesOnLoop(t *testing.T) {
	var mu sync.Mutex
	var seen []*http.Request
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
		switch r.URL.Path {
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/304":
			w.WriteHeader(http.StatusNotModified)
		case "/close":
			w.Header().Set("Connection", "close")
			_, _ = io.WriteString(w, "closing")
		case "/slow":
			time.Sleep(50 * time.Millisecond)
			_, _ = io.WriteString(w, "slow "+r.URL.RawQuery)
		default:
			w.Header().Set("X-Path", r.URL.Path)
			fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.RequestURI(), b)
		}
	}))
	t.Cleanup(up.Close)
	n, addr := startLoop(t, fmt.Sprintf(`namespace: loop
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}
limits:
  - {id: per-ip, key: [ip], algorithm: token_bucket, rate: 100000, burst: 100000}
`, up.URL))

	get := exchange(t, addr, "GET /a?x=1 HTTP/1.1\r\nHost: shop\r\nX-Forwarded-For: 192.0.2.9\r\n\r\n", 1)[0]
	if get.StatusCode != 200 || bodyOf(get) != "GET /a?x=1 " || get.Header.Get("X-Request-Id") == "" ||
		get.Header.Get("RateLimit-Policy") == "" || get.Header.Get("X-Path") != "/a" {
		t.Fatalf("GET: %d %q %v", get.StatusCode, bodyOf(get), get.Header)
	}
	mu.Lock()
	r0 := seen[0]
	mu.Unlock()
	if xff := r0.Header.Get("X-Forwarded-For"); xff != "192.0.2.9, 127.0.0.1" || r0.Header.Get("Via") == "" ||
		r0.Header.Get("X-Forwarded-Host") != "shop" || r0.Header.Get("X-Request-Id") != get.Header.Get("X-Request-Id") {
		t.Fatalf("the upstream saw %v", r0.Header)
	}

	hc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	_ = hc.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(hc, "HEAD /h HTTP/1.1\r\nHost: x\r\n\r\nGET /after-head HTTP/1.1\r\nHost: x\r\n\r\n")
	hbr := bufio.NewReader(hc)
	head, err := http.ReadResponse(hbr, &http.Request{Method: http.MethodHead})
	if err != nil || head.StatusCode != 200 || head.ContentLength != int64(len("HEAD /h ")) {
		t.Fatalf("HEAD: %v, Content-Length %d (%v)", head, head.ContentLength, err)
	}
	if after := readAnswers(t, hbr, 1)[0]; bodyOf(after) != "GET /after-head " {
		t.Fatalf("after HEAD: %q", bodyOf(after))
	}

	post := exchange(t, addr, "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", 1)[0]
	if bodyOf(post) != "POST /p hello" {
		t.Fatalf("POST: %q", bodyOf(post))
	}

	// Pipelined: answered in order, the slow one first.
	pipe := exchange(t, addr, "GET /slow?1 HTTP/1.1\r\nHost: x\r\n\r\nGET /q HTTP/1.1\r\nHost: x\r\n\r\n"+
		"POST /r HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi", 3)
	if got := []string{bodyOf(pipe[0]), bodyOf(pipe[1]), bodyOf(pipe[2])}; got[0] != "slow 1" || got[1] != "GET /q " || got[2] != "POST /r hi" {
		t.Fatalf("pipelined: %q", got)
	}

	// A few bytes at a time, header and body.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req := "POST /drip HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789"
	for i := 0; i < len(req); i += 7 {
		_, _ = io.WriteString(c, req[i:min(i+7, len(req))])
		time.Sleep(2 * time.Millisecond)
	}
	br := bufio.NewReader(c)
	if drip := readAnswers(t, br, 1)[0]; bodyOf(drip) != "POST /drip 0123456789" {
		t.Fatalf("dripped request: %q", bodyOf(drip))
	}
	// The same connection goes on: no body statuses, then a close.
	_, _ = io.WriteString(c, "GET /204 HTTP/1.1\r\nHost: x\r\n\r\nGET /304 HTTP/1.1\r\nHost: x\r\n\r\nGET /close HTTP/1.1\r\nHost: x\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\n\r\n")
	rs := readAnswers(t, br, 4)
	if rs[0].StatusCode != 204 || rs[1].StatusCode != 304 || bodyOf(rs[2]) != "closing" || bodyOf(rs[3]) != "GET /after " {
		t.Fatalf("answers %d %d %q %q", rs[0].StatusCode, rs[1].StatusCode, bodyOf(rs[2]), bodyOf(rs[3]))
	}
	if h := handoffs(t, n); len(h) > 0 {
		t.Fatalf("handed over: %v", h)
	}
}

// TestLoopInterimAnswers: an upstream's 100 Continue and 103 before its
// answer are skipped; the client gets the answer.
func TestLoopInterimAnswers(t *testing.T) {
	up := connUpstream(t, func(c net.Conn, br *bufio.Reader) {
		for {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			_, _ = io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody")
		}
	})
	n, addr := startLoop(t, fmt.Sprintf("namespace: loop\nroutes:\n  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}\n", "http://"+up))
	rs := exchange(t, addr, "GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", 2)
	for _, r := range rs {
		if r.StatusCode != 200 || bodyOf(r) != "body" {
			t.Fatalf("answer %d %q", r.StatusCode, bodyOf(r))
		}
	}
	if h := handoffs(t, n); len(h) > 0 {
		t.Fatalf("handed over: %v", h)
	}
}

// connUpstream serves each connection with serve, on a loopback port.
func connUpstream(t *testing.T, serve func(c net.Conn, br *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				serve(c, bufio.NewReader(c))
			})
		}
	})
	return ln.Addr().String()
}

// TestLoopHandsOver: what a loop does not serve on the loop itself is
// served off it, on a goroutine, and the connection then comes back to the
// loop: HTTP/1.0, chunked and long bodies, a body behind Expect:
// 100-continue (which closes the connection), a route whose targets are
// not cleartext HTTP/1.1 (h2c), and an answer whose body streams; h2c with
// prior knowledge leaves HTTP/1.1 for good. Each is counted by reason, and
// a request after one served off the loop, on the same connection, is
// counted again: the loop served it.
func TestLoopHandsOver(t *testing.T) {
	big := strings.Repeat("b", 200<<10)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/big":
			_, _ = io.WriteString(w, big)
		case "/chunked":
			w.(http.Flusher).Flush() // no Content-Length: chunked
			_, _ = io.WriteString(w, "chunked answer")
		default:
			fmt.Fprintf(w, "%s %s %d %s", r.Proto, r.URL.Path, len(b), r.Header.Get("Upgrade"))
		}
	}))
	t.Cleanup(up.Close)
	up2 := httptest.NewUnstartedServer(up.Config.Handler)
	up2.Config.Protocols = new(http.Protocols)
	up2.Config.Protocols.SetUnencryptedHTTP2(true)
	up2.Start()
	t.Cleanup(up2.Close)
	n, addr := startLoop(t, fmt.Sprintf(`namespace: loop
routes:
  - {id: h2c, match: {pathPrefix: /h2c}, upstream: {protocol: h2c, targets: [{url: %[2]q}]}}
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %[1]q}]}}
`, up.URL, up2.URL))
	want := map[string]int{}
	check := func(reason string, r *http.Response, body string) {
		t.Helper()
		want[reason]++
		if got := bodyOf(r); r.StatusCode != 200 || got != body {
			t.Fatalf("%s: %d %.60q, want %.60q", reason, r.StatusCode, got, body)
		}
		if h := handoffs(t, n); h[reason] != want[reason] {
			t.Fatalf("%s: handed over %v, want %d for %s", reason, h, want[reason], reason)
		}
	}

	h2 := &http.Client{Transport: &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, a string, _ *tls.Config) (net.Conn, error) {
		return net.Dial(network, a)
	}}}
	resp, err := h2.Get("http://" + addr + "/h2")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	check(metrics.HandoffH2C, resp, "HTTP/1.1 /h2 0 ")

	check(metrics.HandoffHTTP10, exchange(t, addr, "GET /old HTTP/1.0\r\nHost: x\r\n\r\n", 1)[0], "HTTP/1.1 /old 0 ")
	check(metrics.HandoffBody, exchange(t, addr, "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 1)[0],
		"HTTP/1.1 /c 3 ")
	long := strings.Repeat("l", 100<<10)
	check(metrics.HandoffBody, exchange(t, addr, fmt.Sprintf("POST /long HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(long), long), 1)[0],
		fmt.Sprintf("HTTP/1.1 /long %d ", len(long)))
	check(metrics.HandoffRoute, exchange(t, addr, "GET /h2c HTTP/1.1\r\nHost: x\r\n\r\n", 1)[0], "HTTP/2.0 /h2c 0 ")

	// One connection through each kind, pipelined, each request after
	// the last: every one is counted, so the loop had the connection
	// back each time; the HTTP/1.0 request asked to be kept alive.
	pipe := "GET /old HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n" +
		"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n" +
		fmt.Sprintf("POST /long HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(long), long) +
		"GET /h2c HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /chunked HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /old HTTP/1.0\r\nHost: x\r\n\r\n"
	rs := exchange(t, addr, pipe, 6)
	bodies := []string{"HTTP/1.1 /old 0 ", "HTTP/1.1 /c 3 ", fmt.Sprintf("HTTP/1.1 /long %d ", len(long)), "HTTP/2.0 /h2c 0 ", "chunked answer", "HTTP/1.1 /old 0 "}
	for i, r := range rs {
		if got := bodyOf(r); r.StatusCode != 200 || got != bodies[i] {
			t.Fatalf("pipelined answer %d: %d %.60q, want %.60q", i, r.StatusCode, got, bodies[i])
		}
	}
	if got := rs[0].Header.Get("Connection"); !strings.EqualFold(got, "keep-alive") {
		t.Fatalf("HTTP/1.0 keep-alive answer: Connection %q", got)
	}
	if !rs[5].Close {
		t.Fatal("HTTP/1.0 answer without keep-alive: the connection should close")
	}
	for reason, k := range map[string]int{metrics.HandoffHTTP10: 2, metrics.HandoffBody: 2, metrics.HandoffRoute: 1, metrics.HandoffStream: 1} {
		want[reason] += k
	}
	if h := handoffs(t, n); h[metrics.HandoffHTTP10] != want[metrics.HandoffHTTP10] || h[metrics.HandoffBody] != want[metrics.HandoffBody] ||
		h[metrics.HandoffRoute] != want[metrics.HandoffRoute] || h[metrics.HandoffStream] != want[metrics.HandoffStream] {
		t.Fatalf("pipelined: served off the loop %v, want %v", h, want)
	}

	// Expect: 100-continue with the body not sent yet: 100 Continue once
	// the request is let through, then the body comes.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(c, "POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("before the body: %q, %v", line, err)
	}
	_, _ = br.ReadString('\n')
	_, _ = io.WriteString(c, "body")
	check(metrics.HandoffExpect, readAnswers(t, br, 1)[0], "HTTP/1.1 /e 4 ")

	// Streamed answers; the connection goes on after each.
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_ = c2.SetDeadline(time.Now().Add(10 * time.Second))
	br2 := bufio.NewReader(c2)
	_, _ = io.WriteString(c2, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
	check(metrics.HandoffStream, readAnswers(t, br2, 1)[0], big)
	_, _ = io.WriteString(c2, "GET /chunked HTTP/1.1\r\nHost: x\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n")
	rs = readAnswers(t, br2, 2)
	if bodyOf(rs[0]) != "chunked answer" || bodyOf(rs[1]) != "HTTP/1.1 /next 0 " {
		t.Fatalf("after the streamed answer: %q %q", bodyOf(rs[0]), bodyOf(rs[1]))
	}
	// The connection was back on the loop for the second streamed answer.
	want[metrics.HandoffStream]++
	c3, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	_ = c3.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(c3, "GET /chunked HTTP/1.1\r\nHost: x\r\n\r\n")
	check(metrics.HandoffStream, readAnswers(t, bufio.NewReader(c3), 1)[0], "chunked answer")
}

// TestLoopUpstreamFailures: a target that refuses is 502, one slower than
// the route's timeout 504 (promptly), an answer cut short or with a header
// over the bound 502; a GET that meets a kept-alive connection the upstream
// closed is sent again on a new one, a POST is not.
func TestLoopUpstreamFailures(t *testing.T) {
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedAddr := refused.Addr().String()
	refused.Close()
	var mu sync.Mutex
	served := 0
	up := connUpstream(t, func(c net.Conn, br *bufio.Reader) {
		for {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, r.Body)
			mu.Lock()
			served++
			first := served
			mu.Unlock()
			switch r.URL.Path {
			case "/slow":
				time.Sleep(2 * time.Second)
			case "/cut":
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part")
				return
			case "/huge":
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("h", 80<<10)+"\r\nContent-Length: 0\r\n\r\n")
				return
			case "/stale":
				// Answer the first request on a connection, then close it
				// when the next one comes, unanswered.
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst")
				if _, err := http.ReadRequest(br); err == nil {
					return
				}
				return
			}
			_, _ = fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%d", len(fmt.Sprint(first)), first)
		}
	})
	_, addr := startLoop(t, fmt.Sprintf(`namespace: loop
routes:
  - {id: refused, match: {pathPrefix: /refused}, upstream: {targets: [{url: "http://%s"}]}}
  - {id: slow, match: {pathPrefix: /slow}, upstream: {targets: [{url: "http://%s"}], timeout: 200ms}}
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: "http://%s"}]}}
`, refusedAddr, up, up))
	if r := exchange(t, addr, "GET /refused HTTP/1.1\r\nHost: x\r\n\r\n", 1)[0]; r.StatusCode != 502 {
		t.Fatalf("refused target: %d", r.StatusCode)
	}
	start := time.Now()
	if r := exchange(t, addr, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n", 1)[0]; r.StatusCode != 504 || time.Since(start) > 1500*time.Millisecond {
		t.Fatalf("slow target: %d after %v", r.StatusCode, time.Since(start))
	}
	if r := exchange(t, addr, "GET /cut HTTP/1.1\r\nHost: x\r\n\r\n", 1)[0]; r.StatusCode != 502 {
		t.Fatalf("cut answer: %d", r.StatusCode)
	}
	if r := exchange(t, addr, "GET /huge HTTP/1.1\r\nHost: x\r\n\r\n", 1)[0]; r.StatusCode != 502 {
		t.Fatalf("huge answer header: %d", r.StatusCode)
	}
	// Two requests on one client connection share one upstream
	// connection: the second finds it closed, unanswered.
	rs := exchange(t, addr, "GET /stale HTTP/1.1\r\nHost: x\r\n\r\nGET /again HTTP/1.1\r\nHost: x\r\n\r\n", 2)
	if bodyOf(rs[0]) != "first" || rs[1].StatusCode != 200 {
		t.Fatalf("GET after a stale connection: %q, %d", bodyOf(rs[0]), rs[1].StatusCode)
	}
	rs = exchange(t, addr, "GET /stale HTTP/1.1\r\nHost: x\r\n\r\nPOST /again HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx", 2)
	if bodyOf(rs[0]) != "first" || rs[1].StatusCode != 502 {
		t.Fatalf("POST after a stale connection: %q, %d (a POST is not sent twice)", bodyOf(rs[0]), rs[1].StatusCode)
	}
}

// TestLoopBodyTimeout: a body that stalls before it is whole is answered
// 408 after the rules' shortest bodyTimeout, and the connection closed.
func TestLoopBodyTimeout(t *testing.T) {
	up := okUpstream(t)
	_, addr := startLoop(t, fmt.Sprintf("namespace: loop\nroutes:\n  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}], bodyTimeout: 300ms}}\n", up.URL))
	start := time.Now()
	status, closed := sendStrict(t, addr, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n01234")
	if status != http.StatusRequestTimeout || !closed || time.Since(start) > 3*time.Second {
		t.Fatalf("stalled body: %d (closed %v) after %v", status, closed, time.Since(start))
	}
}

// TestLoopDrain: on shutdown an idle keep-alive connection is closed, a
// request in flight is answered with "Connection: close", and the node
// stops once it is out.
func TestLoopDrain(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		_, _ = io.WriteString(w, "done")
	}))
	t.Cleanup(up.Close)
	n := New(Config{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", ShutdownTimeout: 5 * time.Second})
	rules := fmt.Sprintf("namespace: loop\nroutes:\n  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}\n", up.URL)
	if err := n.Apply(context.Background(), source.Update{Data: []byte(rules), Version: 1, Source: "test"}); err != nil {
		t.Fatal(err)
	}
	ls, err := n.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Serve(ctx, ls) }()
	addr := ls.Traffic.Addr().String()

	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	_ = idle.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	ibr := bufio.NewReader(idle)
	readAnswers(t, ibr, 1)

	busy, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	_ = busy.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	time.Sleep(100 * time.Millisecond) // the request reaches the upstream
	cancel()
	if _, err := ibr.ReadByte(); err != io.EOF {
		t.Fatalf("the idle connection: %v, want it closed", err)
	}
	close(release)
	r := readAnswers(t, bufio.NewReader(busy), 1)[0]
	if bodyOf(r) != "done" || !r.Close {
		t.Fatalf("in flight: %q, close %v", bodyOf(r), r.Close)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
}

// TestDrainOffLoop: a drain waits for a request served off the loop (a
// chunked upload still coming), whose answer says "Connection: close", but
// not for a WebSocket relay, which it closes once the requests are done;
// Serve then returns without error.
func TestDrainOffLoop(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "got %d", len(b))
	}))
	t.Cleanup(up.Close)
	ws := newSwitchingUpstream(t)
	_, addr, stop := startLoopNode(t, fmt.Sprintf(`namespace: loop
routes:
  - {id: ws, match: {pathPrefix: /ws}, upstream: {targets: [{url: "http://%s"}]}}
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}
`, ws.ln.Addr(), up.URL), Config{ShutdownTimeout: 5 * time.Second})
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		return c, bufio.NewReader(c)
	}

	sock, sbr := dial()
	_, _ = io.WriteString(sock, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
	if r, err := http.ReadResponse(sbr, nil); err != nil || r.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", r, err)
	}
	_, _ = io.WriteString(sock, "ping\n")
	if line, err := sbr.ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("through the relay: %q %v", line, err)
	}

	upload, ubr := dial()
	_, _ = io.WriteString(upload, "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
	time.Sleep(100 * time.Millisecond) // the upload is under way
	done := make(chan error, 1)
	go func() { done <- stop() }()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Serve returned (%v) with an upload still coming", err)
	default:
	}
	_, _ = io.WriteString(upload, "2\r\nde\r\n0\r\n\r\n")
	r := readAnswers(t, ubr, 1)[0]
	if bodyOf(r) != "got 5" || !r.Close {
		t.Fatalf("the upload: %q, close %v", bodyOf(r), r.Close)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("Serve did not return: it waited for the WebSocket")
	}
	if _, err := sbr.ReadByte(); err != io.EOF {
		t.Fatalf("the WebSocket after the drain: %v, want it closed", err)
	}
}

// TestOffLoopUnreadBody: a long upload the gateway answers itself without
// reading (no route matches: 404): what is left of the body is read and
// dropped after the answer, and the request pipelined behind it is served on
// the same connection, back on its loop; past 256 KiB left unread, the
// connection closes after the answer instead.
func TestOffLoopUnreadBody(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "up "+r.URL.Path)
	}))
	t.Cleanup(up.Close)
	n, addr := startLoop(t, fmt.Sprintf("namespace: loop\nroutes:\n  - {id: api, match: {pathPrefix: /api}, upstream: {targets: [{url: %q}]}}\n", up.URL))
	body := strings.Repeat("e", 100<<10)
	rs := exchange(t, addr, fmt.Sprintf("POST /none HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%sGET /api/next HTTP/1.1\r\nHost: x\r\n\r\n", len(body), body), 2)
	if rs[0].StatusCode != http.StatusNotFound || rs[0].Close || bodyOf(rs[1]) != "up /api/next" {
		t.Fatalf("answers %d (close %v), %d %q", rs[0].StatusCode, rs[0].Close, rs[1].StatusCode, bodyOf(rs[1]))
	}
	if h := handoffs(t, n); h[metrics.HandoffBody] != 1 {
		t.Fatalf("served off the loop %v, want body 1", h)
	}

	// 1 MiB unread: answered, then closed.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	big := strings.Repeat("b", 1<<20)
	go func() {
		_, _ = fmt.Fprintf(c, "POST /none HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(big), big)
	}()
	br := bufio.NewReader(c)
	r := readAnswers(t, br, 1)[0]
	if r.StatusCode != http.StatusNotFound {
		t.Fatalf("1 MiB unread: %d", r.StatusCode)
	}
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("1 MiB unread: the connection stayed open")
	}
}

// TestHTTP10StreamedAnswer: an answer of unknown length (the upstream's is
// chunked) goes to an HTTP/1.0 client without a transfer coding, which it
// could not read (RFC 9112 §6.1), its body ended by the connection's
// close, even when the client asked to keep the connection alive.
func TestHTTP10StreamedAnswer(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "one ")
		w.(http.Flusher).Flush() // no Content-Length: chunked
		_, _ = io.WriteString(w, "two")
	}))
	t.Cleanup(up.Close)
	_, addr := startLoop(t, fmt.Sprintf("namespace: loop\nroutes:\n  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}\n", up.URL))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(c, "GET /s HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n")
	raw, err := io.ReadAll(c) // to the close
	if err != nil {
		t.Fatal(err)
	}
	head, body, _ := strings.Cut(string(raw), "\r\n\r\n")
	if strings.Contains(strings.ToLower(head), "transfer-encoding") || !strings.Contains(strings.ToLower(head), "connection: close") || body != "one two" {
		t.Fatalf("answer to HTTP/1.0:\n%s\n\nbody %q", head, body)
	}
}
