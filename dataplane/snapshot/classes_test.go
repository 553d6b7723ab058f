package snapshot

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// classRules is issue 26's reproduction: a class chosen by X-Priority, a
// concurrency limit of 10 with 30% reserved for it, and a degrade plan at
// level 1 whose shedOrder sheds the default class first.
const classRules = `namespace: t
classes:
  - {id: critical, match: {headers: {X-Priority: critical}}}
routes:
  - {id: orders, match: {pathPrefix: /orders}, upstream: {targets: [{url: %q}]}}
  - {id: coupon, match: {pathPrefix: /coupon}, upstream: {targets: [{url: %q}]}}
limits:
  - {id: in-flight, routes: [orders], algorithm: concurrency, rate: 10, reserve: {critical: 0.3}}
degrades:
  - {id: coupon, routes: [coupon], mode: manual, level: 1, level1ShedRatio: 0.5, window: 1s, key: ["header:X-User"], shedOrder: [default]}
`

// TestClassHeaderOnlyFromTrustedProxies: a client that sends X-Priority:
// critical itself gets neither the reserve nor the shedOrder's mercy (it is
// in the default class, and its header still reaches the upstream); the
// same header through a trusted proxy (the peer in TrustedProxies) gets
// both. Served through ServeHTTP over real loopback connections, so the
// peer's trust is what the request path computes from RemoteAddr.
func TestClassHeaderOnlyFromTrustedProxies(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var entered atomic.Int32
	var headerSeen atomic.Value
	orders := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headerSeen.Store(r.Header.Get("X-Priority"))
		entered.Add(1)
		<-release
	}))
	defer orders.Close()
	coupon := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer coupon.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	tests := []struct {
		desc     string
		trusted  []netip.Prefix
		admitted int // of 12 concurrent critical requests, on a limit of 10 with 3 reserved
	}{
		{"no trusted proxies", nil, 7},
		{"the peer is not a trusted proxy", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, 7},
		{"the peer is a trusted proxy", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, 10},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var clock atomic.Int64
			clock.Store(int64(time.Hour))
			s := MustCompileOptions(t, fmt.Sprintf(classRules, orders.URL, coupon.URL), Options{Now: clock.Load, TrustedProxies: tc.trusted})
			gw := httptest.NewServer(s)
			defer gw.Close()
			c := gw.Client()
			send := func(path, user string, critical bool) int {
				req, _ := http.NewRequest("GET", gw.URL+path, nil)
				req.Header.Set("X-User", user)
				if critical {
					req.Header.Set("X-Priority", "critical")
				}
				res, err := c.Do(req)
				if err != nil {
					t.Error(err)
					return 0
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				return res.StatusCode
			}

			// The reserve: 12 concurrent critical requests, held by the upstream.
			entered.Store(0)
			var rejected atomic.Int32
			var wg sync.WaitGroup
			for i := range 12 {
				wg.Go(func() {
					if code := send("/orders", strconv.Itoa(i), true); code == http.StatusTooManyRequests {
						rejected.Add(1)
					} else if code != http.StatusOK {
						t.Errorf("status %d", code)
					}
				})
			}
			deadline := time.Now().Add(10 * time.Second)
			for int(entered.Load()+rejected.Load()) < 12 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if got := int(entered.Load()); got != tc.admitted || int(rejected.Load()) != 12-tc.admitted {
				t.Errorf("%d of 12 critical requests admitted, %d rejected; want %d admitted", got, rejected.Load(), tc.admitted)
			}
			if h, _ := headerSeen.Load().(string); h != "critical" {
				t.Errorf("the upstream saw X-Priority %q, want it forwarded as sent", h)
			}
			for range entered.Load() {
				release <- struct{}{}
			}
			wg.Wait()

			// shedOrder [default]: one measured window of 10 default and 10
			// critical requests, then level 1 sheds its half of the traffic
			// from the default class first.
			for i := range 10 {
				send("/coupon", "u"+strconv.Itoa(i), false)
				send("/coupon", "u"+strconv.Itoa(i), true)
			}
			clock.Add(int64(time.Second))
			var shedPlain, shedCritical, sameFate int
			for i := range 40 {
				u := "v" + strconv.Itoa(i)
				p, c := send("/coupon", u, false) == http.StatusServiceUnavailable, send("/coupon", u, true) == http.StatusServiceUnavailable
				shedPlain += b2i(p)
				shedCritical += b2i(c)
				sameFate += b2i(p == c)
			}
			if tc.admitted == 10 { // trusted: critical is spared, default is shed whole
				if shedCritical != 0 || shedPlain != 40 {
					t.Errorf("trusted: %d of 40 critical and %d of 40 default requests shed; want 0 and 40", shedCritical, shedPlain)
				}
			} else if sameFate != 40 || shedPlain == 0 {
				// untrusted: every request is default, shed by its client
				// key alone, with or without the header.
				t.Errorf("untrusted: %d of 40 clients shed alike with and without the header (%d default, %d critical shed); want 40, some shed", sameFate, shedPlain, shedCritical)
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
