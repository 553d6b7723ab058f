package gateway

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

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
	for _, engine := range []string{EngineNetHTTP, EngineFastHTTP} {
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
