package snapshot

import (
	"bufio"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// fastCtx is a fasthttp request context holding the raw request head.
func fastCtx(tb testing.TB, head string) *fasthttp.RequestCtx {
	tb.Helper()
	var req fasthttp.Request
	if err := req.Header.Read(bufio.NewReader(strings.NewReader(head))); err != nil {
		tb.Fatal(err)
	}
	ctx := new(fasthttp.RequestCtx)
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 4000}, nil)
	return ctx
}

// TestFastView: the view the fasthttp Exchange builds reads like
// reqview.FromRequest's: method, host, escaped path, raw query, canonical
// header names with every line kept in order, the client's request id kept
// when valid and a trace started when none came.
func TestFastView(t *testing.T) {
	tests := []struct {
		desc, head              string
		method, host, path, raw string
		header                  map[string][]string
		keepID, started         bool
		length                  int64 // the view's ContentLength, as net/http gives it
	}{
		{"a plain GET", "GET /a%2Fb/c?x=1&y=%20 HTTP/1.1\r\nHost: h.test\r\nx-user: alice\r\nCookie: a=1\r\nCookie: b=2\r\n\r\n",
			"GET", "h.test", "/a%2Fb/c", "x=1&y=%20",
			map[string][]string{"X-User": {"alice"}, "Cookie": {"a=1", "b=2"}}, false, true, 0},
		{"ids and a trace kept", "POST /p HTTP/1.1\r\nHost: h\r\nX-Request-Id: client-1\r\nTraceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nContent-Length: 0\r\n\r\n",
			"POST", "h", "/p", "", map[string][]string{"Content-Length": {"0"}}, true, false, 0},
		{"a body of known length", "PUT /p HTTP/1.1\r\nHost: h\r\nContent-Length: 12\r\n\r\n",
			"PUT", "h", "/p", "", nil, false, true, 12},
		{"a chunked body", "POST /p HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n",
			"POST", "h", "/p", "", nil, false, true, -1},
		// fasthttp reports "no framing header" as -2; for a request that is
		// no body, and a body-cost limit must charge it 1 unit, not a burst.
		{"a POST without framing headers", "POST /p HTTP/1.1\r\nHost: h\r\n\r\n",
			"POST", "h", "/p", "", nil, false, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			x := fastExchanges.Get().(*fastExchange)
			defer func() { x.reset(); fastExchanges.Put(x) }()
			ctx := fastCtx(t, tc.head)
			x.ctx = ctx
			v := x.fill(ctx, nil)
			if v.Method != tc.method || v.Host != tc.host || v.RawPath != tc.path || v.RawQuery != tc.raw {
				t.Fatalf("view %q %q %q %q, want %q %q %q %q", v.Method, v.Host, v.RawPath, v.RawQuery, tc.method, tc.host, tc.path, tc.raw)
			}
			for k, want := range tc.header {
				if got := v.Header()[k]; strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("header %s %q, want %q", k, got, want)
				}
			}
			if tc.keepID != (v.RequestID == "client-1") {
				t.Errorf("request id %q (keep %v)", v.RequestID, tc.keepID)
			}
			if v.ContentLength != tc.length {
				t.Errorf("content length %d, want %d", v.ContentLength, tc.length)
			}
			if v.Trace.Started != tc.started {
				t.Errorf("trace started %v, want %v", v.Trace.Started, tc.started)
			}
		})
	}
}

// BenchmarkFastView measures building the request view from a fasthttp
// request (header map refilled, strings into fasthttp's buffers) for a
// request that brings its request id and trace context: the peer is
// reqview.FromRequest on net/http's parsed request, which is free because
// net/http parsed into an http.Header already (its parsing allocates).
func BenchmarkFastView(b *testing.B) {
	ctx := fastCtx(b, "GET /api/orders?page=2 HTTP/1.1\r\nHost: shop.test\r\nUser-Agent: bench\r\nAccept: */*\r\nX-User: alice\r\n"+
		"X-Request-Id: bench-1\r\nTraceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nCookie: s=1\r\n\r\n")
	b.ReportAllocs()
	for b.Loop() {
		x := fastExchanges.Get().(*fastExchange)
		x.ctx = ctx
		_ = x.fill(ctx, nil)
		x.reset()
		fastExchanges.Put(x)
	}
}
