package gateway

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/dataplane/internal/testca"
)

// bridgeTrailers answers by path with trailers set as a Go handler sets
// them: declared in the Trailer field before WriteHeader, their values set
// in the header map after the body, and undeclared ones under
// http.TrailerPrefix. The bodies are flushed, so that the HTTP/2 server
// sends no content-length, except /length's, whose handler gives its own.
func bridgeTrailers(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	f := http.NewResponseController(w)
	switch r.URL.Path {
	case "/declared":
		h.Set("Trailer", "X-Sum, X-Count")
		_, _ = io.WriteString(w, "abc")
		_ = f.Flush()
		_, _ = io.WriteString(w, "de")
		h.Set("X-Sum", "1")
		h.Set("X-Count", "2")
	case "/mixed":
		h.Set("Trailer", "X-Sum")
		_, _ = io.WriteString(w, "abc")
		_ = f.Flush()
		h.Set("X-Sum", "1")
		h.Set(http.TrailerPrefix+"X-Extra", "2")
	case "/undeclared":
		_, _ = io.WriteString(w, "abc")
		_ = f.Flush()
		h.Add(http.TrailerPrefix+"X-Only", "u")
		h.Add(http.TrailerPrefix+"X-Only", "v")
	case "/empty":
		h.Set("Trailer", "X-Sum")
		w.WriteHeader(http.StatusOK)
		_ = f.Flush()
		h.Set("X-Sum", "1")
	case "/length":
		h.Set("Trailer", "X-Sum")
		h.Set("Content-Length", "3")
		_, _ = io.WriteString(w, "abc")
		h.Set("X-Sum", "1")
	case "/forbidden":
		h.Set("Trailer", "X-Sum, Set-Cookie")
		_, _ = io.WriteString(w, "abc")
		_ = f.Flush()
		h.Set("X-Sum", "1")
		h.Set("Set-Cookie", "a=1")
	case "/forbidden-undeclared":
		_, _ = io.WriteString(w, "abc")
		_ = f.Flush()
		h.Set(http.TrailerPrefix+"X-Sum", "1")
		h.Set(http.TrailerPrefix+"Location", "/evil")
	case "/grpc":
		// A gRPC server's answer: a frame, then grpc-status and
		// grpc-message in the trailers, which grpc-go does not declare.
		b, _ := io.ReadAll(r.Body)
		h.Set("Content-Type", "application/grpc")
		_, _ = w.Write(b)
		_ = f.Flush()
		h.Set(http.TrailerPrefix+"Grpc-Status", "7")
		h.Set(http.TrailerPrefix+"Grpc-Message", "denied")
	default:
		_, _ = io.WriteString(w, "abc")
		_ = f.Flush()
	}
}

// bridgedTargets starts bridgeTrailers behind the two kinds of target the
// fasthttp engine bridges through Forward, an h2c one and an https:// one
// (a test CA's certificate, HTTP/2 by ALPN), and returns the rules routing
// /h2c/ and /https/ to them.
func bridgedTargets(t *testing.T) string {
	t.Helper()
	h2cAddr := newH2CUpstream(t, http.HandlerFunc(bridgeTrailers))

	ca := testca.New(t, "bridge test CA")
	tlsUp := httptest.NewUnstartedServer(http.HandlerFunc(bridgeTrailers))
	tlsUp.EnableHTTP2 = true
	tlsUp.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Leaf(t, time.Time{}, time.Time{}, "127.0.0.1").TLSCertificate(t)}}
	tlsUp.StartTLS()
	t.Cleanup(tlsUp.Close)
	pem := strings.ReplaceAll(strings.TrimSpace(string(ca.PEM())), "\n", `\n`)
	return fmt.Sprintf(`namespace: bridge
routes:
  - {id: h2c, match: {pathPrefix: /h2c/}, upstream: {stripPrefix: true, targets: [{url: "h2c://%s"}]}}
  - {id: https, match: {pathPrefix: /https/}, upstream: {stripPrefix: true, targets: [{url: %q}], tls: {ca: "%s"}}}
`, h2cAddr, tlsUp.URL, pem)
}

