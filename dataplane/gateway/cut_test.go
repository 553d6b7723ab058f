package gateway

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestCutResponsesOpenBreaker: on both HTTP/1.1 engines a response the
// upstream cuts off mid-body, after its header went out, counts as a failure
// for the route's breaker (on fasthttp the body is streamed after the
// request path returned, so its outcome is reported when the body ends),
// while whole responses of the same size do not; each is recorded with the
// status the client got.
func TestCutResponsesOpenBreaker(t *testing.T) {
	const size = 1 << 20 // streamed: over the fasthttp engine's small-body read
	chunk := strings.Repeat("x", 64<<10)
	up := newPlainUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("len") == "1" {
			w.Header().Set("Content-Length", fmt.Sprint(size))
		}
		if r.URL.Query().Get("cut") != "1" {
			for range size / len(chunk) {
				_, _ = io.WriteString(w, chunk)
			}
			return
		}
		_, _ = io.WriteString(w, chunk)
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler) // the connection is closed mid-body
	})
	rules := fmt.Sprintf(`namespace: cut
routes:
  - {id: api, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}
breakers:
  - id: api-breaker
    routes: [api]
    window: 10s
    minRequests: 4
    errorRatio: 0.5
    openFor: 10s
`, up)
	for _, engine := range testEngines() {
		for _, framing := range []string{"len=1", "len=0"} {
			t.Run(engine+"/"+framing, func(t *testing.T) {
				t.Setenv(EngineEnv, engine)
				n, base, adminURL := MustStart(t, rules)
				c := &http.Client{}
				defer c.CloseIdleConnections()
				fetch := func(cut bool) (int, int, error) {
					q := "?" + framing
					if cut {
						q += "&cut=1"
					}
					resp, err := c.Get(base + "/x" + q)
					if err != nil {
						return 0, 0, err
					}
					defer resp.Body.Close()
					b, err := io.ReadAll(resp.Body)
					return resp.StatusCode, len(b), err
				}
				for range 6 {
					if code, got, err := fetch(false); code != 200 || got != size || err != nil {
						t.Fatalf("whole response: %d, %d bytes, %v", code, got, err)
					}
				}
				breakerState := func() string {
					var st struct {
						Breakers []struct{ Rule, State string }
					}
					adminJSON(t, adminURL+"/breakers", &st)
					if len(st.Breakers) != 1 {
						t.Fatalf("breakers %+v", st)
					}
					return st.Breakers[0].State
				}
				if s := breakerState(); s != "closed" {
					t.Fatalf("after whole responses the breaker is %s", s)
				}
				for i := range 6 {
					code, got, err := fetch(true)
					if code == http.StatusServiceUnavailable {
						if i < 4 {
							t.Fatalf("the breaker opened after %d cut responses, before minRequests", i)
						}
						break
					}
					if err == nil && got == size {
						t.Fatalf("cut response %d read whole (%d bytes)", i, got)
					}
				}
				if s := breakerState(); s != "open" {
					t.Fatalf("after cut responses the breaker is %s, want open", s)
				}
				if code, _, _ := fetch(false); code != http.StatusServiceUnavailable {
					t.Fatalf("with the breaker open: %d, want 503", code)
				}
				if got := testutil.ToFloat64(n.metrics.Requests.WithLabelValues("api", "200")); got < 10 {
					t.Errorf("sluice_requests_total{route=api,code=200} %v, want the 6 whole and 4+ cut responses", got)
				}
				if got := testutil.ToFloat64(n.metrics.Requests.WithLabelValues("api", "499")); got != 0 {
					t.Errorf("%v responses recorded as the client gone", got)
				}
			})
		}
	}
}

// TestClientStopsTakingBody: on both HTTP/1.1 engines a client that stops
// reading a streamed body until the route's writeTimeout passes is the
// client gone (recorded 499), not a failure of the upstream's: the breaker
// stays closed.
func TestClientStopsTakingBody(t *testing.T) {
	chunk := strings.Repeat("x", 64<<10)
	up := newPlainUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		for r.Context().Err() == nil {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
			_ = rc.Flush()
		}
	})
	rules := fmt.Sprintf(`namespace: stop
routes:
  - {id: api, match: {pathPrefix: /}, upstream: {writeTimeout: 300ms, targets: [{url: %q}]}}
breakers:
  - id: api-breaker
    routes: [api]
    window: 10s
    minRequests: 1
    errorRatio: 0.5
    openFor: 10s
`, up)
	for _, engine := range testEngines() {
		t.Run(engine, func(t *testing.T) {
			t.Setenv(EngineEnv, engine)
			n, base, adminURL := MustStart(t, rules)
			c, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			if _, err := io.WriteString(c, "GET /stream HTTP/1.1\r\nHost: g\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(c, make([]byte, 64<<10)); err != nil {
				t.Fatal(err)
			}
			// Stop reading: the gateway's writes stall, then fail.
			gone := n.metrics.Requests.WithLabelValues("api", "499")
			deadline := time.Now().Add(15 * time.Second)
			for testutil.ToFloat64(gone) == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the stalled client was never recorded as gone (499)")
				}
				time.Sleep(20 * time.Millisecond)
			}
			var st struct {
				Breakers []struct{ Rule, State string }
			}
			adminJSON(t, adminURL+"/breakers", &st)
			if len(st.Breakers) != 1 || st.Breakers[0].State != "closed" {
				t.Fatalf("breakers %+v, want closed", st)
			}
			if got := testutil.ToFloat64(n.metrics.Requests.WithLabelValues("api", "200")); got != 0 {
				t.Fatalf("recorded as 200 %v times", got)
			}
		})
	}
}
