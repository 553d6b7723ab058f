package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicegw/sluice/dataplane/snapshot"
)

// TestStrictFast: the framing checks the fasthttp engine makes on a parsed
// header, which fasthttp alone would accept or normalize, and what it lets
// through.
func TestStrictFast(t *testing.T) {
	tests := []struct {
		desc   string
		head   string // request line and header, without the final CRLF
		status int    // 0: accepted
	}{
		{"a plain GET", "GET /a HTTP/1.1\r\nHost: x\r\n", 0},
		{"a POST with a length", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n", 0},
		{"chunked", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n", 0},
		{"HTTP/1.0 without Host", "GET /a HTTP/1.0\r\n", 0},
		{"OPTIONS *", "OPTIONS * HTTP/1.1\r\nHost: x\r\n", http.StatusBadRequest},
		{"CONNECT", "CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n", http.StatusBadRequest},
		{"Content-Length and chunked", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n", http.StatusBadRequest},
		{"obs-fold", "GET /a HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n", http.StatusBadRequest},
		{"two equal Content-Lengths", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n", http.StatusBadRequest},
		{"two Hosts", "GET /a HTTP/1.1\r\nHost: x\r\nHost: y\r\n", http.StatusBadRequest},
		{"no Host", "GET /a HTTP/1.1\r\nX-A: 1\r\n", http.StatusBadRequest},
		{"absolute-form", "GET http://x/a HTTP/1.1\r\nHost: x\r\n", http.StatusBadRequest},
		{"HTTP/2.0 on HTTP/1", "GET /a HTTP/2.0\r\nHost: x\r\n", http.StatusHTTPVersionNotSupported},
		{"HTTP/1.2", "GET /a HTTP/1.2\r\nHost: x\r\n", http.StatusHTTPVersionNotSupported},
		{"names in another case", "POST /a HTTP/1.1\r\nhost: x\r\ncontent-length: 3\r\nuser-agent: t\r\n", 0},
		{"two Hosts in two cases", "GET /a HTTP/1.1\r\nHost: x\r\nHOST: x\r\n", http.StatusBadRequest},
		{"a padded length", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: \t3 \t\r\n", 0},
		{"an empty length", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length:  \r\n", http.StatusBadRequest},
		{"Chunked in capitals", "POST /a HTTP/1.1\r\nHost: x\r\ntransfer-encoding: CHUNKED\r\n", 0},
		{"empty values", "GET /a HTTP/1.1\r\nHost: x\r\nX-Empty:\r\nX-Blank: \t \r\n", 0},
		{"a bare LF line end", "GET /a HTTP/1.1\r\nHost: x\nX-A: 1\r\n", 0},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var h fasthttp.RequestHeader
			if err := h.Read(bufio.NewReader(strings.NewReader(tc.head + "\r\n"))); err != nil {
				if tc.status == 0 {
					t.Fatalf("fasthttp refused it: %v", err)
				}
				return // fasthttp refuses it itself (answered by fastError)
			}
			status, why, _ := strictFast(&h, new(snapshot.RequestIDs))
			if status != tc.status {
				t.Fatalf("status %d (%s), want %d", status, why, tc.status)
			}
			if status != 0 && why == "" {
				t.Fatal("a refusal without a reason")
			}
		})
	}
}

// TestEngineForwards: a node forwards with the
// same request headers as net/http's (X-Forwarded-*, Via, X-Request-Id,
// traceparent), streams a body both ways, answers HEAD, and keeps the
// connection alive across requests.
func TestEngineForwards(t *testing.T) {
	seen := make(chan http.Header, 8)
	up := newPlainUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Clone()
		h.Set("X-Path", r.URL.RawPath+"|"+r.URL.Path+"?"+r.URL.RawQuery)
		seen <- h
		w.Header().Set("X-Request-Id", "upstream-own")
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.Copy(w, r.Body)
		if r.Method != http.MethodHead {
			_, _ = io.WriteString(w, "!")
		}
	})
	_, base, _ := MustStart(t, fmt.Sprintf(`namespace: fast
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}
`, up))
	addr := strings.TrimPrefix(base, "http://")
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	tests := []struct {
		desc, req, body string
		check           func(t *testing.T, h http.Header)
	}{
		{"a POST", "POST /a/%2F/../b?q=1 HTTP/1.1\r\nHost: front.test\r\nX-Request-Id: abc-1\r\nContent-Length: 5\r\n\r\nhello", "hello!",
			func(t *testing.T, h http.Header) {
				want := map[string]string{"X-Forwarded-Host": "front.test", "X-Forwarded-For": "127.0.0.1",
					"X-Forwarded-Proto": "http", "X-Request-Id": "abc-1"}
				for k, v := range want {
					if h.Get(k) != v {
						t.Errorf("%s %q, want %q", k, h.Get(k), v)
					}
				}
				if v := h.Get("Via"); !strings.HasPrefix(v, "1.1 sluice-") {
					t.Errorf("Via %q", v)
				}
				if len(h.Get("Traceparent")) != 55 {
					t.Errorf("traceparent %q: no trace started", h.Get("Traceparent"))
				}
			}},
		{"a chunked body", "PUT /c HTTP/1.1\r\nHost: front.test\r\nX-Forwarded-For: 10.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", "abcde!",
			func(t *testing.T, h http.Header) {
				if got := h.Get("X-Forwarded-For"); got != "10.0.0.1, 127.0.0.1" {
					t.Errorf("X-Forwarded-For %q", got)
				}
			}},
		{"a HEAD", "HEAD /h HTTP/1.1\r\nHost: front.test\r\n\r\n", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if _, err := io.WriteString(c, tc.req); err != nil {
				t.Fatal(err)
			}
			method := strings.Fields(tc.req)[0]
			resp, err := http.ReadResponse(br, &http.Request{Method: method})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != tc.body {
				t.Fatalf("status %d body %q, want 200 %q", resp.StatusCode, b, tc.body)
			}
			if ids := resp.Header.Values("X-Request-Id"); len(ids) != 1 || ids[0] == "upstream-own" {
				t.Fatalf("X-Request-Id %q: want the gateway's, once", ids)
			}
			h := <-seen
			if tc.check != nil {
				tc.check(t, h)
			}
		})
	}
}

// newPlainUpstream is an HTTP/1.1 upstream serving f.
func newPlainUpstream(tb testing.TB, f http.HandlerFunc) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: f}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// newH2CUpstream is an upstream serving h over h2c (HTTP/2 with prior
// knowledge); it returns its address, for an "h2c://" target.
func newH2CUpstream(tb testing.TB, h http.Handler) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: h, Protocols: new(http.Protocols)}
	srv.Protocols.SetUnencryptedHTTP2(true)
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestEngineH2CTarget: an h2c target is reached
// through net/http's HTTP/2 transport, the bodies streamed through.
func TestEngineH2CTarget(t *testing.T) {
	addr := newH2CUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Proto", r.Proto)
		w.Header().Set("X-Got-Id", r.Header.Get("X-Request-Id"))
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, b)
	}))
	_, base, _ := MustStart(t, fmt.Sprintf(`namespace: fast
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: "h2c://%s"}]}}
`, addr))
	resp, err := http.Post(base+"/x/y", "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "POST /x/y hello" || resp.Header.Get("X-Proto") != "HTTP/2.0" {
		t.Fatalf("status %d proto %q body %q", resp.StatusCode, resp.Header.Get("X-Proto"), b)
	}
	if id := resp.Header.Get("X-Request-Id"); id == "" || id != resp.Header.Get("X-Got-Id") {
		t.Fatalf("request id %q, upstream saw %q", id, resp.Header.Get("X-Got-Id"))
	}
}