// TestBridgedTrailers: an answer from an h2c or https:// target reaches an
// HTTP/1.1 client with its trailers, declared or not, on the fasthttp
// engine (and the event loops, which hand such routes to it), whose bridge
// relays what Forward writes. A gRPC answer's grpc-status is a trailer too.
// departs, where set, is what the engine gives in place of want (what
// net/http's server would give): an answer whose length the upstream gave
// but which declares trailers goes out chunked with them (net/http's server
// sends the length and drops the trailers), and a field fasthttp refuses in
// a trailer (see docs/gateway.md) is left out, declared or not.
func TestBridgedTrailers(t *testing.T) {
	cases := []struct {
		desc, path string
		grpc       bool
		want       trailerAnswer
		departs    *trailerAnswer
	}{
		{desc: "declared", path: "/declared",
			want: trailerAnswer{Status: 200, Body: "abcde", CL: -1, Declared: []string{"X-Count", "X-Sum"}, Trailer: http.Header{"X-Sum": {"1"}, "X-Count": {"2"}}}},
		{desc: "declared and undeclared", path: "/mixed",
			want: trailerAnswer{Status: 200, Body: "abc", CL: -1, Declared: []string{"X-Sum"}, Trailer: http.Header{"X-Sum": {"1"}, "X-Extra": {"2"}}}},
		{desc: "undeclared only", path: "/undeclared",
			want: trailerAnswer{Status: 200, Body: "abc", CL: -1, Trailer: http.Header{"X-Only": {"u", "v"}}}},
		{desc: "empty body", path: "/empty",
			want: trailerAnswer{Status: 200, Body: "", CL: -1, Declared: []string{"X-Sum"}, Trailer: http.Header{"X-Sum": {"1"}}}},
		{desc: "Content-Length with trailers", path: "/length",
			want:    trailerAnswer{Status: 200, Body: "abc", CL: 3},
			departs: &trailerAnswer{Status: 200, Body: "abc", CL: -1, Declared: []string{"X-Sum"}, Trailer: http.Header{"X-Sum": {"1"}}}},
		{desc: "forbidden field declared", path: "/forbidden",
			want:    trailerAnswer{Status: 200, Body: "abc", CL: -1, Declared: []string{"Set-Cookie", "X-Sum"}, Trailer: http.Header{"X-Sum": {"1"}, "Set-Cookie": {"a=1"}}},
			departs: &trailerAnswer{Status: 200, Body: "abc", CL: -1, Declared: []string{"X-Sum"}, Trailer: http.Header{"X-Sum": {"1"}}}},
		{desc: "forbidden field undeclared", path: "/forbidden-undeclared",
			want:    trailerAnswer{Status: 200, Body: "abc", CL: -1, Trailer: http.Header{"X-Sum": {"1"}, "Location": {"/evil"}}},
			departs: &trailerAnswer{Status: 200, Body: "abc", CL: -1, Trailer: http.Header{"X-Sum": {"1"}}}},
		{desc: "gRPC", path: "/grpc", grpc: true,
			want: trailerAnswer{Status: 200, Body: "\x00\x00\x00\x00\x01x", CL: -1, Trailer: http.Header{"Grpc-Status": {"7"}, "Grpc-Message": {"denied"}}}},
		{desc: "no trailers", path: "/plain",
			want: trailerAnswer{Status: 200, Body: "abc", CL: -1}},
	}
	_, base, _ := MustStart(t, bridgedTargets(t))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for _, target := range []string{"/h2c", "/https"} {
		for _, tc := range cases {
			want := tc.want
			if tc.departs != nil {
				want = *tc.departs
			}
			req, err := http.NewRequest("GET", base+target+tc.path, nil)
			if tc.grpc {
				req, err = http.NewRequest("POST", base+target+tc.path, strings.NewReader("\x00\x00\x00\x00\x01x"))
				req.Header.Set("Content-Type", "application/grpc")
				req.Header.Set("Te", "trailers")
			}
			if err != nil {
				t.Fatal(err)
			}
			got, h := doTrailers(t, c, req)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s %s: the client gets %+v\nwant %+v", target, tc.desc, got, want)
			}
			if ids := h.Values("X-Request-Id"); len(ids) != 1 || ids[0] == "" {
				t.Errorf("%s %s: X-Request-Id %q", target, tc.desc, ids)
			}
		}
	}
}

// TestBridgedTrailersDeclaringRequestID: on the fasthttp engine, a bridged
// answer that declares X-Request-Id a trailer keeps the gateway's
// X-Request-Id in the header, once: the name is not declared to the client,
// and the other trailers are relayed.
func TestBridgedTrailersDeclaringRequestID(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Request-Id, X-Sum")
		_, _ = io.WriteString(w, "abc")
		_ = http.NewResponseController(w).Flush()
		w.Header().Set("X-Sum", "1")
	}), Protocols: new(http.Protocols)}
	up.Protocols.SetUnencryptedHTTP2(true)
	go func() { _ = up.Serve(ln) }()
	t.Cleanup(func() { up.Close() })
	_, base, _ := MustStart(t, fmt.Sprintf(`namespace: bridge
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: "h2c://%s"}]}}
`, ln.Addr()))
	req, _ := http.NewRequest("GET", base+"/x", nil)
	req.Header.Set("X-Request-Id", "client-1")
	got, h := doTrailers(t, http.DefaultClient, req)
	if ids := h.Values("X-Request-Id"); len(ids) != 1 || ids[0] != "client-1" {
		t.Errorf("X-Request-Id %q", ids)
	}
	want := trailerAnswer{Status: 200, Body: "abc", CL: -1, Declared: []string{"X-Sum"}, Trailer: http.Header{"X-Sum": {"1"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the client gets %+v\nwant %+v", got, want)
	}
}

// TestBridgedTrailersHTTP10Client: on either engine, an HTTP/1.0 client
// gets a bridged answer's body without its trailers, and on the fasthttp
// engine without the Trailer field either (net/http's server writes the
// one ReverseProxy declares, as it does for any HTTP/1.0 client).
func TestBridgedTrailersHTTP10Client(t *testing.T) {
	_, base, _ := MustStart(t, bridgedTargets(t))
	for _, path := range []string{"/h2c/mixed", "/https/mixed"} {
		resp, b := getHTTP10(t, base, path)
		if string(b) != "abc" {
			t.Errorf("%s: body %q", path, b)
		}
		if len(resp.Trailer) > 0 || resp.Header["Trailer"] != nil {
			t.Errorf("%s: an HTTP/1.0 client got trailers: Trailer %v, header %v", path, resp.Trailer, resp.Header)
		}
	}
}

// getHTTP10 sends GET path as HTTP/1.0 to the gateway at base, on a
// connection of its own, and returns the answer with its body read.
func getHTTP10(tb testing.TB, base, path string) (*http.Response, []byte) {
	tb.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 5*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.0\r\nHost: front.test\r\n\r\n"); err != nil {
		tb.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "GET"})
	if err != nil {
		tb.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		tb.Errorf("GET %s: reading the body: %v", path, err)
	}
	return resp, b
}
