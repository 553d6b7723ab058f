package proxy

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestFastHeadMatchesBuild: for requests without a body, the head written
// in one pass over the raw header (appendFastHead) says what the parsed and
// edited request (buildFastRequest) says: same request line, and the same
// fields with the same values in the same order per name, read back by
// net/http.
func TestFastHeadMatchesBuild(t *testing.T) {
	rt := mustCompile(t, `namespace: t
routes:
  - id: r
    match: {pathPrefix: /api}
    upstream: {targets: [{url: "http://up.test:8080/base"}]}
`, false)
	u := rt.Upstream("r")
	tests := []struct {
		desc, head string
		fr         FastRequest
	}{
		{"plain", "GET /api/a?x=1&y=%20 HTTP/1.1\r\nHost: front.test\r\nAccept: */*\r\n", FastRequest{RequestID: "id-1"}},
		{"hop-by-hop and Connection-listed", "GET /api/b HTTP/1.1\r\nHost: front.test\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n" +
			"Keep-Alive: timeout=5\r\nTe: trailers\r\nProxy-Authorization: Basic eDp5\r\nProxy-Connection: keep-alive\r\nX-Kept: yes\r\n",
			FastRequest{RequestID: "id-2"}},
		{"forwarded claims replaced, XFF merged", "GET /api/c HTTP/1.1\r\nHost: front.test\r\nX-Forwarded-For: 10.0.0.1\r\nx-forwarded-for: 10.0.0.2, 10.0.0.3\r\n" +
			"X-Forwarded-Host: evil.test\r\nX-Forwarded-Proto: https\r\nX-Request-Id: spoofed\r\nVia: 1.0 other\r\n", FastRequest{RequestID: "id-3", TLS: true}},
		{"every gateway field twice", "GET /api/f HTTP/1.1\r\nHost: front.test\r\nX-Forwarded-Host: a\r\nX-Forwarded-Host: b\r\n" +
			"X-Forwarded-Proto: https\r\nX-Forwarded-Proto: http\r\nX-Request-Id: a\r\nX-Request-Id: b\r\nTraceparent: x\r\nTraceparent: y\r\n",
			FastRequest{RequestID: "id-6", Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
		{"more gateway fields than the delete list holds", "GET /api/g HTTP/1.1\r\nHost: front.test\r\n" +
			strings.Repeat("X-Request-Id: a\r\nKeep-Alive: 1\r\n", 10) + "Traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n",
			FastRequest{RequestID: "id-7"}},
		{"Connection after the field it lists", "GET /api/h HTTP/1.1\r\nHost: front.test\r\nX-Hop: 1\r\nX-Kept: yes\r\nx-hop: 2\r\nConnection: x-HOP\r\n",
			FastRequest{RequestID: "id-8"}},
		{"two Connection lines, the second late", "GET /api/i HTTP/1.1\r\nHost: front.test\r\nConnection: keep-alive\r\nA: 1\r\nB: 2\r\n" +
			"Connection: Upgrade, close , b,\r\nClose: c\r\n", FastRequest{RequestID: "id-9"}},
		{"Connection late, listing only what goes anyway", "GET /api/j HTTP/1.1\r\nHost: front.test\r\nA: 1\r\nX-Forwarded-For: 10.0.0.9\r\n" +
			"Connection: keep-alive, te, x-forwarded-for\r\nTE: trailers\r\n", FastRequest{RequestID: "id-10"}},
		{"names to canonicalize and padded values", "GET /api/k HTTP/1.1\r\nhost: front.test\r\nuser-agent: \t h2load \t\r\nX-EMPTY:\r\nx-blank:   \r\n",
			FastRequest{RequestID: "id-11"}},
		{"a long X-Forwarded-For chain", "GET /api/l HTTP/1.1\r\nHost: front.test\r\nX-Forwarded-For: " + strings.Repeat("10.0.0.1, ", 30) + "10.0.0.2\r\n" +
			"X-A: 1\r\nx-forwarded-for: " + strings.Repeat("192.168.100.200, ", 20) + "10.0.0.3\r\n", FastRequest{RequestID: "id-12"}},
		{"a trace started", "HEAD /api/d HTTP/1.1\r\nHost: front.test\r\nTraceparent: bogus\r\nTracestate: a=b\r\nCookie: a=1\r\nCookie: b=2\r\n",
			FastRequest{RequestID: "id-4", Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
		{"the gateway's span in the client's trace", "GET /api/m HTTP/1.1\r\nHost: front.test\r\nTraceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nTracestate: a=b\r\ntraceparent: x\r\n",
			FastRequest{RequestID: "id-13", Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01", KeepTracestate: true}},
		{"the client's trace kept", "GET /api/e HTTP/1.0\r\nHost: front.test\r\nTraceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nTracestate: a=b\r\nExpect: 100-continue\r\nContent-Length: 0\r\n",
			FastRequest{RequestID: "id-5"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var req fasthttp.Request
			if err := req.Read(bufio.NewReader(strings.NewReader(tc.head + "\r\n"))); err != nil {
				t.Fatal(err)
			}
			ctx := new(fasthttp.RequestCtx)
			ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 4000}, nil)
			m := Match{Path: string(ctx.URI().PathOriginal())}
			tg := u.targets[0]

			out := fasthttp.AcquireRequest()
			defer fasthttp.ReleaseRequest(out)
			u.buildFastRequest(out, ctx, tc.fr, tg, m)
			var built bytes.Buffer
			bw := bufio.NewWriter(&built)
			if err := out.Write(bw); err != nil {
				t.Fatal(err)
			}
			_ = bw.Flush()
			raw := u.appendFastHead(nil, ctx, tc.fr, tg, m)
			// The names go upstream canonical, as net/http's header map
			// sends them, whatever case the client used.
			for _, line := range strings.Split(string(raw), "\r\n")[1:] {
				if name, _, ok := strings.Cut(line, ":"); ok && name != http.CanonicalHeaderKey(name) {
					t.Errorf("raw head field name %q is not canonical", name)
				}
			}

			a, b := readBack(t, built.Bytes()), readBack(t, raw)
			if a.Method != b.Method || a.RequestURI != b.RequestURI || a.Host != b.Host {
				t.Fatalf("request line: built %s %s (Host %s), raw %s %s (Host %s)", a.Method, a.RequestURI, a.Host, b.Method, b.RequestURI, b.Host)
			}
			delete(a.Header, "Content-Length") // fasthttp writes none for an empty body; the raw head keeps a client's 0
			delete(b.Header, "Content-Length")
			// fasthttp's writer reorders Cookie lines; the raw head keeps the
			// client's order. Both carry the same cookies.
			slices.Sort(a.Header["Cookie"])
			slices.Sort(b.Header["Cookie"])
			if !reflect.DeepEqual(a.Header, b.Header) {
				t.Fatalf("header:\nbuilt %q\nraw   %q\nraw head:\n%s", a.Header, b.Header, raw)
			}
			if tp := tc.fr.Traceparent; tp != "" {
				if got := b.Header["Traceparent"]; len(got) != 1 || got[0] != tp {
					t.Errorf("Traceparent %q, want only the gateway's %q", got, tp)
				}
				if got := b.Header.Get("Tracestate"); (got != "") != tc.fr.KeepTracestate {
					t.Errorf("Tracestate %q with KeepTracestate %v", got, tc.fr.KeepTracestate)
				}
			}
		})
	}
}

func readBack(t *testing.T, head []byte) *http.Request {
	t.Helper()
	r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
	if err != nil {
		t.Fatalf("%v in\n%s", err, head)
	}
	return r
}

// BenchmarkFastHead measures the raw head against building and writing
// the request (buildFastRequest + fasthttp's writer) for a browser-like GET.
func BenchmarkFastHead(b *testing.B) {
	rt := mustCompile(b, "namespace: t\nroutes:\n  - id: r\n    upstream: {targets: [{url: \"http://up.test:8080\"}]}\n", false)
	u := rt.Upstream("r")
	head := "GET /shop/cart?id=12 HTTP/1.1\r\nHost: shop.test\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\nAccept: text/html,*/*;q=0.8\r\n" +
		"Accept-Language: en-GB,en;q=0.9\r\nAccept-Encoding: gzip, br\r\nCookie: s=abc123; theme=dark\r\nConnection: keep-alive\r\n\r\n"
	var req fasthttp.Request
	if err := req.Read(bufio.NewReader(strings.NewReader(head))); err != nil {
		b.Fatal(err)
	}
	ctx := new(fasthttp.RequestCtx)
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 4000}, nil)
	fr := FastRequest{RequestID: "id-1", Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	m := Match{Path: "/shop/cart"}
	tg := u.targets[0]
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			buf = u.appendFastHead(buf[:0], ctx, fr, tg, m)
		}
	})
	b.Run("build+write", func(b *testing.B) {
		b.ReportAllocs()
		var sink bytes.Buffer
		bw := bufio.NewWriter(&sink)
		for b.Loop() {
			out := fasthttp.AcquireRequest()
			u.buildFastRequest(out, ctx, fr, tg, m)
			_ = out.Write(bw)
			_ = bw.Flush()
			sink.Reset()
			fasthttp.ReleaseRequest(out)
		}
	})
}

