package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestBodyStallOutcome: a client whose body stalls past bodyTimeout gets 408
// problem+json with Connection: close, and the Outcome blames the client
// (ClientGone, no Err), not the upstream, so breakers do not count it.
func TestBodyStallOutcome(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(up.Close)
	rt := mustCompile(t, oneRoute("r", "{pathPrefix: /}", fmt.Sprintf(`{targets: [{url: "%s"}], bodyTimeout: 300ms}`, up.URL)), false)
	outcomes := make(chan Outcome, 1)
	gw := newGateway(t, rt, outcomes)
	c, err := net.Dial("tcp", strings.TrimPrefix(gw.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(c, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !resp.Close ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") || !strings.Contains(string(body), "300ms") {
		t.Fatalf("stalled body: %d close=%v %s %s", resp.StatusCode, resp.Close, resp.Header.Get("Content-Type"), body)
	}
	o := <-outcomes
	if o.Status != http.StatusRequestTimeout || !o.ClientGone || o.Err != nil || o.Timeout {
		t.Errorf("outcome %+v, want 408, ClientGone, no Err, no upstream Timeout", o)
	}
}

// TestBodyStallRouteTimeout: a client that sends its header and part of its
// body, then nothing, is answered by whichever of the route's two timeouts
// fires first: the route's timeout is a prompt 504 (problem+json, the
// client's connection closed after it, the upstream's connection closed,
// not pooled, and an Outcome that counts a timeout), bodyTimeout a 408 as
// before (TestBodyStallOutcome).
func TestBodyStallRouteTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc                 string
		timeout, bodyTimeout string
		status               int
		detail               string
	}{
		{desc: "route timeout first", timeout: "200ms", bodyTimeout: "5s", status: http.StatusGatewayTimeout, detail: "within 200ms"},
		{desc: "body timeout first", timeout: "5s", bodyTimeout: "200ms", status: http.StatusRequestTimeout, detail: "nothing arrived for 200ms"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
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
			rt := mustCompile(t, oneRoute("r", "{pathPrefix: /}", fmt.Sprintf(`{targets: [{url: "%s"}], timeout: %s, bodyTimeout: %s}`,
				up.URL, tc.timeout, tc.bodyTimeout)), false)
			outcomes := make(chan Outcome, 1)
			gw := newGateway(t, rt, outcomes)
			c, err := net.Dial("tcp", strings.TrimPrefix(gw.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			start := time.Now()
			_, _ = io.WriteString(c, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			took := time.Since(start)
			if resp.StatusCode != tc.status || !resp.Close ||
				!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") || !strings.Contains(string(body), tc.detail) {
				t.Fatalf("stalled body: %d close=%v %s %s after %v, want %d", resp.StatusCode, resp.Close, resp.Header.Get("Content-Type"), body, took, tc.status)
			}
			if took > 2*time.Second { // generous for a loaded machine; the other timeout is 5s
				t.Errorf("answered after %v", took)
			}
			if n, err := br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
				t.Errorf("client connection after the answer: read %d, %v; want it closed", n, err)
			}
			o := <-outcomes
			switch tc.status {
			case http.StatusGatewayTimeout:
				if o.Status != tc.status || !o.Timeout || o.ClientGone || o.Err == nil {
					t.Errorf("outcome %+v, want 504, Timeout, Err, not ClientGone", o)
				}
			default:
				if o.Status != tc.status || !o.ClientGone || o.Err != nil || o.Timeout {
					t.Errorf("outcome %+v, want 408, ClientGone, no Err, no upstream Timeout", o)
				}
			}
			// The upstream connection is closed, not pooled.
			for deadline := time.Now().Add(2 * time.Second); closed.Load() < opened.Load(); {
				if time.Now().After(deadline) {
					t.Fatalf("upstream connections: %d opened, %d closed", opened.Load(), closed.Load())
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// routeDeadlineBody gives some bytes, then fails as the fasthttp engine's
// body (fastReqBody) does once the route's deadline, counted from the
// engine's start, has passed.
type routeDeadlineBody struct{ sent bool }

func (b *routeDeadlineBody) Read(p []byte) (int, error) {
	if !b.sent {
		b.sent = true
		return copy(p, "abc"), nil
	}
	return 0, errRouteDeadline{}
}

func (b *routeDeadlineBody) Close() error { return nil }

// TestBridgedBodyPastRouteDeadline: on the fasthttp engine's bridge the
// client's body is read with the route's deadline counted from the
// engine's start, a little before Forward's own timer fires; a read that
// fails for that deadline is the route's timeout, 504, not an upstream that
// could not be reached (502), whichever of the two comes first. (It failed
// under load in CI: 502 after 206 ms on a 200 ms route.) The route's own
// timer here is far off, so only the body's error can say so.
func TestBridgedBodyPastRouteDeadline(t *testing.T) {
	t.Parallel()
	for _, scheme := range []string{"http", "h2c"} {
		t.Run(scheme, func(t *testing.T) {
			t.Parallel()
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })
			target := ""
			if scheme == "h2c" {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				srv := &http.Server{Handler: h, Protocols: new(http.Protocols)}
				srv.Protocols.SetUnencryptedHTTP2(true)
				go func() { _ = srv.Serve(ln) }()
				t.Cleanup(func() { srv.Close() })
				target = "h2c://" + ln.Addr().String()
			} else {
				up := httptest.NewServer(h)
				t.Cleanup(up.Close)
				target = up.URL
			}
			rt := mustCompile(t, oneRoute("r", "{pathPrefix: /}", fmt.Sprintf(`{targets: [{url: %q}], timeout: 30s}`, target)), false)
			r := httptest.NewRequest(http.MethodPost, "/x", &routeDeadlineBody{})
			r.ContentLength = 100
			w := httptest.NewRecorder()
			m := rt.Match(r)
			o := m.Route.Upstream.Forward(w, r, m)
			if w.Code != http.StatusGatewayTimeout || !strings.Contains(w.Body.String(), "within 30s") {
				t.Fatalf("answered %d %s; want 504 saying the route's timeout", w.Code, w.Body)
			}
			if !o.Timeout || o.Status != http.StatusGatewayTimeout {
				t.Errorf("outcome %+v, want a 504 Timeout", o)
			}
		})
	}
}
