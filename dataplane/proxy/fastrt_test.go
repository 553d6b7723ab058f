package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
)

// mustFastTransport returns the client Forward uses for the cleartext
// HTTP/1.1 target url, on a Transport of its own released when the test
// ends.
func mustFastTransport(tb testing.TB, url string) *fastTransport {
	tb.Helper()
	tr := quietTransports()
	t, err := parseTarget(url)
	if err != nil {
		tb.Fatal(err)
	}
	t.tr = tr
	if t.origin, err = tr.acquireWire(&api.Upstream{}, url, t.originKey(url)); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { tr.release(t.origin) })
	ft, ok := t.roundTripper().(*fastTransport)
	if !ok {
		tb.Fatalf("%s: Forward's client is %T, want *fastTransport", url, t.roundTripper())
	}
	return ft
}

// rawUpstream is a loopback upstream that hands each connection, and a
// reader over it, to serve; closed reports each connection's end as the
// upstream saw it (its read of the client's side failing: the gateway
// closed it).
type rawUpstream struct {
	addr   string
	closed chan error
}

func newRawUpstream(tb testing.TB, serve func(c net.Conn, br *bufio.Reader)) *rawUpstream {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	u := &rawUpstream{addr: ln.Addr().String(), closed: make(chan error, 16)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				serve(c, br)
				// Wait for the gateway to close its side.
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				_, err := io.Copy(io.Discard, br)
				u.closed <- err
			}()
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		<-done
	})
	return u
}

// readRequestHead reads a request's header from br.
func readRequestHead(tb testing.TB, br *bufio.Reader) *http.Request {
	req, err := http.ReadRequest(br)
	if err != nil {
		tb.Errorf("upstream reading the request: %v", err)
		return nil
	}
	return req
}

// wantClosed checks that the upstream saw the gateway close its connection
// (not keep it for another request) within a second.
func wantClosed(tb testing.TB, u *rawUpstream) {
	tb.Helper()
	select {
	case err := <-u.closed:
		if err != nil {
			tb.Errorf("upstream connection: %v, want closed by the gateway (EOF)", err)
		}
	case <-time.After(time.Second):
		tb.Errorf("the gateway kept the upstream connection")
	}
}

// TestFastTransportCancel: when the request's context ends before the
// answer, or while its body is read, the exchange ends at once with the
// context's error and the upstream connection is closed.
func TestFastTransportCancel(t *testing.T) {
	t.Parallel()
	t.Run("before the answer", func(t *testing.T) {
		t.Parallel()
		got := make(chan struct{})
		up := newRawUpstream(t, func(c net.Conn, br *bufio.Reader) {
			readRequestHead(t, br)
			close(got) // and never answer
		})
		ft := mustFastTransport(t, "http://"+up.addr)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-got
			cancel()
		}()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+up.addr+"/wait", nil)
		start := time.Now()
		resp, err := ft.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("RoundTrip: %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("RoundTrip returned after %s", d)
		}
		wantClosed(t, up)
	})
	t.Run("mid-body", func(t *testing.T) {
		t.Parallel()
		up := newRawUpstream(t, func(c net.Conn, br *bufio.Reader) {
			readRequestHead(t, br)
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial")
		})
		ft := mustFastTransport(t, "http://"+up.addr)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+up.addr+"/", nil)
		resp, err := ft.RoundTrip(req)
		if err != nil {
			t.Fatalf("RoundTrip: %v", err)
		}
		defer resp.Body.Close()
		if resp.ContentLength != 1000 {
			t.Errorf("ContentLength %d, want 1000", resp.ContentLength)
		}
		b := make([]byte, 7)
		if _, err := io.ReadFull(resp.Body, b); err != nil || string(b) != "partial" {
			t.Fatalf("read %q, %v", b, err)
		}
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		_, err = resp.Body.Read(make([]byte, 100))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Body.Read: %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Body.Read returned after %s", d)
		}
		resp.Body.Close()
		wantClosed(t, up)
	})
	t.Run("deadline is a timeout", func(t *testing.T) {
		t.Parallel()
		up := newRawUpstream(t, func(c net.Conn, br *bufio.Reader) {
			readRequestHead(t, br)
		})
		ft := mustFastTransport(t, "http://"+up.addr)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+up.addr+"/", nil)
		resp, err := ft.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("RoundTrip: %v (%T), want a net.Error timeout", err, err)
		}
		wantClosed(t, up)
	})
}