// TestEngineHugeHeader: a request header over proxy.MaxHeaderBytes is
// answered 431 (problem+json) and the connection closed.
func TestEngineHugeHeader(t *testing.T) {
	up := newPlainUpstream(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	_, base, _ := MustStart(t, fmt.Sprintf(`namespace: fast
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}
`, up))
	addr := strings.TrimPrefix(base, "http://")
	req := "GET /a HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 100<<10) + "\r\n\r\n"
	status, closed := sendStrict(t, addr, req)
	if status != http.StatusRequestHeaderFieldsTooLarge || !closed {
		t.Fatalf("status %d (closed %v), want 431 and the connection closed", status, closed)
	}
}

// TestEngineDate: every answer of the engine carries one
// current Date (forwarded, the gateway's own, a parse error, a response cut
// before its header went out).
func TestEngineDate(t *testing.T) {
	up := newPlainUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/cut" {
			w.Header().Set("Content-Length", "10")
			_, _ = io.WriteString(w, "abc")
			http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler)
		}
		_, _ = io.WriteString(w, "ok")
	})
	_, base, _ := MustStart(t, fmt.Sprintf(`namespace: date
routes:
  - {id: api, match: {pathPrefix: /api}, upstream: {targets: [{url: %q}]}}
`, up))
	addr := strings.TrimPrefix(base, "http://")
	for _, tc := range []struct {
		desc, req string
		status    int
	}{
		{"forwarded", "GET /api/x HTTP/1.1\r\nHost: g\r\n\r\n", 200},
		{"no route", "GET /elsewhere HTTP/1.1\r\nHost: g\r\n\r\n", 404},
		{"cut before the header went out", "GET /api/cut HTTP/1.1\r\nHost: g\r\n\r\n", 502},
		{"refused framing", "GET /api/x HTTP/1.1\r\nHost: g\r\nHost: h\r\n\r\n", 400},
		{"unparsable", "GET /api/x HTTP/1.1\r\nHost: g\r\nBad Header\r\n\r\n", 400},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.WriteString(c, tc.req); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			d, err := http.ParseTime(resp.Header.Get("Date"))
			if err != nil || time.Since(d).Abs() > 5*time.Second {
				t.Fatalf("Date %q (%v)", resp.Header.Get("Date"), err)
			}
			if n := len(resp.Header.Values("Date")); n != 1 {
				t.Fatalf("%d Date headers", n)
			}
		})
	}
}

