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
	for _, framing := range []string{"len=1", "len=0"} {
		t.Run(framing, func(t *testing.T) {
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

// TestClientStopsTakingBody: on every engine a client that stops reading a
// streamed body until the route's writeTimeout passes is the client gone
// (recorded 499), not a failure of the upstream's: the breaker stays
// closed. So from an HTTP/1.1 target and from an h2c one (on the fasthttp
// engine, through the net/http bridge), within a few seconds: the route's
// writeTimeout (300ms) bounds the stalled write, not the engine's default
// (10s).
func TestClientStopsTakingBody(t *testing.T) {
	chunk := strings.Repeat("x", 64<<10)
	stream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		for r.Context().Err() == nil {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
			_ = rc.Flush()
		}
	})
	up := newPlainUpstream(t, stream)
	h2cAddr := newH2CUpstream(t, stream)
	rules := fmt.Sprintf(`namespace: stop
routes:
  - {id: api, match: {pathPrefix: /api/}, upstream: {writeTimeout: 300ms, targets: [{url: %q}]}}
  - {id: h2c, match: {pathPrefix: /h2c/}, upstream: {writeTimeout: 300ms, targets: [{url: "h2c://%s"}]}}
breakers:
  - id: api-breaker
    routes: [api, h2c]
    window: 10s
    minRequests: 1
    errorRatio: 0.5
    openFor: 10s
`, up, h2cAddr)
	for _, route := range []string{"api", "h2c"} {
		t.Run(route, func(t *testing.T) {
			n, base, adminURL := MustStart(t, rules)
			c, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			if _, err := io.WriteString(c, "GET /"+route+"/stream HTTP/1.1\r\nHost: g\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(c, make([]byte, 64<<10)); err != nil {
				t.Fatal(err)
			}
			// Stop reading: the gateway's writes stall, then fail.
			gone := n.metrics.Requests.WithLabelValues(route, "499")
			stopped := time.Now()
			deadline := stopped.Add(5 * time.Second) // half the engines' default
			for testutil.ToFloat64(gone) == 0 {
				if time.Now().After(deadline) {
					mfs, _ := n.metrics.Registry.Gather()
					for _, mf := range mfs {
						if mf.GetName() == "sluice_requests_total" {
							t.Logf("%v", mf.GetMetric())
						}
					}
					t.Fatal("the stalled client was not recorded as gone (499) within 5s: writeTimeout 300ms")
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Logf("recorded gone %v after the client stopped reading", time.Since(stopped).Round(time.Millisecond))
			var st struct {
				Breakers []struct{ Rule, Route, State string }
			}
			adminJSON(t, adminURL+"/breakers", &st)
			for _, b := range st.Breakers {
				if b.State != "closed" {
					t.Fatalf("breakers %+v, want closed", st)
				}
			}
			if got := testutil.ToFloat64(n.metrics.Requests.WithLabelValues(route, "200")); got != 0 {
				t.Fatalf("recorded as 200 %v times", got)
			}
		})
	}
}

// TestStreamQuietLongerThanWriteTimeout: writeTimeout bounds a write that
// makes no progress, not the wait for the upstream's next bytes nor the
// whole answer. An event stream quiet for longer than its route's
// writeTimeout (a server-sent events connection between events) reaches a
// reading client whole on every engine, from an HTTP/1.1 target and from
// an h2c one (on the fasthttp engine, through the net/http bridge).
func TestStreamQuietLongerThanWriteTimeout(t *testing.T) {
	sse := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := range 3 {
			if i > 0 {
				time.Sleep(time.Second) // quiet: over 3× writeTimeout
			}
			fmt.Fprintf(w, "data: %d\n\n", i)
			_ = rc.Flush()
		}
	})
	plain := newPlainUpstream(t, sse)
	h2cAddr := newH2CUpstream(t, sse)
	rules := fmt.Sprintf(`namespace: quiet
routes:
  - {id: plain, match: {pathPrefix: /plain/}, upstream: {writeTimeout: 300ms, targets: [{url: %q}]}}
  - {id: h2c, match: {pathPrefix: /h2c/}, upstream: {writeTimeout: 300ms, targets: [{url: "h2c://%s"}]}}
`, plain, h2cAddr)
	t.Parallel()
	_, base, _ := MustStartConfig(t, rules, Config{})
	client := &http.Client{Timeout: 20 * time.Second}
	for _, path := range []string{"/plain/events", "/h2c/events"} {
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(got) != "data: 0\n\ndata: 1\n\ndata: 2\n\n" {
			t.Fatalf("%s: stream %q, %v; want the three events whole", path, got, err)
		}
	}
}