// TestGatewaySetsCoversHopHeaders: every hop-by-hop name, in any case, is
// dropped by the raw head's classification (its length switch must list
// each of hopHeaders).
func TestGatewaySetsCoversHopHeaders(t *testing.T) {
	for _, h := range slices.Concat(hopHeaders, []string{"X-Forwarded-Host", "X-Forwarded-Proto", "X-Request-Id", "Host"}) {
		for _, name := range []string{h, strings.ToLower(h), strings.ToUpper(h)} {
			if got := gatewaySets([]byte(name), traceKept); got != setDrop {
				t.Errorf("%s: %d, want dropped", name, got)
			}
		}
	}
	if gatewaySets([]byte("x-forwarded-for"), traceKept) != setXFF {
		t.Error("X-Forwarded-For is not merged")
	}
	for _, name := range []string{"Traceparent", "tracestate"} {
		if gatewaySets([]byte(name), traceKept) != setKeep || gatewaySets([]byte(name), traceStarted) != setDrop {
			t.Errorf("%s: kept unless the gateway started the trace", name)
		}
	}
	if gatewaySets([]byte("traceparent"), traceChild) != setDrop || gatewaySets([]byte("Tracestate"), traceChild) != setKeep {
		t.Error("the gateway's span in the client's trace: its Traceparent replaces the client's, whose Tracestate goes on")
	}
	for _, name := range []string{"X-User", "Cookie", "Accept", "Connectionx", "Tee", "X-Forwarded-Fo"} {
		if gatewaySets([]byte(name), traceStarted) != setKeep {
			t.Errorf("%s dropped", name)
		}
	}
}

