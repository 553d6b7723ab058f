package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// countingListener counts the connections it accepted.
type countingListener struct {
	net.Listener
	n atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// leanUpstream serves h on a counting listener, over HTTP/1.1 or h2c (prior
// knowledge); it returns the target URL and the listener.
func leanUpstream(tb testing.TB, h2c bool, h http.Handler) (string, *countingListener) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	srv := &http.Server{Handler: h}
	scheme := "http"
	if h2c {
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetUnencryptedHTTP2(true)
		scheme = "h2c"
	}
	go func() { _ = srv.Serve(cl) }()
	tb.Cleanup(func() { srv.Close() })
	return scheme + "://" + ln.Addr().String(), cl
}

// h2cConns dials n HTTP/2 connections (prior knowledge) to the node at
// base, each a ClientConn of its own, so that the streams sent on them are
// spread over exactly n connections.
func h2cConns(tb testing.TB, base string, n int) []*http2.ClientConn {
	tb.Helper()
	tr := &http2.Transport{AllowHTTP: true}
	addr := strings.TrimPrefix(base, "http://")
	ccs := make([]*http2.ClientConn, n)
	for i := range ccs {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			tb.Fatal(err)
		}
		cc, err := tr.NewClientConn(c)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = cc.Close() })
		ccs[i] = cc
	}
	return ccs
}

// TestH2ThousandStreams: 1,000 concurrent HTTP/2 streams across 10 client
// connections, to an HTTP/1.1 target and to an h2c one, are each answered
// with their own answer; the upstream connections stay bounded: for the
// h2c target a few multiplexed ones (the target allows 250 streams on
// each), never one per stream, and for the HTTP/1.1 target no more than
// the streams in flight (pooled connections).
func TestH2ThousandStreams(t *testing.T) {
	const conns, perConn = 10, 100
	for _, tc := range []struct {
		name     string
		h2c      bool
		maxConns int64
	}{{"http1 target", false, conns * perConn}, {"h2c target", true, 16}} {
		t.Run(tc.name, func(t *testing.T) {
			var inflight, most atomic.Int64
			url, ln := leanUpstream(t, tc.h2c, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := inflight.Add(1)
				defer inflight.Add(-1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(50 * time.Millisecond) // hold the streams open together
				fmt.Fprintf(w, "answer to %s via %s", r.URL.Path, r.Header.Get("Via"))
			}))
			_, base, _ := MustStart(t, fmt.Sprintf(`namespace: lean
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}
`, url))
			ccs := h2cConns(t, base, conns)
			var wg sync.WaitGroup
			var bad atomic.Int64
			for i := range conns * perConn {
				wg.Add(1)
				go func() {
					defer wg.Done()
					path := fmt.Sprintf("/s/%d", i)
					req, _ := http.NewRequest("GET", base+path, nil)
					resp, err := ccs[i%conns].RoundTrip(req)
					if err != nil {
						bad.Add(1)
						t.Errorf("stream %d: %v", i, err)
						return
					}
					b, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if want := "answer to " + path + " via 2 sluice-"; err != nil || resp.StatusCode != 200 || !strings.HasPrefix(string(b), want) {
						bad.Add(1)
						t.Errorf("stream %d: %d %q (%v), want 200 %q...", i, resp.StatusCode, b, err, want)
					}
				}()
			}
			wg.Wait()
			if bad.Load() > 0 {
				t.Fatalf("%d of %d streams failed", bad.Load(), conns*perConn)
			}
			t.Logf("upstream connections: %d; most requests in flight at the upstream: %d", ln.n.Load(), most.Load())
			if n := ln.n.Load(); n > tc.maxConns || n < 1 {
				t.Errorf("upstream connections: %d, want 1..%d", n, tc.maxConns)
			}
		})
	}
}

