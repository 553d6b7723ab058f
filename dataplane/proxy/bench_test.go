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
