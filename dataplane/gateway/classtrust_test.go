package gateway

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestClassHeaderTrustEveryEngine is issue 26's priority reproduction
// through a running node on each HTTP/1.1 engine: of 12 concurrent requests
// that send X-Priority: critical on a concurrency limit of 10 with 30%
// reserved for critical, a direct client gets the unreserved 7 (the header
// is a claim, in the default class), a client behind a trusted proxy (the
// loopback peer in --trusted-proxies) gets all 10.
func TestClassHeaderTrustEveryEngine(t *testing.T) {
	t.Parallel()
	for _, trusted := range []bool{false, true} {
		t.Run(fmt.Sprintf("trusted=%v", trusted), func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			var entered atomic.Int32
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("X-Priority") != "critical" {
					t.Errorf("the upstream got X-Priority %q, want it forwarded as sent", r.Header.Get("X-Priority"))
				}
				entered.Add(1)
				<-release
			}))
			defer up.Close()
			defer close(release)
			cfg := Config{}
			want := 7
			if trusted {
				cfg.TrustedProxies, want = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, 10
			}
			_, base, _ := MustStartConfig(t, fmt.Sprintf(`namespace: t
classes:
  - {id: critical, match: {headers: {X-Priority: critical}}}
routes:
  - {id: orders, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}
limits:
  - {id: in-flight, algorithm: concurrency, rate: 10, reserve: {critical: 0.3}}
`, up.URL), cfg)
			var rejected atomic.Int32
			var wg sync.WaitGroup
			for range 12 {
				wg.Go(func() {
					req, _ := http.NewRequest("GET", base+"/orders", nil)
					req.Header.Set("X-Priority", "critical")
					res, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode == http.StatusTooManyRequests {
						rejected.Add(1)
					}
				})
			}
			deadline := time.Now().Add(10 * time.Second)
			for entered.Load()+rejected.Load() < 12 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if got := int(entered.Load()); got != want || int(rejected.Load()) != 12-want {
				t.Errorf("%d of 12 admitted, %d rejected; want %d admitted", got, rejected.Load(), want)
			}
			for range entered.Load() {
				release <- struct{}{}
			}
			wg.Wait()
		})
	}
}
