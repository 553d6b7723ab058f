package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api/buildinfo/buildinfotest"
	"github.com/sluicegw/sluice/controlplane/internal/testenv"
	"github.com/sluicegw/sluice/dataplane/tracing/tracingtest"
	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
)

// TestTracesAPIRequests: sluice-admin serving with --otlp-endpoint exports
// a span per admin API request to an OTLP receiver, the child of the
// caller's traceparent, named for the route, with its status; /metrics
// has the dropped-spans counter from the start.
func TestTracesAPIRequests(t *testing.T) {
	e := etcdtest.Start(t)
	dbURL := testenv.MustDatabase(t)
	recv := tracingtest.Start(t)
	t.Setenv("SLUICE_BOOTSTRAP_ADMIN_PASSWORD", "a long enough password")
	cfg, err := parseFlags("serve", []string{"--database-url", dbURL, "--etcd-endpoints", e.Addr(), "--listen", "127.0.0.1:0",
		"--insecure-no-audit-key", "--insecure-publish-unsigned", "--web-dir", "",
		"--otlp-endpoint", recv.URL, "--otlp-sample-ratio", "0"})
	if err != nil {
		t.Fatal(err)
	}
	m := NewMain(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.Run(ctx); err != nil {
		m.Close()
		t.Fatalf("Run: %v", err)
	}
	defer m.Close()
	const tid, pid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, _ := http.NewRequest("GET", "http://"+m.Addr()+"/api/v1/namespaces/shop/versions", nil)
	req.Header.Set("Traceparent", "00-"+tid+"-"+pid+"-01") // sampled by the caller, whatever the ratio
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401 (no credentials)", resp.StatusCode)
	}
	s := recv.Wait(t, 10*time.Second, func(s tracingtest.Span) bool { return s.TraceID() == tid })
	if s.ParentID() != pid || s.Name != "GET /api/v1/namespaces/:ns/versions" {
		t.Errorf("span %q, parent %s; want GET /api/v1/namespaces/:ns/versions under %s", s.Name, s.ParentID(), pid)
	}
	if s.Attr("http.response.status_code") != "401" || s.Attr("http.route") != "/api/v1/namespaces/:ns/versions" || s.Attr("sluice.request_id") == "" {
		t.Errorf("span attributes: status %q, route %q, request id %q", s.Attr("http.response.status_code"), s.Attr("http.route"), s.Attr("sluice.request_id"))
	}
	if s.Resource["service.name"] != "sluice-admin" {
		t.Errorf("resource %v", s.Resource)
	}
	resp, err = http.Get("http://" + m.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `sluice_admin_trace_spans_dropped_total{reason="queue_full"} 0`) {
		t.Errorf("/metrics lacks sluice_admin_trace_spans_dropped_total")
	}
}

// TestVersion: --version prints the build make dist injects.
func TestVersion(t *testing.T) {
	t.Parallel()
	buildinfotest.CheckVersion(t, "sluice-admin")
}
