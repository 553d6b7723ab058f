package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHopByHopFields: on either HTTP/1.1 engine, hop-by-hop fields (RFC
// 9110 §7.6.1) and the names a Connection field lists go no further in
// either direction, a client's X-Forwarded-* claims are replaced by the
// gateway's, and a client's "Connection: close" does not close the
// upstream connection.
func TestHopByHopFields(t *testing.T) {
	seen := make(chan http.Header, 4)
	up := newPlainUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		w.Header().Set("Connection", "X-Up-Hop")
		w.Header().Set("X-Up-Hop", "1")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("Proxy-Authenticate", "Basic")
		w.Header().Set("X-Kept", "yes")
		_, _ = io.WriteString(w, "ok")
	})
	_, base, _ := MustStart(t, fmt.Sprintf("namespace: hop\nroutes:\n  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}\n", up))
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = io.WriteString(c, "GET /a HTTP/1.1\r\nHost: front.test\r\nConnection: keep-alive, X-Secret-Hop\r\n"+
		"X-Secret-Hop: 1\r\nKeep-Alive: timeout=5\r\nTe: gzip, trailers\r\nProxy-Authorization: Basic eDp5\r\n"+
		"Proxy-Connection: keep-alive\r\nX-Forwarded-Host: evil.test\r\nX-Forwarded-Proto: https\r\n"+
		"X-Kept: yes\r\n\r\n")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "GET"})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	h := <-seen
	// Te: trailers alone may pass (gRPC needs it; httputil.ReverseProxy
	// keeps it too).
	if v := h.Values("Te"); len(v) > 0 && (len(v) != 1 || v[0] != "trailers") {
		t.Errorf("the upstream got Te: %q", v)
	}
	for _, k := range []string{"X-Secret-Hop", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection"} {
		if v, ok := h[k]; ok {
			t.Errorf("the upstream got %s: %q", k, v)
		}
	}
	if v := h.Get("Connection"); strings.Contains(strings.ToLower(v), "close") || strings.Contains(v, "Secret") {
		t.Errorf("the upstream got Connection: %q", v)
	}
	if h.Get("X-Kept") != "yes" || h.Get("X-Forwarded-Host") != "front.test" || h.Get("X-Forwarded-Proto") != "http" {
		t.Errorf("upstream header X-Kept %q X-Forwarded-Host %q X-Forwarded-Proto %q", h.Get("X-Kept"),
			h.Get("X-Forwarded-Host"), h.Get("X-Forwarded-Proto"))
	}
	for _, k := range []string{"X-Up-Hop", "Keep-Alive", "Proxy-Authenticate"} {
		if v, ok := resp.Header[k]; ok {
			t.Errorf("the client got %s: %q", k, v)
		}
	}
	if resp.Header.Get("X-Kept") != "yes" {
		t.Errorf("the client lost X-Kept")
	}
}
