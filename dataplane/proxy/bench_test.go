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
// to an h2c one (x/net/http2's Transport), through Forward (relay.go);
// "reverseproxy" is the peer: a bare httputil.ReverseProxy (SetURL,
// SetXForwarded) over the same client, as every stream was forwarded
// before relay.go (with Forward's own work on top).
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
	for _, tc := range []struct{ name, target, scheme string }{
		{"http1", h1.URL, "http"},
		{"h2c", "h2c://" + h2.Listener.Addr().String(), "http"},
	} {
		rt := mustCompile(b, oneRoute("r", "{pathPrefix: /}", fmt.Sprintf(`{targets: [{url: "%s"}]}`, tc.target)), false)
		up := rt.Match(httptest.NewRequest("GET", "/", nil)).Route.Upstream
		peerURL := &url.URL{Scheme: tc.scheme, Host: up.targets[0].host}
		peer := &httputil.ReverseProxy{
			Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(peerURL); pr.SetXForwarded() },
			Transport: up.targets[0].rt,
		}
		for _, p := range []struct {
			name string
			h    http.Handler
		}{{"relay", gatewayHandler(rt, nil)}, {"reverseproxy", peer}} {
			b.Run(tc.name+"/"+p.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					r := httptest.NewRequest("GET", "http://x.test/bench", nil)
					r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/2.0", 2, 0
					w := httptest.NewRecorder()
					p.h.ServeHTTP(w, r)
					if w.Code != 200 || w.Body.Len() != 13 {
						b.Fatalf("status %d, %d bytes", w.Code, w.Body.Len())
					}
				}
			})
		}
	}
}
