package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

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

// grpcUpstream serves every gRPC method on loopback (h2c), echoing the
// call's message and recording its trace context as handler does; it
// returns the address.
func (s *traceSeen) grpcUpstream(t *testing.T) string {
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, st grpc.ServerStream) error {
		md, _ := metadata.FromIncomingContext(st.Context())
		if tp := md.Get("traceparent"); len(tp) == 1 && len(tp[0]) >= 35 {
			s.mu.Lock()
			s.seen[tp[0][3:35]] = [2]string{tp[0], strings.Join(md.Get("tracestate"), ",")}
			s.mu.Unlock()
		}
		var in []byte
		if err := st.RecvMsg(&in); err != nil {
			return err
		}
		return st.SendMsg(&in)
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return l.Addr().String()
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
	grpcAddr := seen.grpcUpstream(t)
	rules := fmt.Sprintf(`namespace: spans
routes:
  - {id: h1, match: {pathPrefix: /h1}, upstream: {targets: [{url: %q}]}}
  - {id: h2c, match: {pathPrefix: /h2c}, upstream: {targets: [{url: %q}]}}
  - {id: grpc, match: {pathPrefix: /sluice.test.Echo/}, upstream: {targets: [{url: "http://%s"}], protocol: h2c}}
`, h1, h2c, grpcAddr)

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
		if err := tp.ForceFlush(context.Background()); err != nil { // not a second for the batch
			t.Fatal(err)
		}
		s := recv.Wait(t, 10*time.Second, func(s tracingtest.Span) bool { return s.TraceID() == tid })
		if s.ParentID() != pid {
			t.Errorf("gateway span's parent %s, want the caller's %s", s.ParentID(), pid)
		}
		if want := "00-" + tid + "-" + s.SpanID() + "-01"; got != want {
			t.Errorf("upstream got traceparent %q, want %q (the gateway span %s its parent)", got, want, s.SpanID())
		}
	}

	_, base, _ := MustStartConfig(t, rules, Config{Snapshot: snapshot.Options{Tracer: tp}})
	do := http.DefaultClient.Do
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/h1/get"}, {http.MethodPost, "/h1/post"}, {http.MethodGet, "/h2c/get"}, {http.MethodPost, "/h2c/post"},
	} {
		t.Run(tc.method+tc.path, func(t *testing.T) {
			check(t, do, tc.method, base+tc.path, true)
			check(t, do, tc.method, base+tc.path, false)
		})
	}
	cc := h2cConns(t, base, 1)[0]
	for _, path := range []string{"/h1/h2", "/h2c/h2"} {
		t.Run("HTTP/2 "+path, func(t *testing.T) {
			check(t, cc.RoundTrip, http.MethodPost, base+path, true)
			check(t, cc.RoundTrip, http.MethodGet, base+path, false)
		})
	}
	t.Run("gRPC", func(t *testing.T) {
		gc, err := grpc.NewClient("passthrough:///"+strings.TrimPrefix(base, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer gc.Close()
		call := func(req *http.Request) (*http.Response, error) {
			ctx := metadata.AppendToOutgoingContext(req.Context(), "traceparent", req.Header.Get("Traceparent"), "tracestate", req.Header.Get("Tracestate"))
			if _, err := invoke(ctx, gc, "Unary", "x"); err != nil {
				return nil, err
			}
			return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
		}
		check(t, call, http.MethodPost, "grpc", true)
		check(t, call, http.MethodPost, "grpc", false)
	})
}
