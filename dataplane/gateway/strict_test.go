package gateway

import (
	"bufio"
	"cmp"
	"errors"
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

// TestStrictParsing: request shapes that proxies and upstreams could frame
// or route differently (request smuggling, RFC 9112 §6.3, §5.2, §3.2) are
// refused with 400 before any route sees them, and the connection is closed
// after the answer, so that nothing the client sent after them is read as
// another request. Each case is one raw request over its own TCP
// connection to a real node, followed by a smuggled second request that
// must never reach the upstream.
func TestStrictParsing(t *testing.T) {
	var reached atomic.Int32
	up := okUpstreamCounting(t, &reached)
	_, base, _ := MustStart(t, fmt.Sprintf(`namespace: strict
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}
`, up))
	addr := strings.TrimPrefix(base, "http://")
	const smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
	tests := []struct {
		desc   string
		req    string
		status int // 0: 400
	}{
		{"two different Content-Lengths", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde", 0},
		{"two Content-Lengths in one line", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 4, 5\r\n\r\nabcde", 0},
		{"a signed Content-Length", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: +4\r\n\r\nabcd", 0},
		{"a Transfer-Encoding that is not chunked", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\nabcd", http.StatusNotImplemented},
		{"chunked twice", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", http.StatusNotImplemented},
		{"a space before the colon", "GET /a HTTP/1.1\r\nHost: x\r\nContent-Length : 0\r\n\r\n", 0},
		{"a header name with a space", "GET /a HTTP/1.1\r\nHost: x\r\nX Bad: 1\r\n\r\n", 0},
		{"no Host", "GET /a HTTP/1.1\r\n\r\n", 0},
		{"two Hosts", "GET /a HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 0},
		{"a NUL in a header value", "GET /a HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n", 0},
		{"a bare CR in a header value", "GET /a HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n", 0},
		{"an absolute-form target for another host", "GET http://elsewhere.example/a HTTP/1.1\r\nHost: x\r\n\r\n", 0},
		{"an asterisk-form target", "GET * HTTP/1.1\r\nHost: x\r\n\r\n", 0},
		{"a target without a slash", "GET a HTTP/1.1\r\nHost: x\r\n\r\n", 0},
		{"an unknown HTTP version", "GET /a HTTP/1.2x\r\nHost: x\r\n\r\n", 0},
		{"HTTP/2 as an HTTP/1 version", "GET /a HTTP/2.0\r\nHost: x\r\n\r\n", http.StatusHTTPVersionNotSupported},
		{"an absolute-form target for this host", "GET http://x/a HTTP/1.1\r\nHost: x\r\n\r\n", 0},

		{"a space in the target", "GET /a b HTTP/1.1\r\nHost: x\r\n\r\n", 0},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			want := cmp.Or(tc.status, http.StatusBadRequest)
			before := reached.Load()
			status, closed := sendStrict(t, addr, tc.req+smuggled)
			if status != want {
				t.Fatalf("status %d, want %d", status, want)
			}
			if !closed {
				t.Fatal("the connection stayed open after the 400")
			}
			if n := reached.Load() - before; n != 0 {
				t.Fatalf("%d requests reached the upstream", n)
			}
		})
	}
	// The chunked framing is checked as the body is read: a bad chunk size
	// ends the request before any of it is relayed as valid, and nothing
	// after it on the connection is read as a request.
	chunked := []struct {
		desc string
		body string
	}{
		{"a chunk size that is not hex", "zz\r\nabc\r\n0\r\n\r\n"},
		{"a chunk size with a sign", "+3\r\nabc\r\n0\r\n\r\n"},
		{"a chunk size that overflows", "ffffffffffffffffff\r\nabc\r\n0\r\n\r\n"},
		{"a chunk without its CRLF", "3\r\nabcX\r\n0\r\n\r\n"},
	}
	for _, tc := range chunked {
		t.Run(tc.desc, func(t *testing.T) {
			status, closed := sendStrict(t, addr, "POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"+tc.body+smuggled)
			if status < 400 {
				t.Fatalf("status %d, want an error", status)
			}
			if !closed {
				t.Fatal("the connection stayed open after a bad chunk")
			}
		})
	}
	if n := smuggledSeen.Load(); n != 0 {
		t.Fatalf("the smuggled request reached the upstream %d times", n)
	}
	// The node still serves well-formed requests on a fresh connection.
	if status, closed := sendStrict(t, addr, "GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); status != 200 || !closed {
		t.Fatalf("a valid request: %d (closed %v)", status, closed)
	}
}

// smuggledSeen counts requests for /smuggled at okUpstreamCounting's upstreams.
var smuggledSeen atomic.Int32

// okUpstreamCounting is an upstream that answers ok and counts requests
// (and, apart, requests for /smuggled); it reads request bodies whole.
func okUpstreamCounting(tb testing.TB, n *atomic.Int32) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/smuggled" {
			smuggledSeen.Add(1)
		}
		if r.URL.Path != "/chunked" {
			n.Add(1)
		}
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok")
	})}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// sendStrict writes req on a new connection and returns the first answer's
// status and whether the node closed the connection after it (read EOF or
// reset within a second, with no second answer).
func sendStrict(tb testing.TB, addr, req string) (status int, closed bool) {
	tb.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		tb.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		tb.Fatalf("reading the answer to %q: %v", req, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	_, err = br.ReadByte()
	var ne net.Error
	closed = errors.Is(err, io.EOF) || (err != nil && !(errors.As(err, &ne) && ne.Timeout()))
	return resp.StatusCode, closed
}

// TestNormalizedFraming: the two smuggling shapes RFC 9112 lets a server
// normalize instead of refusing, both Content-Length and chunked
// Transfer-Encoding (§6.3) and an obs-fold (§5.2), are refused with 400 and
// the connection closed, and nothing reaches the upstream, so that the
// gateway and the upstream cannot read them two ways.
func TestNormalizedFraming(t *testing.T) {
	got := make(chan string, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Method + " " + r.URL.Path
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(up.Close)
	_, base, _ := MustStart(t, fmt.Sprintf(`namespace: strict
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}
`, up.URL))
	addr := strings.TrimPrefix(base, "http://")
	tests := []struct {
		desc string
		req  string
	}{
		{"Content-Length and chunked", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n"},
		{"obs-fold", "GET /a HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\nConnection: close\r\n\r\n"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			status, closed := sendStrict(t, addr, tc.req)
			if status != http.StatusBadRequest || !closed {
				t.Fatalf("status %d (closed %v), want 400 and the connection closed", status, closed)
			}
			select {
			case s := <-got:
				t.Fatalf("the upstream saw %s", s)
			default:
			}
		})
	}
}
