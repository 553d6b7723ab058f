package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// peakRSS returns the peak resident set (VmHWM) of process pid, in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestStreamingBoundedMemory: a 1 GiB upload and a 1 GiB download through
// the gateway process are streamed, not buffered: the gateway's peak RSS
// stays under 64 MiB, and every byte arrives.
func TestStreamingBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 2 GiB")
	}
	const size = 1 << 30
	const maxRSS = 64 << 20
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/up":
			n, err := io.Copy(io.Discard, r.Body)
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			fmt.Fprint(w, n)
		case "/down":
			w.Header().Set("Content-Length", strconv.Itoa(size))
			_, _ = io.CopyN(w, zeros{}, size)
		}
	})}
	go func() { _ = up.Serve(ln) }()
	t.Cleanup(func() { up.Close() })
	g := startGateway(t, fmt.Sprintf(`namespace: stream
routes:
  - id: all
    match: {pathPrefix: /}
    upstream: {targets: [{url: "http://%s"}], timeout: 5m, bodyTimeout: 1m, writeTimeout: 1m}
limits:
  - {id: per-ip, key: [ip], algorithm: token_bucket, rate: 1000, period: 1s}
`, ln.Addr()))
	base := peakRSS(t, g.cmd.Process.Pid)
	c := &http.Client{Timeout: 5 * time.Minute}

	// Upload, chunked (no Content-Length): the body is read as it comes.
	resp, err := c.Post("http://"+g.addr+"/up", "application/octet-stream", io.LimitReader(zeros{}, size))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(got) != strconv.Itoa(size) {
		t.Fatalf("upload: %d %q, want 200 %d", resp.StatusCode, got, size)
	}
	// Download.
	resp, err = c.Get("http://" + g.addr + "/down")
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, bufio.NewReaderSize(resp.Body, 64<<10))
	resp.Body.Close()
	if err != nil || n != size {
		t.Fatalf("download: %d bytes, %v; want %d", n, err, size)
	}
	peak := peakRSS(t, g.cmd.Process.Pid)
	t.Logf("gateway peak RSS %.1f MiB (%.1f MiB before the transfers)", float64(peak)/(1<<20), float64(base)/(1<<20))
	if peak > maxRSS {
		t.Fatalf("gateway peak RSS %d MiB, want < %d MiB", peak>>20, maxRSS>>20)
	}
}

// TestServerSentEventsFlushed: each event an upstream flushes reaches the
// client before the upstream writes the next one; the upstream waits for
// the client to have read event i before it sends event i+1, so a gateway
// that buffered the stream would never deliver the first event.
func TestServerSentEventsFlushed(t *testing.T) {
	next := make(chan struct{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: event %d\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-next:
			case <-time.After(10 * time.Second):
				return
			case <-r.Context().Done():
				return
			}
		}
	})}
	go func() { _ = up.Serve(ln) }()
	t.Cleanup(func() { up.Close() })
	g := startGateway(t, fmt.Sprintf(`namespace: sse
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: "http://%s"}], timeout: 1m}}
`, ln.Addr()))
	resp, err := http.Get("http://" + g.addr + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i := range 3 {
		done := make(chan string, 1)
		go func() {
			line, _ := br.ReadString('\n')
			_, _ = br.ReadString('\n') // the blank line ending the event
			done <- line
		}()
		select {
		case line := <-done:
			if want := fmt.Sprintf("data: event %d\n", i); line != want {
				t.Fatalf("event %d: %q, want %q", i, line, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("event %d not delivered while the upstream waits: the stream is buffered", i)
		}
		if i < 2 {
			next <- struct{}{}
		}
	}
}