// TestH2StreamsReusePooledConns: HTTP/2 streams forwarded to an HTTP/1.1
// target go through the upstream connection pool the HTTP/1.1 engines use:
// 200 streams, four at a time, reach the target over at most four
// connections (one per stream would be 200).
func TestH2StreamsReusePooledConns(t *testing.T) {
	url, ln := leanUpstream(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.URL.Path)
	}))
	_, base, _ := MustStart(t, fmt.Sprintf(`namespace: lean
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}
`, url))
	cc := h2cConns(t, base, 1)[0]
	const workers, each = 4, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				path := fmt.Sprintf("/w%d/%d", w, i)
				req, _ := http.NewRequest("GET", base+path, nil)
				resp, err := cc.RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(b) != path || resp.ProtoMajor != 2 {
					t.Errorf("%s: %s %d %q", path, resp.Proto, resp.StatusCode, b)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := ln.n.Load(); n > workers {
		t.Errorf("upstream connections for %d streams, %d at a time: %d, want at most %d (pooled)", workers*each, workers, n, workers)
	}
}

// TestH2CancelReachesUpstream: a client that cancels its HTTP/2 stream
// (RST_STREAM) cancels the upstream request, to an HTTP/1.1 target (its
// connection closed) and to an h2c one (its stream reset): while the
// gateway waits for the answer's header, and while it relays a streamed
// body (whose first part reaches the client before the cancel, unbuffered).
func TestH2CancelReachesUpstream(t *testing.T) {
	for _, h2c := range []bool{false, true} {
		for _, streaming := range []bool{false, true} {
			name := fmt.Sprintf("h2c=%v streaming=%v", h2c, streaming)
			t.Run(name, func(t *testing.T) {
				got, cancelled := make(chan struct{}), make(chan struct{})
				url, _ := leanUpstream(t, h2c, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if streaming {
						w.Header().Set("Content-Type", "application/octet-stream")
						_, _ = io.WriteString(w, "first part")
						http.NewResponseController(w).Flush()
					}
					close(got)
					select {
					case <-r.Context().Done():
						close(cancelled)
					case <-time.After(10 * time.Second):
					}
				}))
				_, base, _ := MustStart(t, fmt.Sprintf(`namespace: lean
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}], timeout: 30s}}
`, url))
				cc := h2cConns(t, base, 1)[0]
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, "GET", base+"/hold", nil)
				done := make(chan error, 1)
				go func() {
					resp, err := cc.RoundTrip(req)
					if err == nil && streaming {
						b := make([]byte, len("first part"))
						_, err = io.ReadFull(resp.Body, b)
						if err == nil && string(b) != "first part" {
							err = fmt.Errorf("first part: %q", b)
						}
						if err == nil {
							err = errFirstPart
						}
					}
					done <- err
				}()
				select {
				case <-got:
				case <-time.After(5 * time.Second):
					t.Fatal("the request never reached the upstream")
				}
				if streaming {
					select {
					case err := <-done:
						if err != errFirstPart {
							t.Fatalf("reading the first part: %v", err)
						}
					case <-time.After(5 * time.Second):
						t.Fatal("the first part of the streamed body never reached the client")
					}
				}
				cancel()
				select {
				case <-cancelled:
				case <-time.After(5 * time.Second):
					t.Fatal("the client's cancel never reached the upstream")
				}
			})
		}
	}
}

var errFirstPart = fmt.Errorf("first part read")

// TestH2FlushesBatched: an answer of known length that the upstream sends
// in three parts (50 ms apart) reaches an HTTP/2 client in one DATA frame,
// with END_STREAM, at its end (no flush per part); the same answer
// without a length (a stream) comes in a frame per part, as it arrives
// (at least two: a gateway descheduled past 50 ms reads two parts at once).
func TestH2FlushesBatched(t *testing.T) {
	url, _ := leanUpstream(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/known" {
			w.Header().Set("Content-Length", "30")
		}
		for range 3 {
			_, _ = io.WriteString(w, "0123456789")
			http.NewResponseController(w).Flush()
			time.Sleep(50 * time.Millisecond)
		}
	}))
	_, base, _ := MustStart(t, fmt.Sprintf(`namespace: lean
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}
`, url))
	for _, tc := range []struct {
		path      string
		minFrames int
		maxFrames int
	}{{"/known", 1, 1}, {"/stream", 2, 3}} {
		c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		frames, body := h2DataFrames(t, c, tc.path)
		c.Close()
		if body != strings.Repeat("0123456789", 3) || frames < tc.minFrames || frames > tc.maxFrames {
			t.Errorf("%s: %q in %d DATA frames, want the 30 bytes in %d to %d", tc.path, body, frames, tc.minFrames, tc.maxFrames)
		}
	}
}

