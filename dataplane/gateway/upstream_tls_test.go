package gateway

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/dataplane/internal/testca"
)

// TestUpstreamTLSAndProtocol forwards to https:// upstreams with a
// certificate from a test CA: without upstream.tls the system roots refuse
// it (502); with tls.ca it is verified, under tls.serverName when the
// certificate does not name the address; protocol picks the HTTP version,
// and h2 to an upstream that offers only HTTP/1.1 is a 502, not a silent
// downgrade.
func TestUpstreamTLSAndProtocol(t *testing.T) {
	t.Parallel()
	ca := testca.New(t, "upstream test CA")
	start := func(h2 bool, names ...string) string {
		leaf := ca.Leaf(t, time.Time{}, time.Time{}, names...).TLSCertificate(t)
		s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, r.Proto)
		}))
		s.EnableHTTP2 = h2
		s.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}}
		s.StartTLS()
		t.Cleanup(s.Close)
		return s.URL
	}
	both := start(true, "127.0.0.1")
	h1only := start(false, "127.0.0.1")
	named := start(true, "api.internal.test")
	pem := strings.ReplaceAll(strings.TrimSpace(string(ca.PEM())), "\n", `\n`)
	caLine := fmt.Sprintf(`ca: "%s"`, pem)
	route := func(id, url, extra string) string {
		return fmt.Sprintf("  - id: %s\n    match: {pathPrefix: /%s}\n    upstream: {targets: [{url: %q}]%s}\n", id, id, url, extra)
	}
	rules := "namespace: up\nroutes:\n" +
		route("untrusted", both, "") +
		route("alpn", both, ", tls: {"+caLine+"}") +
		route("http1", both, ", protocol: http1, tls: {"+caLine+"}") +
		route("h2", both, ", protocol: h2, tls: {"+caLine+"}") +
		route("h2-to-h1", h1only, ", protocol: h2, tls: {"+caLine+"}") +
		route("named", named, ", tls: {serverName: api.internal.test, "+caLine+"}") +
		route("misnamed", named, ", tls: {"+caLine+"}")
	_, base, _ := MustStart(t, rules)
	tests := []struct {
		path       string
		wantStatus int
		wantBody   string
	}{
		{"/untrusted", 502, ""},
		{"/alpn", 200, "HTTP/2.0"},
		{"/http1", 200, "HTTP/1.1"},
		{"/h2", 200, "HTTP/2.0"},
		{"/h2-to-h1", 502, ""},
		{"/named", 200, "HTTP/2.0"},
		{"/misnamed", 502, ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			resp, err := http.Get(base + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus || (tt.wantBody != "" && string(body) != tt.wantBody) {
				t.Fatalf("status %d body %q, want %d %q", resp.StatusCode, body, tt.wantStatus, tt.wantBody)
			}
		})
	}
}
