package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// rssBytes is the test process's resident set size (Linux /proc).
func rssBytes(tb testing.TB) int64 {
	tb.Helper()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		tb.Skipf("no /proc/self/statm: %v", err)
	}
	f := strings.Fields(string(b))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		tb.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}

// TestH2CUpgradeBodyNotBuffered is issue 26's reproduction: a 200 MB body
// on an "Upgrade: h2c" request (Content-Length, then chunked) is not read
// whole before the switch, as x/net's h2c handler and the fasthttp engine
// read it (issue 26: RSS 66 → 476 MB): on every HTTP/1 engine it is served as HTTP/1.1,
// streamed to the upstream, and the gateway's (here the test process's)
// resident memory stays within 32 MB of its value before the upload. Not
// parallel: other tests' memory would count.
func TestH2CUpgradeBodyNotBuffered(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 1.2 GB through the gateway")
	}
	const size = 200 << 20
	var got atomic.Int64
	up := newPlainUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		got.Store(n)
		fmt.Fprintf(w, "%d", n)
	})
	rules := fmt.Sprintf(`namespace: h2cbig
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}], timeout: 60s}}
`, up)
	const ask = "Host: g.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n"
	_, base, _ := MustStart(t, rules)
	addr := strings.TrimPrefix(base, "http://")
	for _, chunked := range []bool{false, true} {
		got.Store(-1)
		idle := rssBytes(t)
		peak := atomic.Int64{}
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for {
				if r := rssBytes(t); r > peak.Load() {
					peak.Store(r)
				}
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		}()
		status, body := sendBigUpgrade(t, addr, ask, size, chunked)
		close(stop)
		<-sampled
		if status != http.StatusOK || body != strconv.Itoa(size) || got.Load() != size {
			t.Fatalf("chunked %v: status %d, body %q, upstream got %d bytes; want 200 and %d", chunked, status, body, got.Load(), size)
		}
		if grew := peak.Load() - idle; grew > 32<<20 {
			t.Errorf("chunked %v: RSS grew by %d MB during the upload (idle %d MB), want at most 32", chunked, grew>>20, idle>>20)
		} else {
			t.Logf("chunked %v: RSS grew by %.1f MB (idle %d MB)", chunked, float64(grew)/(1<<20), idle>>20)
		}
	}
}

// sendBigUpgrade sends an h2c upgrade request with a body of size zeros
// and returns the HTTP/1 answer's status and body.
func sendBigUpgrade(t *testing.T, addr, ask string, size int, chunked bool) (int, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	head := "POST /big HTTP/1.1\r\n" + ask
	if chunked {
		head += "Transfer-Encoding: chunked\r\n\r\n"
	} else {
		head += fmt.Sprintf("Content-Length: %d\r\n\r\n", size)
	}
	errc := make(chan error, 1)
	go func() {
		bw := bufio.NewWriterSize(c, 64<<10)
		_, err := bw.WriteString(head)
		chunk := make([]byte, 1<<20)
		for sent := 0; err == nil && sent < size; sent += len(chunk) {
			if chunked {
				_, err = fmt.Fprintf(bw, "%x\r\n", len(chunk))
			}
			if err == nil {
				_, err = bw.Write(chunk)
			}
			if err == nil && chunked {
				_, err = bw.WriteString("\r\n")
			}
		}
		if err == nil && chunked {
			_, err = bw.WriteString("0\r\n\r\n")
		}
		if err == nil {
			err = bw.Flush()
		}
		errc <- err
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v (sending: %v)", err, <-errc)
	}
	b, _ := io.ReadAll(resp.Body)
	if err := <-errc; err != nil {
		t.Fatalf("sending the body: %v", err)
	}
	return resp.StatusCode, string(b)
}
