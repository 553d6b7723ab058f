package gateway

import (
	"fmt"
	"io"
	"net/http"
	"testing"
)

// BenchmarkServeLoopback measures one request through a whole node (HTTP/1.1
// server, loop check, deadlines, snapshot, proxy) over loopback keep-alive
// connections, against the peer: the same client calling the upstream
// directly.
func BenchmarkServeLoopback(b *testing.B) {
	up := okUpstream(b)
	_, base, _ := MustStart(b, fmt.Sprintf(`namespace: bench
routes:
  - id: api
    match: {pathPrefix: /}
    upstream: {targets: [{url: %q}]}
`, up.URL))
	for _, tc := range []struct{ name, url string }{{"gateway", base + "/x"}, {"direct", up.URL + "/x"}} {
		b.Run(tc.name, func(b *testing.B) {
			c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			b.Cleanup(c.CloseIdleConnections)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := c.Get(tc.url)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
		})
	}
}
