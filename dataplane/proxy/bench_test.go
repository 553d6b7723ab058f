package proxy

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
)

// BenchmarkForward measures one proxied exchange in process (the client side
// is an httptest.ResponseRecorder; the upstream is a loopback server with
// keep-alive), against the peer: a bare httputil.ReverseProxy with
// SetURL and a default transport.
func BenchmarkForward(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello, world\n")
	}))
	b.Cleanup(up.Close)
	target, _ := url.Parse(up.URL)

	rt := mustCompile(b, oneRoute("r", "{pathPrefix: /}", fmt.Sprintf(`{targets: [{url: "%s"}]}`, up.URL)), false)
	sluice := gatewayHandler(rt, nil)
	peerTransport := http.DefaultTransport.(*http.Transport).Clone()
	peerTransport.MaxIdleConnsPerHost = 256
	b.Cleanup(peerTransport.CloseIdleConnections)
	peer := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(target); pr.SetXForwarded() },
		Transport: peerTransport,
	}
	for _, h := range []struct {
		name string
		h    http.Handler
	}{{"sluice", sluice}, {"reverseproxy", peer}} {
		b.Run(h.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r := httptest.NewRequest("GET", "http://x.test/bench", nil)
					w := httptest.NewRecorder()
					h.h.ServeHTTP(w, r)
					if w.Code != 200 {
						b.Fatalf("status %d", w.Code)
					}
				}
			})
		})
	}
}

// BenchmarkForwardH2 measures one HTTP/2 stream's forward in process (the
// client's side an httptest.ResponseRecorder standing for the stream, the
// request marked HTTP/2) to an HTTP/1.1 target (the origin's fastPool) and
// to an h2c one (x/net/http2's Transport), through relay.go; "reverseproxy"
// is the same request marked HTTP/1.1, which goes through
// httputil.ReverseProxy over the same client, as every HTTP/2 stream did
// before relay.go.
func BenchmarkForwardH2(b *testing.B) {
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello, world\n")
	})
	h1 := httptest.NewServer(hello)
	b.Cleanup(h1.Close)
	h2 := httptest.NewUnstartedServer(hello)
	h2.Config.Protocols = new(http.Protocols)
	h2.Config.Protocols.SetUnencryptedHTTP2(true)
	h2.Start()
	b.Cleanup(h2.Close)
	for _, tc := range []struct{ name, target string }{
		{"http1", h1.URL},
		{"h2c", "h2c://" + h2.Listener.Addr().String()},
	} {
		rt := mustCompile(b, oneRoute("r", "{pathPrefix: /}", fmt.Sprintf(`{targets: [{url: "%s"}]}`, tc.target)), false)
		h := gatewayHandler(rt, nil)
		for _, p := range []struct {
			name  string
			major int
		}{{"relay", 2}, {"reverseproxy", 1}} {
			b.Run(tc.name+"/"+p.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					r := httptest.NewRequest("GET", "http://x.test/bench", nil)
					r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/2.0", p.major, 0
					if p.major == 1 {
						r.Proto, r.ProtoMinor = "HTTP/1.1", 1
					}
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					if w.Code != 200 || w.Body.Len() != 13 {
						b.Fatalf("status %d, %d bytes", w.Code, w.Body.Len())
					}
				}
			})
		}
	}
}
