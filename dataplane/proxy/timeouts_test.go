package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestBodyStallOutcome: a client whose body stalls past bodyTimeout gets 408
// problem+json with Connection: close, and the Outcome blames the client
// (ClientGone, no Err), not the upstream, so breakers do not count it.
func TestBodyStallOutcome(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(up.Close)
	rt := mustCompile(t, oneRoute("r", "{pathPrefix: /}", fmt.Sprintf(`{targets: [{url: "%s"}], bodyTimeout: 300ms}`, up.URL)), false)
	outcomes := make(chan Outcome, 1)
	gw := newGateway(t, rt, outcomes)
	c, err := net.Dial("tcp", strings.TrimPrefix(gw.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(c, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !resp.Close ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") || !strings.Contains(string(body), "300ms") {
		t.Fatalf("stalled body: %d close=%v %s %s", resp.StatusCode, resp.Close, resp.Header.Get("Content-Type"), body)
	}
	o := <-outcomes
	if o.Status != http.StatusRequestTimeout || !o.ClientGone || o.Err != nil || o.Timeout {
		t.Errorf("outcome %+v, want 408, ClientGone, no Err, no upstream Timeout", o)
	}
}