// TestH2ChunkBurstOneFlush: a chunked answer whose 50 chunks reach the
// gateway together (the upstream writes them in one write) goes to an
// HTTP/2 client in one DATA frame: the forward flushes only when its next
// read from the upstream would wait, not after every chunk.
func TestH2ChunkBurstOneFlush(t *testing.T) {
	var answer strings.Builder
	answer.WriteString("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n")
	for i := range 50 {
		fmt.Fprintf(&answer, "a\r\npart %04d\n\r\n", i)
	}
	answer.WriteString("0\r\n\r\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
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
					for { // a request without a body: its head
						line, err := br.ReadString('\n')
						if err != nil {
							return
						}
						if line == "\r\n" {
							break
						}
					}
					if _, err := io.WriteString(c, answer.String()); err != nil {
						return
					}
				}
			}()
		}
	}()
	_, base, _ := MustStart(t, fmt.Sprintf(`namespace: lean
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: "http://%s"}]}}
`, ln.Addr()))
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	frames, body := h2DataFrames(t, c, "/burst")
	if len(body) != 50*10 || !strings.HasPrefix(body, "part 0000\n") || frames != 1 {
		t.Errorf("%d bytes in %d DATA frames, want 500 in 1", len(body), frames)
	}
}

// h2DataFrames sends a GET of path on a new h2c connection c and returns
// how many DATA frames carrying data the answer came in, and its body.
func h2DataFrames(t *testing.T, c net.Conn, path string) (int, string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range h2Pseudo(c, "lean.test", path) {
		_ = enc.WriteField(f)
	}
	bw := bufio.NewWriter(c)
	fr := http2.NewFramer(bw, bufio.NewReader(c))
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	_, _ = io.WriteString(bw, http2.ClientPreface)
	_ = fr.WriteSettings()
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true})
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	frames, body := 0, ""
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
				_ = bw.Flush()
			}
		case *http2.DataFrame:
			if len(f.Data()) > 0 {
				frames++
				body += string(f.Data())
			}
			if f.StreamEnded() {
				return frames, body
			}
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				return frames, body
			}
		case *http2.GoAwayFrame, *http2.RSTStreamFrame:
			t.Fatalf("%s: %v", path, f)
		}
	}
}

// BenchmarkH2Stream measures one HTTP/2 stream through a whole node (x/net's
// HTTP/2 server over h2c, the request path, the forward) to an HTTP/1.1
// target and to an h2c one, over loopback; "direct" is the same client
// calling the h2c upstream itself. Allocations include the in-process
// client's and upstream's: subtract direct's for the gateway's own.
func BenchmarkH2Stream(b *testing.B) {
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello, world\n")
	})
	h1, _ := leanUpstream(b, false, hello)
	h2, _ := leanUpstream(b, true, hello)
	_, base, _ := MustStart(b, fmt.Sprintf(`namespace: bench
routes:
  - {id: h1, match: {pathPrefix: /h1/}, upstream: {targets: [{url: %q}]}}
  - {id: h2, match: {pathPrefix: /h2/}, upstream: {targets: [{url: %q}]}}
`, h1, h2))
	tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	b.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr}
	for _, tc := range []struct{ name, url string }{
		{"http1-target", base + "/h1/x"},
		{"h2c-target", base + "/h2/x"},
		{"direct", "http://" + strings.TrimPrefix(h2, "h2c://") + "/x"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := c.Get(tc.url)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}