// TestFastTransportStreams: the request body goes upstream as it comes
// (chunked when its length is unknown), and the response body reaches the
// caller as the upstream writes it.
func TestFastTransportStreams(t *testing.T) {
	t.Parallel()
	firstIn := make(chan string, 1)
	firstOut := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 5)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			t.Errorf("upstream reading the first part: %v", err)
		}
		firstIn <- string(b) + " " + strings.Join(r.TransferEncoding, ",")
		rest, _ := io.ReadAll(r.Body)
		_, _ = fmt.Fprintf(w, "got:%s%s;", b, rest)
		http.NewResponseController(w).Flush()
		<-firstOut
		_, _ = io.WriteString(w, "more")
	}))
	t.Cleanup(up.Close)
	ft := mustFastTransport(t, up.URL)
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", up.URL+"/stream", pr)
	req.ContentLength = -1
	go func() {
		_, _ = io.WriteString(pw, "first")
		if got := <-firstIn; got != "first chunked" {
			t.Errorf("upstream got %q before the body ended, want \"first chunked\"", got)
		}
		_, _ = io.WriteString(pw, "-second")
		pw.Close()
	}()
	resp, err := ft.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	defer resp.Body.Close()
	if resp.ContentLength != -1 {
		t.Errorf("ContentLength %d, want -1 (chunked)", resp.ContentLength)
	}
	b := make([]byte, len("got:first-second;"))
	if _, err := io.ReadFull(resp.Body, b); err != nil || string(b) != "got:first-second;" {
		t.Fatalf("first part %q, %v", b, err)
	}
	close(firstOut) // the upstream writes the rest only now
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != "more" {
		t.Errorf("rest %q, %v", rest, err)
	}
}

// TestFastTransportHeaders: every value of a repeated field goes both
// ways, in order, under canonical keys; framing fields are the
// transport's; a response without Content-Type gets none.
func TestFastTransportHeaders(t *testing.T) {
	t.Parallel()
	seenc := make(chan *http.Request, 1)
	up := newRawUpstream(t, func(c net.Conn, br *bufio.Reader) {
		seenc <- readRequestHead(t, br)
		_, _ = io.WriteString(c, "HTTP/1.1 201 Created\r\n"+
			"x-lower-case: one\r\nX-Multi: a\r\nset-cookie: a=1\r\nX-Multi: b\r\nSet-Cookie: a=2; Path=/\r\n"+
			"Content-Length: 2\r\nConnection: close\r\n\r\nok")
	})
	ft := mustFastTransport(t, "http://"+up.addr)
	req, _ := http.NewRequest("GET", "http://"+up.addr+"/h?q=1&q=2", nil)
	req.Host = "virtual.test"
	req.Header["X-Multi"] = []string{"x", "y"}
	req.Header["Cookie"] = []string{"a=1; b=2"}
	req.Header["User-Agent"] = []string{""} // as ReverseProxy sets it: none sent
	req.Header["Expect"] = []string{"100-continue"}
	resp, err := ft.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	got := <-seenc
	if got != nil {
		if got.RequestURI != "/h?q=1&q=2" || got.Host != "virtual.test" {
			t.Errorf("upstream got %s %s", got.Host, got.RequestURI)
		}
		for k, want := range map[string][]string{"X-Multi": {"x", "y"}, "Cookie": {"a=1; b=2"}, "User-Agent": nil, "Expect": nil} {
			if !reflect.DeepEqual(got.Header[k], want) {
				t.Errorf("upstream got %s %q, want %q", k, got.Header[k], want)
			}
		}
	}
	if resp.StatusCode != 201 || resp.Status != "201 Created" || string(body) != "ok" || !resp.Close {
		t.Errorf("response %s %q close=%v", resp.Status, body, resp.Close)
	}
	for k, want := range map[string][]string{
		"X-Lower-Case":   {"one"},
		"X-Multi":        {"a", "b"},
		"Set-Cookie":     {"a=1", "a=2; Path=/"},
		"Content-Length": {"2"},
		"Content-Type":   nil,
		"Connection":     nil,
	} {
		if !reflect.DeepEqual(resp.Header[k], want) {
			t.Errorf("response %s %q, want %q (header %v)", k, resp.Header[k], want, resp.Header)
		}
	}
	wantClosed(t, up)
}

