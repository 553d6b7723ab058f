package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicegw/sluice/dataplane/snapshot"
	"github.com/sluicegw/sluice/dataplane/tracing"
	"github.com/sluicegw/sluice/dataplane/tracing/tracingtest"
)

// traceSeen records the traceparent and tracestate each request reaching
// an upstream came with, by the trace id of its traceparent.
type traceSeen struct {
	mu   sync.Mutex
	seen map[string][2]string
}

func (s *traceSeen) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		tp := r.Header.Values("Traceparent")
		if len(tp) == 1 && len(tp[0]) >= 35 {
			s.mu.Lock()
			s.seen[tp[0][3:35]] = [2]string{tp[0], strings.Join(r.Header.Values("Tracestate"), ",")}
			s.mu.Unlock()
		}
		_, _ = io.WriteString(w, "ok")
	})
}

func (s *traceSeen) get(traceID string) (traceparent, tracestate string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.seen[traceID]
	return v[0], v[1]
}

// TestUpstreamSpansNestUnderGateway: with tracing on, a request the caller
// sampled reaches the upstream with a traceparent in the caller's trace
// whose parent id is the gateway's exported span (whose own parent is the
// caller's), and the caller's tracestate, on every forward path: each
// HTTP/1.1 engine's (the raw head, and fasthttp's request writer for a
// body), the HTTP/1.1 engines' bridge to an h2c target, and HTTP/2 (the
// h2c relay). A request the caller did not sample goes on as it came.
func TestUpstreamSpansNestUnderGateway(t *testing.T) {
	recv := tracingtest.Start(t)
	tp, err := tracing.New(tracing.Config{Endpoint: recv.URL, SampleRatio: 0, Service: "sluice-gateway"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	seen := &traceSeen{seen: map[string][2]string{}}
	h1s := httptest.NewServer(seen.handler())
	t.Cleanup(h1s.Close)
	h1 := h1s.URL
	h2c, _ := leanUpstream(t, true, seen.handler())
	rules := fmt.Sprintf(`namespace: spans
routes:
  - {id: h1, match: {pathPrefix: /h1}, upstream: {targets: [{url: %q}]}}
  - {id: h2c, match: {pathPrefix: /h2c}, upstream: {targets: [{url: %q}]}}
`, h1, h2c)

	n := 0
	check := func(t *testing.T, do func(*http.Request) (*http.Response, error), method, path string, sampled bool) {
		t.Helper()
		n++
		tid := fmt.Sprintf("%032x", 0x4bf92f3577b30000+n)
		const pid, state = "00f067aa0ba902b7", "vendor=x,other=y"
		flags := "00"
		if sampled {
			flags = "01"
		}
		parent := "00-" + tid + "-" + pid + "-" + flags
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader("a body")
		}
		req, _ := http.NewRequest(method, path, body)
		req.Header.Set("Traceparent", parent)
		req.Header.Set("Tracestate", state)
		resp, err := do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		got, gotState := seen.get(tid)
		if gotState != state {
			t.Errorf("upstream got tracestate %q, want the caller's %q", gotState, state)
		}
		if !sampled {
			if got != parent {
				t.Errorf("an unsampled request's traceparent went upstream as %q, want the caller's %q", got, parent)
			}
			return
		}
		s := recv.Wait(t, 10*time.Second, func(s tracingtest.Span) bool { return s.TraceID() == tid })
		if s.ParentID() != pid {
			t.Errorf("gateway span's parent %s, want the caller's %s", s.ParentID(), pid)
		}
		if want := "00-" + tid + "-" + s.SpanID() + "-01"; got != want {
			t.Errorf("upstream got traceparent %q, want %q (the gateway span %s its parent)", got, want, s.SpanID())
		}
	}

	for _, engine := range testEngines() {
		t.Run(engine, func(t *testing.T) {
			_, base, _ := MustStartConfig(t, rules, Config{HTTP1Engine: engine, Snapshot: snapshot.Options{Tracer: tp}})
			do := http.DefaultClient.Do
			for _, tc := range []struct{ method, path string }{
				{http.MethodGet, "/h1/get"}, {http.MethodPost, "/h1/post"}, {http.MethodGet, "/h2c/get"}, {http.MethodPost, "/h2c/post"},
			} {
				t.Run(tc.method+tc.path, func(t *testing.T) {
					check(t, do, tc.method, base+tc.path, true)
					check(t, do, tc.method, base+tc.path, false)
				})
			}
			if engine != testEngines()[0] {
				return // HTTP/2 is served alike whatever the HTTP/1.1 engine
			}
			cc := h2cConns(t, base, 1)[0]
			for _, path := range []string{"/h1/h2", "/h2c/h2"} {
				t.Run("HTTP/2 "+path, func(t *testing.T) {
					check(t, cc.RoundTrip, http.MethodPost, base+path, true)
					check(t, cc.RoundTrip, http.MethodGet, base+path, false)
				})
			}
		})
	}
}
