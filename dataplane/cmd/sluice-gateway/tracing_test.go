package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api/buildinfo/buildinfotest"
	"github.com/sluicegw/sluice/dataplane/tracing/tracingtest"
)

// tracedUpstream is an upstream that records the traceparent of each
// request, by its X-Request-Id.
func tracedUpstream(t *testing.T) (*httptest.Server, func(id string) string) {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]string{}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("X-Request-Id")] = r.Header.Get("Traceparent")
		mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(s.Close)
	return s, func(id string) string {
		mu.Lock()
		defer mu.Unlock()
		return seen[id]
	}
}

const tracedRules = `namespace: e2e
routes:
  - id: api
    match: {pathPrefix: /api}
    upstream: {targets: [{url: "%s"}], timeout: 5s}
limits:
  - id: per-key
    routes: [api]
    key: [header:X-Api-Key]
    algorithm: token_bucket
    rate: 1
    period: 1h
    burst: 2
  - id: shadow-tight
    routes: [api]
    key: [global]
    algorithm: token_bucket
    rate: 1
    period: 1h
    burst: 1
    shadow: true
`

// TestTracesRequests runs a real gateway exporting to an in-process OTLP
// receiver: a request with a sampled traceparent
// gets a span in that trace whose parent is the caller's span, with the
// route, each rule's decision (admit, shadow, reject), the upstream and the
// status; a request without one starts a trace whose root span is the
// parent the upstream was sent; a caller's unsampled traceparent gets no
// span.
func TestTracesRequests(t *testing.T) {
	t.Parallel()
	recv := tracingtest.Start(t)
	up, sentParent := tracedUpstream(t)
	g := startGateway(t, fmt.Sprintf(tracedRules, up.URL),
		"--otlp-endpoint", recv.URL, "--otlp-sample-ratio", "1")
	get := func(id, traceparent string) int {
		req, _ := http.NewRequest("GET", "http://"+g.addr+"/api/orders", nil)
		req.Header.Set("X-Request-Id", id)
		req.Header.Set("X-Api-Key", "k1")
		if traceparent != "" {
			req.Header.Set("Traceparent", traceparent)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	const (
		tid1 = "4bf92f3577b34da6a3ce929d0e0e4736"
		pid1 = "00f067aa0ba902b7"
		tid3 = "11111111111111111111111111111111"
		tid4 = "22222222222222222222222222222222"
	)
	if c := get("req-1", "00-"+tid1+"-"+pid1+"-01"); c != 200 {
		t.Fatalf("request 1: status %d", c)
	}
	s := recv.Wait(t, 10*time.Second, func(s tracingtest.Span) bool { return s.TraceID() == tid1 })
	if s.ParentID() != pid1 || s.Name != "GET api" {
		t.Errorf("span %q parent %s, want \"GET api\" under the caller's %s", s.Name, s.ParentID(), pid1)
	}
	if got, want := sentParent("req-1"), "00-"+tid1+"-"+s.SpanID()+"-01"; got != want {
		t.Errorf("upstream got traceparent %q, want %q: the gateway's span its parent", got, want)
	}
	want := map[string]string{"sluice.route": "api", "sluice.decision.per-key": "admit", "sluice.decision.shadow-tight": "admit",
		"sluice.upstream": up.URL, "http.response.status_code": "200", "http.request.method": "GET", "url.path": "/api/orders"}
	for k, v := range want {
		if got := s.Attr(k); got != v {
			t.Errorf("span attribute %s = %q, want %q", k, got, v)
		}
	}
	if s.Resource["service.name"] != "sluice-gateway" || s.Resource["service.version"] == "" {
		t.Errorf("resource %v: want service.name sluice-gateway and a service.version", s.Resource)
	}
	if d := s.EndTimeUnixNano - s.StartTimeUnixNano; s.StartTimeUnixNano == 0 || d <= 0 || d > uint64(10*time.Second) {
		t.Errorf("span from %d to %d", s.StartTimeUnixNano, s.EndTimeUnixNano)
	}

	// No traceparent: the gateway starts the trace, and its span,
	// a root, is the parent the upstream was sent.
	if c := get("req-2", ""); c != 200 {
		t.Fatalf("request 2: status %d", c)
	}
	tp := sentParent("req-2")
	if len(tp) != 55 || tp[53:] != "01" {
		t.Fatalf("upstream got traceparent %q, want one the gateway started, sampled", tp)
	}
	s = recv.Wait(t, 10*time.Second, func(s tracingtest.Span) bool { return s.TraceID() == tp[3:35] })
	if s.SpanID() != tp[36:52] || s.ParentID() != "" {
		t.Errorf("span %s parent %q; want the root span %s the upstream was sent", s.SpanID(), s.ParentID(), tp[36:52])
	}
	if got := s.Attr("sluice.decision.shadow-tight"); got != "shadow" {
		t.Errorf("shadow limit's decision %q, want shadow", got)
	}

	// The caller did not sample: no span. The next, sampled,
	// request's span comes after where its span would have been.
	if c := get("req-3", "00-"+tid3+"-"+pid1+"-00"); c != 429 {
		t.Fatalf("request 3: status %d, want 429 (per-key's burst is 2)", c)
	}
	if c := get("req-4", "00-"+tid4+"-"+pid1+"-01"); c != 429 {
		t.Fatalf("request 4: status %d, want 429", c)
	}
	s = recv.Wait(t, 10*time.Second, func(s tracingtest.Span) bool { return s.TraceID() == tid4 })
	if s.Attr("sluice.decision.per-key") != "reject" || s.Attr("http.response.status_code") != "429" {
		t.Errorf("rejected request's span: per-key %q, status %q", s.Attr("sluice.decision.per-key"), s.Attr("http.response.status_code"))
	}
	if got := s.Attr("sluice.decision.shadow-tight"); got != "" {
		t.Errorf("rejected request's span: shadow-tight %q, want none (per-key, first, rejected)", got)
	}
	for _, s := range recv.Spans() {
		if s.TraceID() == tid3 {
			t.Errorf("a span for the caller's unsampled trace: %v", s.Name)
		}
	}
}

// TestTracingDeadCollector points the gateway at a collector that accepts
// connections and never answers, with a small queue: every request is
// still answered promptly, and the spans that found the queue full are
// counted in sluice_trace_spans_dropped_total.
func TestTracingDeadCollector(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // read nothing, answer nothing
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	})
	up := upstream(t)
	g := startGateway(t, fmt.Sprintf(rulesTemplate, up.URL, 100000, 100000),
		"--otlp-endpoint", "http://"+l.Addr().String(), "--otlp-sample-ratio", "1", "--otlp-queue-size", "8")
	var slowest time.Duration
	for i := range 150 {
		if i == 50 {
			// The first 50 spans are in the batch now sent, whose export
			// hangs for its timeout (5s); the next 100 find the queue
			// (8) full once 8 wait.
			time.Sleep(1500 * time.Millisecond)
		}
		start := time.Now()
		resp, err := http.Get("http://" + g.addr + "/api/x")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
		slowest = max(slowest, time.Since(start))
	}
	if slowest > time.Second {
		t.Errorf("slowest request took %s with the collector hung", slowest)
	}
	resp, err := http.Get("http://" + g.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`(?m)^sluice_trace_spans_dropped_total\{reason="queue_full"\} (\S+)$`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("no sluice_trace_spans_dropped_total{reason=\"queue_full\"} in /metrics:\n%s", grepLines(string(body), "trace"))
	}
	if n, _ := strconv.ParseFloat(string(m[1]), 64); n < 92 {
		t.Errorf("dropped %v spans, want at least 92 of the last 100", n)
	}
	t.Logf("slowest request %s; %s", slowest, m[0])
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestVersion: --version prints the build make dist injects.
func TestVersion(t *testing.T) {
	t.Parallel()
	buildinfotest.CheckVersion(t, "sluice-gateway")
}

// TestUnsampledTraceGoesUpstreamUnsampled: with tracing on and a trace the
// gateway starts left out by the ratio, the upstream is told so (-00), so
// that a service following its caller's decision records none of it; a
// caller's sampled traceparent is followed whatever the ratio (the upstream
// gets the caller's trace with the gateway's span as parent); with tracing
// off, the caller's traceparent is passed on as it came, and the gateway's
// traces go upstream sampled (-01), as its decision lines record them.
func TestUnsampledTraceGoesUpstreamUnsampled(t *testing.T) {
	t.Parallel()
	recv := tracingtest.Start(t)
	for _, tc := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"ratio 0", []string{"--otlp-endpoint", recv.URL, "--otlp-sample-ratio", "0"}, "00"},
		{"tracing off", nil, "01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up, sentParent := tracedUpstream(t)
			g := startGateway(t, fmt.Sprintf(tracedRules, up.URL), tc.flags...)
			for i, parent := range []string{"", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"} {
				id := fmt.Sprintf("req-%d", i)
				req, _ := http.NewRequest("GET", "http://"+g.addr+"/api/orders", nil)
				req.Header.Set("X-Request-Id", id)
				req.Header.Set("X-Api-Key", id)
				if parent != "" {
					req.Header.Set("Traceparent", parent)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				got := sentParent(id)
				switch {
				case parent != "" && tc.flags == nil && got != parent:
					t.Errorf("tracing off: the caller's traceparent %q went upstream as %q", parent, got)
				case parent != "" && tc.flags != nil && (len(got) != 55 || got[:36] != parent[:36] || got[36:52] == parent[36:52] || got[52:] != "-01"):
					t.Errorf("the caller's sampled traceparent %q went upstream as %q, want its trace under the gateway's span", parent, got)
				case parent == "" && (len(got) != 55 || got[53:] != tc.want):
					t.Errorf("the gateway's traceparent %q, want flags %s", got, tc.want)
				}
			}
		})
	}
}