// clientFieldsRef is appendFastHead's header lines as they were written
// before its one pass: the names Connection lists found first over every
// line, then the lines written, each split with the bytes functions
// (nextRawFieldRef) and classified by name with bytes.EqualFold.
func clientFieldsRef(raw []byte, tm traceMode) (dst, x []byte) {
	var listed [8][]byte
	nl := 0
	for rest := raw; len(rest) > 0; {
		var name, value []byte
		name, value, rest, _ = nextRawFieldRef(rest)
		if len(name) != len("Connection") || !bytes.EqualFold(name, []byte("Connection")) {
			continue
		}
		for len(value) > 0 && nl < len(listed) {
			var tok []byte
			tok, value, _ = bytes.Cut(value, []byte{','})
			if tok = bytes.TrimSpace(tok); len(tok) > 0 {
				listed[nl] = tok
				nl++
			}
		}
	}
	drop := slices.Concat(hopHeaders, []string{"Host", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Request-Id"})
	if tm != traceKept {
		drop = append(drop, "Traceparent")
	}
	if tm == traceStarted {
		drop = append(drop, "Tracestate")
	}
	is := func(name []byte, s string) bool { return len(name) == len(s) && bytes.EqualFold(name, []byte(s)) }
lines:
	for rest := raw; len(rest) > 0; {
		var name, value []byte
		name, value, rest, _ = nextRawFieldRef(rest)
		if len(name) == 0 {
			continue
		}
		if is(name, "X-Forwarded-For") {
			if len(x) > 0 {
				x = append(x, ", "...)
			}
			x = append(x, value...)
			continue
		}
		for _, d := range drop {
			if is(name, d) {
				continue lines
			}
		}
		for _, l := range listed[:nl] {
			if bytes.EqualFold(name, l) {
				continue lines
			}
		}
		dst = append(dst, name...)
		dst = append(dst, ": "...)
		dst = append(dst, value...)
		dst = append(dst, "\r\n"...)
	}
	return dst, x
}

// clientFields is what appendFastHead writes of raw's lines, as it does it.
func clientFields(raw []byte, tm traceMode) (dst, x []byte) {
	var l connListed
	dst, x, late := appendClientFields(nil, nil, raw, &l, tm, true)
	if late {
		dst, x, _ = appendClientFields(dst[:0], x[:0], raw, &l, tm, false)
	}
	return dst, x
}

// checkClientFields compares clientFields with clientFieldsRef on raw, a
// header block strictFast accepts (names are tokens; others are skipped).
func checkClientFields(t *testing.T, raw []byte) {
	t.Helper()
	for rest := raw; len(rest) > 0; {
		var name []byte
		var colon bool
		name, _, rest, colon = nextRawFieldRef(rest)
		if len(name) == 0 && !colon {
			continue
		}
		if !colon || len(name) == 0 || !IsToken(name) {
			return
		}
	}
	for _, tm := range []traceMode{traceKept, traceChild, traceStarted} {
		dst, x := clientFields(raw, tm)
		wdst, wx := clientFieldsRef(raw, tm)
		if !bytes.Equal(dst, wdst) || !bytes.Equal(x, wx) {
			t.Fatalf("raw %q (trace mode %v):\nlines %q, want %q\nX-Forwarded-For %q, want %q", raw, tm, dst, wdst, x, wx)
		}
	}
}

// TestClientFields: the raw head's one pass (two when a Connection line
// comes late) writes the lines the two passes over every line wrote.
func TestClientFields(t *testing.T) {
	t.Parallel()
	for _, raw := range clientFieldSeeds {
		checkClientFields(t, []byte(raw))
	}
}

var clientFieldSeeds = []string{
	"Host: a\r\nUser-Agent: x\r\n\r\n",
	"Connection: keep-alive, X-A\r\nX-A: 1\r\nX-B: 2\r\n\r\n",
	"X-A: 1\r\nX-B: 2\r\nConnection: x-a\r\n\r\n",
	"X-A: 1\r\nConnection: keep-alive, te\r\nTE: t\r\n\r\n",
	"X-A: 1\r\nConnection: a,b,c,d,e,f,g,h,x-a\r\n\r\n",
	"X-A: 1\r\nConnection: a,b,c,d\r\nX-B: 1\r\nConnection: e,f,g,h,x-b\r\n\r\n",
	"X-A: 1\r\nconnection: \u212a, x-\u212a\r\nK: 1\r\nX-K: 2\r\n\r\n",
	"X-Forwarded-For: 1\r\nx-forwarded-for: 2\r\nTraceparent: t\r\ntracestate: s\r\nConnection: x-forwarded-for\r\n\r\n",
	"A:\r\nB: \t \r\nConnection: ,, ,\r\n\r\n",
}

func FuzzClientFields(f *testing.F) {
	for _, s := range clientFieldSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		checkClientFields(t, []byte(raw))
	})
}