// TestFastForwardTimeout: through Forward, a target slower than the
// route's timeout is answered 504 and reported as a timeout, and its
// connection is not kept.
func TestFastForwardTimeout(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t, func(c net.Conn, br *bufio.Reader) {
		readRequestHead(t, br) // and never answer
	})
	outcomes := make(chan Outcome, 1)
	rt := mustCompile(t, oneRoute("r", "{}", fmt.Sprintf(`{timeout: 100ms, targets: [{url: "http://%s"}]}`, up.addr)), false)
	gw := httptest.NewUnstartedServer(H2CHandler(gatewayHandler(rt, outcomes)))
	gw.Start()
	t.Cleanup(gw.Close)
	resp, err := h2cClient().Post(gw.URL+"/slow", "text/plain", bytes.NewReader([]byte("body")))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout || resp.ProtoMajor != 2 {
		t.Errorf("status %d over %s, want 504 over HTTP/2", resp.StatusCode, resp.Proto)
	}
	if o := <-outcomes; o.Status != http.StatusGatewayTimeout || !o.Timeout || o.Err == nil || o.ClientGone {
		t.Errorf("outcome %+v, want a 504 timeout", o)
	}
	wantClosed(t, up)
}

// TestFastForwardH2C: an HTTP/2 request reaches a cleartext HTTP/1.1
// target through fastTransport with Forward's header rules, and the
// connection is kept for the next request.
func TestFastForwardH2C(t *testing.T) {
	t.Parallel()
	up := newCountingServer(t, echoHandler("up").ServeHTTP)
	rt := mustCompile(t, oneRoute("r", "{}", fmt.Sprintf(`{targets: [{url: "http://%s"}]}`, up.addr)), false)
	gw := httptest.NewUnstartedServer(H2CHandler(gatewayHandler(rt, nil)))
	gw.Start()
	t.Cleanup(gw.Close)
	c := h2cClient()
	for i := range 3 {
		req, _ := http.NewRequest("GET", gw.URL+"/h2?i=1", nil)
		req.Header["X-Multi"] = []string{"a", "b"}
		resp, s := getSeen(t, c, req)
		if resp.StatusCode != 200 || s.Proto != "HTTP/1.1" || s.RequestURI != "/h2?i=1" {
			t.Fatalf("request %d: status %d; upstream saw %q over %s", i, resp.StatusCode, s.RequestURI, s.Proto)
		}
		if !reflect.DeepEqual(s.Header["X-Multi"], []string{"a", "b"}) || s.Header.Get("Via") == "" ||
			s.Header.Get("X-Forwarded-For") == "" || s.Header.Get(api.HeaderRequestID) == "" {
			t.Errorf("upstream saw header %v", s.Header)
		}
		if resp.Header.Get("X-Upstream") != "up" || resp.Header.Get(api.HeaderRequestID) == "" {
			t.Errorf("client got header %v", resp.Header)
		}
	}
	if n := up.conns.Load(); n != 1 {
		t.Errorf("upstream accepted %d connections, want 1 (kept alive)", n)
	}
}

// TestFastTransportEarlyAnswer: an upstream that answers before it has
// read the request's body, and closes, has its answer relayed (as
// net/http's client does), not a 502.
func TestFastTransportEarlyAnswer(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t, func(c net.Conn, br *bufio.Reader) {
		readRequestHead(t, br)
		_, _ = io.WriteString(c, "HTTP/1.1 413 Content Too Large\r\nContent-Length: 3\r\nConnection: close\r\n\r\nbig")
		c.Close() // unread data: the kernel resets the connection
	})
	ft := mustFastTransport(t, "http://"+up.addr)
	body := bytes.Repeat([]byte("x"), 16<<20)
	req, _ := http.NewRequest("POST", "http://"+up.addr+"/upload", bytes.NewReader(body))
	resp, err := ft.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || string(b) != "big" || err != nil {
		t.Errorf("got %d %q (%v), want 413 \"big\"", resp.StatusCode, b, err)
	}
}

