package gateway

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestH2CBodyTimeout: over h2c (prior knowledge) the route's bodyTimeout
// applies per stream: a stalled body is answered 408, a whole one is
// forwarded, and the connection keeps serving other streams.
func TestH2CBodyTimeout(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%d", n)
	}))
	t.Cleanup(up.Close)
	_, base, _ := MustStart(t, fmt.Sprintf(`namespace: h2
routes:
  - id: up
    match: {pathPrefix: /}
    upstream: {targets: [{url: %q}], timeout: 30s, bodyTimeout: 500ms}
`, up.URL))
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr, Timeout: 15 * time.Second}

	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	go func() { _, _ = io.WriteString(pw, "0123456789") }() // then nothing
	req, _ := http.NewRequest("POST", base+"/stall", pr)
	req.ContentLength = 1000
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("stalled h2c body: %s %d %s, want HTTP/2 408", resp.Proto, resp.StatusCode, body)
	}
	t.Logf("stalled h2c body answered %d after %v", resp.StatusCode, time.Since(start))

	resp, err = c.Post(base+"/whole", "application/octet-stream", strings.NewReader(strings.Repeat("x", 1<<20)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != fmt.Sprint(1<<20) {
		t.Fatalf("whole h2c body: %d %s", resp.StatusCode, body)
	}
}

// TestH2CBodyRouteTimeout: over h2c a stream whose body stalls is answered
// 504 when the route's timeout fires before its bodyTimeout, at once, and
// the connection goes on serving other streams.
func TestH2CBodyRouteTimeout(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%d", n)
	}))
	t.Cleanup(up.Close)
	_, base, _ := MustStart(t, fmt.Sprintf(`namespace: h2
routes:
  - id: up
    match: {pathPrefix: /}
    upstream: {targets: [{url: %q}], timeout: 300ms, bodyTimeout: 5s}
`, up.URL))
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr, Timeout: 15 * time.Second}

	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	go func() { _, _ = io.WriteString(pw, "0123456789") }() // then nothing
	req, _ := http.NewRequest("POST", base+"/stall", pr)
	req.ContentLength = 1000
	var conns atomic.Int32
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		ConnectStart: func(string, string) { conns.Add(1) },
	}))
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("stalled h2c body: %s %d %s, want HTTP/2 504", resp.Proto, resp.StatusCode, body)
	}
	t.Logf("stalled h2c body answered %d after %v", resp.StatusCode, took)
	if took > 2*time.Second { // generous for a loaded machine; bodyTimeout is 5s
		t.Errorf("answered after %v", took)
	}

	req, _ = http.NewRequest("POST", base+"/whole", strings.NewReader("0123456789"))
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		ConnectStart: func(string, string) { conns.Add(1) },
	}))
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "10" {
		t.Fatalf("whole h2c body: %d %s", resp.StatusCode, body)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for two streams, want one", n)
	}
}
