package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// scriptedUpstream answers every request on its connections with the next of
// answers (raw bytes, status line included), in turn, and keeps each
// connection open unless the answer closes it. An answer holding "<stall>"
// is sent up to there, and then nothing more until the test ends.
func scriptedUpstream(tb testing.TB, answers ...string) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	stalled := make(chan struct{})
	tb.Cleanup(func() { close(stalled); ln.Close() })
	next := make(chan string, len(answers))
	for _, a := range answers {
		next <- a
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					var a string
					select {
					case a = <-next:
					default:
						a = "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n"
					}
					a, stall := strings.CutSuffix(a, "<stall>")
					if _, err := io.WriteString(c, a); err != nil || strings.Contains(a, "Connection: close") {
						return
					}
					if stall {
						<-stalled
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestRelayedAnswerHeader: on either HTTP/1.1 engine, the client gets the
// upstream's answer under the gateway's status line (HTTP/1.1 and the
// status's standard phrase, whatever version and phrase the upstream
// used), with the upstream's fields (Server, every Set-Cookie) less its
// hop-by-hop ones and its X-Request-Id (the client gets the gateway's,
// once), the RateLimit fields of the admitting limit once each, and the
// upstream's "Connection: close" closes the upstream's connection, not the
// client's: the next request on the same client connection is answered.
func TestRelayedAnswerHeader(t *testing.T) {
	up := scriptedUpstream(t,
		"HTTP/1.0 200 Fine Thanks\r\nConnection: close\r\nX-Request-Id: from-upstream\r\nServer: up/1\r\n"+
			"Set-Cookie: a=1\r\nSet-Cookie: b=2\r\nKeep-Alive: timeout=1\r\nX-Kept: yes\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\nX-Second: yes\r\n\r\n"+
			"3\r\nabc\r\n0\r\nX-Sum: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nratelimit-policy: \"app\";q=5\r\nContent-Length: 1\r\n\r\nz")
	_, base, _ := MustStart(t, fmt.Sprintf(`namespace: relay
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}
limits:
  - {id: per-ip, key: [ip], algorithm: token_bucket, rate: 1000, period: 1s, burst: 1000}
`, up))
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	get := func(id string) (*http.Response, string, string) {
		t.Helper()
		if _, err := fmt.Fprintf(c, "GET /a HTTP/1.1\r\nHost: front.test\r\nX-Request-Id: %s\r\n\r\n", id); err != nil {
			t.Fatal(err)
		}
		// The status line as sent, then the rest.
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(io.MultiReader(strings.NewReader(line), br)), &http.Request{Method: "GET"})
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		return resp, strings.TrimRight(line, "\r\n"), string(b)
	}

	resp, line, body := get("client-1")
	if line != "HTTP/1.1 200 OK" || body != "ok" {
		t.Errorf("first answer: %q, body %q", line, body)
	}
	if got := resp.Header.Values("X-Request-Id"); len(got) != 1 || got[0] != "client-1" {
		t.Errorf("X-Request-Id %q, want the gateway's (the client's valid one), once", got)
	}
	if got := resp.Header.Values("Set-Cookie"); len(got) != 2 || got[0] != "a=1" || got[1] != "b=2" {
		t.Errorf("Set-Cookie %q", got)
	}
	if resp.Header.Get("Server") != "up/1" || resp.Header.Get("X-Kept") != "yes" {
		t.Errorf("Server %q X-Kept %q", resp.Header.Get("Server"), resp.Header.Get("X-Kept"))
	}
	if v, ok := resp.Header["Keep-Alive"]; ok {
		t.Errorf("the client got Keep-Alive: %q", v)
	}
	for _, k := range []string{"Ratelimit-Policy", "Ratelimit", "X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"} {
		if got := resp.Header.Values(k); len(got) != 1 {
			t.Errorf("%s: %q, want one", k, got)
		}
	}
	if resp.Close {
		t.Errorf("the upstream's Connection: close reached the client")
	}

	resp, line, body = get("client-2")
	if line != "HTTP/1.1 201 Created" || body != "abc" {
		t.Errorf("second answer: %q, body %q", line, body)
	}
	if resp.Header.Get("X-Second") != "yes" || resp.Header.Get("X-Request-Id") != "client-2" {
		t.Errorf("second answer's header: %v", resp.Header)
	}
	if got := resp.Header.Values("X-Ratelimit-Limit"); len(got) != 1 || got[0] != "1000" {
		t.Errorf("X-RateLimit-Limit %q", got)
	}

	// An upstream's own RateLimit field stays, beside the gateway's.
	resp, _, body = get("client-3")
	if got := resp.Header.Values("Ratelimit-Policy"); body != "z" || len(got) != 2 || !slices.Contains(got, `"app";q=5`) {
		t.Errorf("RateLimit-Policy %q (body %q), want the upstream's and the gateway's", got, body)
	}
}

// TestSmallBodyCutOff: on the fasthttp engine, a body of known length
// small enough to be read before the answer goes out (doInto) that the
// upstream cuts off is a 502, and one that stops arriving until the route's
// timeout a 504: the client gets a whole answer either way (nothing of the
// upstream's was sent), and the failures count as the upstream's (the
// route's 5xx series).
func TestSmallBodyCutOff(t *testing.T) {
	up := scriptedUpstream(t,
		"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\nonly part of it",
		"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part, then nothing<stall>",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nwhole")
	n, base, _ := MustStart(t, fmt.Sprintf(`namespace: cut
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}], timeout: 300ms}}
`, up))
	for i, want := range []int{http.StatusBadGateway, http.StatusGatewayTimeout, http.StatusOK} {
		resp, err := http.Get(base + "/x")
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("request %d: reading the answer: %v", i, err)
		}
		if resp.StatusCode != want {
			t.Errorf("request %d: status %d, want %d (body %q)", i, resp.StatusCode, want, b)
		}
		if want != http.StatusOK && !strings.Contains(resp.Header.Get("Content-Type"), "problem+json") {
			t.Errorf("request %d: Content-Type %q, want a problem", i, resp.Header.Get("Content-Type"))
		}
		if want == http.StatusOK && string(b) != "whole" {
			t.Errorf("request %d: body %q", i, b)
		}
	}
	for _, code := range []string{"502", "504", "200"} {
		if got := testutil.ToFloat64(n.metrics.Requests.WithLabelValues("all", code)); got != 1 {
			t.Errorf("sluice_requests_total{route=all,code=%s} %v, want 1", code, got)
		}
	}
}