// TestFastTransportStaleConnection: a kept-alive connection the upstream
// closed meanwhile costs an idempotent request nothing (it is sent again on
// a new connection, as net/http's client does); a POST is not replayed.
func TestFastTransportStaleConnection(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc   string
		method string
		want   bool // answered
	}{
		{desc: "GET is sent again", method: "GET", want: true},
		{desc: "POST is not", method: "POST", want: false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			gone := make(chan struct{}, 4)
			up := newRawUpstream(t, func(c net.Conn, br *bufio.Reader) {
				readRequestHead(t, br)
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				c.Close() // without saying so: the connection looks kept alive
				gone <- struct{}{}
			})
			ft := mustFastTransport(t, "http://"+up.addr)
			send := func(method string) (*http.Response, error) {
				req, _ := http.NewRequest(method, "http://"+up.addr+"/", nil)
				resp, err := ft.RoundTrip(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				return resp, err
			}
			if _, err := send("GET"); err != nil {
				t.Fatalf("first request: %v", err)
			}
			<-gone
			time.Sleep(20 * time.Millisecond) // the FIN reaches the pooled connection
			resp, err := send(tc.method)
			if tc.want && (err != nil || resp.StatusCode != 200) {
				t.Errorf("%s on a stale connection: %v", tc.method, err)
			}
			if !tc.want && err == nil {
				t.Errorf("%s on a stale connection was sent again", tc.method)
			}
		})
	}
}

// TestFastTransportFraming: bodies of every framing arrive whole, and
// answers without one have none.
func TestFastTransportFraming(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc     string
		method   string
		answer   string
		wantBody string
		wantCL   int64
	}{
		{desc: "length", method: "GET", answer: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", wantBody: "hello", wantCL: 5},
		{desc: "chunked", method: "GET", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", wantBody: "hello", wantCL: -1},
		{desc: "until close", method: "GET", answer: "HTTP/1.1 200 OK\r\n\r\nhello", wantBody: "hello", wantCL: -1},
		{desc: "HEAD keeps the length", method: "HEAD", answer: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", wantCL: 5},
		{desc: "204", method: "GET", answer: "HTTP/1.1 204 No Content\r\n\r\n", wantCL: 0},
		{desc: "interim answers skipped", method: "GET", answer: "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", wantBody: "ok", wantCL: 2},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			up := newRawUpstream(t, func(c net.Conn, br *bufio.Reader) {
				readRequestHead(t, br)
				_, _ = io.WriteString(c, tc.answer)
				if tc.desc == "until close" {
					c.Close()
				}
			})
			ft := mustFastTransport(t, "http://"+up.addr)
			req, _ := http.NewRequest(tc.method, "http://"+up.addr+"/", nil)
			resp, err := ft.RoundTrip(req)
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(b) != tc.wantBody || resp.ContentLength != tc.wantCL {
				t.Errorf("body %q (%v), ContentLength %d; want %q, %d", b, err, resp.ContentLength, tc.wantBody, tc.wantCL)
			}
			if tc.desc == "interim answers skipped" && resp.Header["Link"] != nil {
				t.Errorf("an interim answer's header reached the final one: %v", resp.Header)
			}
		})
	}
}

// TestChunkReady: a chunked body's buffered rest is ready to read at once
// only with a whole line and something after it.
func TestChunkReady(t *testing.T) {
	for _, tc := range []struct {
		buf  string
		want bool
	}{
		{"", false},
		{"1a", false},
		{"1a\r", false},
		{"1a\r\n", false},
		{"1a\r\nx", true},
		{"0\r\n\r\n", true},
		{"data without a line end", false},
	} {
		if got := chunkReady([]byte(tc.buf)); got != tc.want {
			t.Errorf("chunkReady(%q) = %v, want %v", tc.buf, got, tc.want)
		}
	}
}