// strictFastRef is strictFast's pass over the raw header as it was written
// before it shared proxy.NextRawField: the bytes functions on each line.
func strictFastRef(h *fasthttp.RequestHeader) (int, string) {
	isToken := func(b []byte) bool {
		for _, c := range b {
			if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
				return false
			}
		}
		return true
	}
	raw := h.RawHeaders()
	hosts, cls, tes := 0, 0, 0
	for len(raw) > 0 {
		var line []byte
		line, raw, _ = bytes.Cut(raw, []byte{'\n'})
		line = bytes.TrimSuffix(line, []byte{'\r'})
		if len(line) == 0 {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			return http.StatusBadRequest, "obsolete line folding in the header"
		}
		name, value, ok := bytes.Cut(line, []byte{':'})
		if !ok || len(name) == 0 || !isToken(name) {
			return http.StatusBadRequest, "a header name is not a token"
		}
		if bytes.IndexByte(value, 0) >= 0 || bytes.IndexByte(value, '\r') >= 0 {
			return http.StatusBadRequest, "a header value has a control character"
		}
		value = bytes.Trim(value, " \t")
		switch {
		case len(name) == 4 && bytes.EqualFold(name, []byte("Host")):
			hosts++
		case len(name) == 14 && bytes.EqualFold(name, []byte("Content-Length")):
			cls++
			if len(value) == 0 || !allDigits(value) {
				return http.StatusBadRequest, "the Content-Length is not a number"
			}
		case len(name) == 17 && bytes.EqualFold(name, []byte("Transfer-Encoding")):
			tes++
			if !bytes.EqualFold(value, []byte("chunked")) {
				return http.StatusNotImplemented, "only the chunked transfer coding is implemented"
			}
		}
	}
	switch {
	case cls > 1:
		return http.StatusBadRequest, "more than one Content-Length"
	case tes > 1:
		return http.StatusNotImplemented, "only the chunked transfer coding is implemented, once"
	case cls > 0 && tes > 0:
		return http.StatusBadRequest, "both Content-Length and Transfer-Encoding"
	case hosts > 1:
		return http.StatusBadRequest, "more than one Host"
	case hosts == 0 && h.IsHTTP11():
		return http.StatusBadRequest, "no Host"
	}
	return 0, ""
}

// FuzzStrictFast: on any header fasthttp parses, strictFast's verdict on the
// raw header is the one the bytes functions gave (the request line checks,
// which it makes first, are left out: a well-formed line is used).
func FuzzStrictFast(f *testing.F) {
	for _, s := range []string{"Host: x\r\n", "host: x\r\nContent-Length: 3\r\n", "Host: x\r\nX: a\r\n b\r\n",
		"Host: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n", "Host: x\r\nX Y: 1\r\n", "X: \x00\r\n",
		"Host: x\r\nContent-Length: \t\r\n", "Host: x\nHost: y\n", "Host: x\r\nTransfer-Encoding: \u212aed\r\n",
		"Host: x\r\nupgrade: websocket\r\nVIA: 1.1 a\r\n", "Host: x\r\nUpgrade:\r\nvia: \r\n", "Host: x\r\nUpgradf: 1\r\nVic: 2\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, fields string) {
		var h fasthttp.RequestHeader
		if h.Read(bufio.NewReader(strings.NewReader("GET /a HTTP/1.1\r\n"+fields+"\r\n"))) != nil {
			return
		}
		gs, gw, seen := strictFast(&h, new(snapshot.RequestIDs))
		ws, ww := strictFastRef(&h)
		if gs != ws || gw != ww {
			t.Fatalf("raw %q: strictFast %d %q, the bytes functions %d %q", h.RawHeaders(), gs, gw, ws, ww)
		}
		// What it saw is what fasthttp's lookups find, on a request it
		// accepts.
		if gs == 0 {
			if got, want := seen&seenUpgrade != 0, len(h.PeekAll("Upgrade")) > 0; got != want {
				t.Fatalf("raw %q: saw Upgrade %v, fasthttp finds one %v", h.RawHeaders(), got, want)
			}
			if got, want := seen&seenVia != 0, len(h.PeekAll("Via")) > 0; got != want {
				t.Fatalf("raw %q: saw Via %v, fasthttp finds one %v", h.RawHeaders(), got, want)
			}
		}
	})
}

// FuzzHasNULOrCR: hasNULOrCR is the two bytes.IndexByte it stands for.
func FuzzHasNULOrCR(f *testing.F) {
	for _, s := range []string{"", "h2load nghttp2/1.52.0", "a\x00", "\r", "0123456\r89", "01234567\x00", strings.Repeat("x", 70) + "\r",
		"\x8d\x80\x0e\x01\x0c\x8c", "\xff\xff\xff\xff\xff\xff\xff\x0d", strings.Repeat("\x01", 16)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := []byte(s)
		if got, want := hasNULOrCR(b), bytes.IndexByte(b, 0) >= 0 || bytes.IndexByte(b, '\r') >= 0; got != want {
			t.Fatalf("hasNULOrCR(%q) = %v, want %v", s, got, want)
		}
	})
}
