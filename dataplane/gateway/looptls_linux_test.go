//go:build linux

package gateway

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/dataplane/internal/testca"
	"github.com/sluicegw/sluice/dataplane/metrics"
)

// loopTLSNode starts a node on the event-loop engine with a TLS listener
// (a leaf of a test CA for 127.0.0.1) and one route to up.
func loopTLSNode(t *testing.T, up string, extra Config) (*Node, string, *testca.CA) {
	t.Helper()
	ca := testca.New(t, "loop TLS test CA")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.Leaf(t, time.Time{}, time.Time{}, "127.0.0.1").Write(t, certFile, keyFile)
	extra.ListenTLS, extra.TLSCertFile, extra.TLSKeyFile = "127.0.0.1:0", certFile, keyFile
	n, ls := MustStartListeners(t, fmt.Sprintf(`namespace: looptls
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}
`, up), extra)
	return n, ls.TLSAddr().String(), ca
}

// loopTLSUpstream answers "METHOD URI BODY xfp=PROTO"; /big with 100 KiB
// (an answer the loop streams off itself); /sse with an event, then
// another once release is closed.
func loopTLSUpstream(t *testing.T, release <-chan struct{}) string {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/big":
			_, _ = io.WriteString(w, strings.Repeat("b", 100<<10))
		case "/sse":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: one\n\n")
			w.(http.Flusher).Flush()
			<-release
			_, _ = io.WriteString(w, "data: two\n\n")
		case "/len":
			fmt.Fprintf(w, "%d", len(b))
		default:
			fmt.Fprintf(w, "%s %s %s xfp=%s", r.Method, r.URL.RequestURI(), b, r.Header.Get("X-Forwarded-Proto"))
		}
	}))
	t.Cleanup(up.Close)
	return up.URL
}

// splitConn writes one byte at a time once split is set: TLS records
// reach the gateway in pieces.
type splitConn struct {
	net.Conn
	split atomic.Bool
}

func (c *splitConn) Write(b []byte) (int, error) {
	if !c.split.Load() {
		return c.Conn.Write(b)
	}
	for i := range b {
		if _, err := c.Conn.Write(b[i : i+1]); err != nil {
			return i, err
		}
		time.Sleep(200 * time.Microsecond)
	}
	return len(b), nil
}

// dialLoopTLS opens a TLS connection (ALPN http/1.1) to addr, its handshake
// done, over a splitConn.
func dialLoopTLS(t *testing.T, addr string, ca *testca.CA, maxVersion uint16) (*tls.Conn, *splitConn) {
	t.Helper()
	raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	_ = raw.SetDeadline(time.Now().Add(15 * time.Second))
	sc := &splitConn{Conn: raw}
	tc := tls.Client(sc, &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", NextProtos: []string{"http/1.1"},
		MaxVersion: maxVersion})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Fatalf("ALPN chose %q", p)
	}
	return tc, sc
}

// TestLoopTLSServesOnLoop: a TLS connection whose ALPN is http/1.1 is held
// and served by an event loop (sluice_evloop_connections counts it), with
// nothing handed to the fasthttp engine: requests one by one, pipelined in
// one write (so in one record), and a request whose records arrive a byte
// at a time; the upstream hears X-Forwarded-Proto: https.
func TestLoopTLSServesOnLoop(t *testing.T) {
	t.Parallel()
	n, addr, ca := loopTLSNode(t, loopTLSUpstream(t, nil), Config{})
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		tc, sc := dialLoopTLS(t, addr, ca, v)
		br := bufio.NewReader(tc)
		_, _ = io.WriteString(tc, "GET /a?x=1 HTTP/1.1\r\nHost: shop\r\n\r\n")
		if got := bodyOf(readAnswers(t, br, 1)[0]); got != "GET /a?x=1  xfp=https" {
			t.Fatalf("TLS %x: GET: %q", v, got)
		}
		if c := loopConns(t, n); c != 1 {
			t.Fatalf("TLS %x: the loops hold %d connections, want the TLS one", v, c)
		}
		_, _ = io.WriteString(tc, "GET /p1 HTTP/1.1\r\nHost: x\r\n\r\nPOST /p2 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhiGET /p3 HTTP/1.1\r\nHost: x\r\n\r\n")
		rs := readAnswers(t, br, 3)
		if got := []string{bodyOf(rs[0]), bodyOf(rs[1]), bodyOf(rs[2])}; got[0] != "GET /p1  xfp=https" ||
			got[1] != "POST /p2 hi xfp=https" || got[2] != "GET /p3  xfp=https" {
			t.Fatalf("TLS %x: pipelined: %q", v, got)
		}
		sc.split.Store(true)
		_, _ = io.WriteString(tc, "POST /drip HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789")
		sc.split.Store(false)
		if got := bodyOf(readAnswers(t, br, 1)[0]); got != "POST /drip 0123456789 xfp=https" {
			t.Fatalf("TLS %x: a request in one-byte pieces: %q", v, got)
		}
		tc.Close()
	}
	if h := handoffs(t, n); len(h) > 0 {
		t.Fatalf("handed over: %v", h)
	}
}

// TestLoopTLSCloseNotify: a connection the loop closes after an answer
// that says "Connection: close" gets a close_notify alert before the FIN
// (read below TLS: the last record is an alert).
func TestLoopTLSCloseNotify(t *testing.T) {
	t.Parallel()
	_, addr, ca := loopTLSNode(t, loopTLSUpstream(t, nil), Config{})
	// TLS 1.2: the alert's record type is in the clear (1.3 hides it).
	tc, sc := dialLoopTLS(t, addr, ca, tls.VersionTLS12)
	_, _ = io.WriteString(tc, "GET /bye HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	raw, err := io.ReadAll(sc.Conn)
	if err != nil {
		t.Fatal(err)
	}
	var types []byte
	for len(raw) >= 5 {
		types = append(types, raw[0])
		raw = raw[min(len(raw), 5+int(binary.BigEndian.Uint16(raw[3:5]))):]
	}
	if len(types) < 2 || types[0] != 23 || types[len(types)-1] != 21 || len(raw) != 0 {
		t.Fatalf("record types %v (%d bytes left): want the answer (23), then an alert (21)", types, len(raw))
	}
}

// TestLoopTLSStalledHandshake: clients that never finish (or start) their
// handshake hold no loop: with one loop, a TLS client and a cleartext one
// are served meanwhile, and the loop holds only the connection it serves.
func TestLoopTLSStalledHandshake(t *testing.T) {
	t.Parallel()
	n, addr, ca := loopTLSNode(t, loopTLSUpstream(t, nil), Config{EventLoops: 1})
	for _, first := range [][]byte{nil, {0x16, 0x03, 0x01, 0x02, 0x00, 0x01}} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_, _ = c.Write(first)
	}
	start := time.Now()
	tc, _ := dialLoopTLS(t, addr, ca, 0)
	_, _ = io.WriteString(tc, "GET /meanwhile HTTP/1.1\r\nHost: x\r\n\r\n")
	if got := bodyOf(readAnswers(t, bufio.NewReader(tc), 1)[0]); got != "GET /meanwhile  xfp=https" {
		t.Fatalf("GET: %q", got)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("served after %v", d)
	}
	if c := loopConns(t, n); c != 1 {
		t.Fatalf("the loop holds %d connections, want 1", c)
	}
}

// TestLoopTLSHandsOver: what a loop serves off itself from a TLS
// connection goes on over the same TLS session, X-Forwarded-Proto still
// https, and the connection comes back to a loop: a streamed answer with a
// request pipelined behind it, server-sent events that arrive as they are
// sent, a long upload, HTTP/1.0, and a WebSocket tunnel.
func TestLoopTLSHandsOver(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	up := loopTLSUpstream(t, release)
	ws := newSwitchingUpstream(t)
	ca := testca.New(t, "loop TLS test CA")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.Leaf(t, time.Time{}, time.Time{}, "127.0.0.1").Write(t, certFile, keyFile)
	n, ls := MustStartListeners(t, fmt.Sprintf(`namespace: looptls
routes:
  - {id: ws, match: {pathPrefix: /chat}, upstream: {targets: [{url: "http://%s"}]}}
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}
`, ws.ln.Addr(), up), Config{ListenTLS: "127.0.0.1:0", TLSCertFile: certFile, TLSKeyFile: keyFile})
	addr := ls.TLSAddr().String()

	tc, _ := dialLoopTLS(t, addr, ca, 0)
	br := bufio.NewReader(tc)
	_, _ = io.WriteString(tc, "GET /big HTTP/1.1\r\nHost: x\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\n\r\n")
	rs := readAnswers(t, br, 2)
	if got := bodyOf(rs[0]); len(got) != 100<<10 || bodyOf(rs[1]) != "GET /after  xfp=https" {
		t.Fatalf("streamed answer: %d bytes; then %q", len(got), bodyOf(rs[1]))
	}
	_, _ = io.WriteString(tc, "GET /again HTTP/1.1\r\nHost: x\r\n\r\n")
	if got := bodyOf(readAnswers(t, br, 1)[0]); got != "GET /again  xfp=https" {
		t.Fatalf("after the streamed answer: %q", got)
	}
	// The connection was back on a loop after the streamed answer, and
	// is after each request served off it: a long upload, an HTTP/1.0
	// request kept alive and a streamed answer, pipelined, are each
	// counted (only a loop counts).
	long := strings.Repeat("v", 100<<10)
	fmt.Fprintf(tc, "POST /len HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%sGET /old HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\nGET /big HTTP/1.1\r\nHost: x\r\n\r\n", len(long), long)
	rs = readAnswers(t, br, 3)
	if bodyOf(rs[0]) != fmt.Sprint(len(long)) || bodyOf(rs[1]) != "GET /old  xfp=https" || len(bodyOf(rs[2])) != 100<<10 {
		t.Fatalf("pipelined off the loop: %q, %q, %d bytes", bodyOf(rs[0]), bodyOf(rs[1]), len(bodyOf(rs[2])))
	}
	if h := handoffs(t, n); h[metrics.HandoffStream] != 2 || h[metrics.HandoffBody] != 1 || h[metrics.HandoffHTTP10] != 1 {
		t.Fatalf("served off the loop %v, want stream 2, body 1, http10 1", h)
	}

	sse, _ := dialLoopTLS(t, addr, ca, 0)
	_, _ = io.WriteString(sse, "GET /sse HTTP/1.1\r\nHost: x\r\n\r\n")
	sbr := bufio.NewReader(sse)
	resp, err := http.ReadResponse(sbr, nil)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: one\n" {
		t.Fatalf("first event %q before the second is sent: %v", line, err)
	}
	close(release)
	rest, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(rest), "data: two") {
		t.Fatalf("second event: %q", rest)
	}

	big := strings.Repeat("u", 300<<10)
	upc, _ := dialLoopTLS(t, addr, ca, 0)
	fmt.Fprintf(upc, "POST /len HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(big), big)
	if got := bodyOf(readAnswers(t, bufio.NewReader(upc), 1)[0]); got != fmt.Sprint(len(big)) {
		t.Fatalf("upload: %q", got)
	}

	old, _ := dialLoopTLS(t, addr, ca, 0)
	_, _ = io.WriteString(old, "GET /old HTTP/1.0\r\nHost: x\r\n\r\n")
	if got := bodyOf(readAnswers(t, bufio.NewReader(old), 1)[0]); got != "GET /old  xfp=https" {
		t.Fatalf("HTTP/1.0: %q", got)
	}

	wsc, _ := dialLoopTLS(t, addr, ca, 0)
	_, _ = io.WriteString(wsc, "GET /chat HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
	wbr := bufio.NewReader(wsc)
	sw, err := http.ReadResponse(wbr, nil)
	if err != nil || sw.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", sw, err)
	}
	for _, msg := range []string{"hello\n", "again\n"} {
		_, _ = io.WriteString(wsc, msg)
		if got, err := wbr.ReadString('\n'); got != msg {
			t.Fatalf("tunnel echoed %q (%v), want %q", got, err, msg)
		}
	}

	h := handoffs(t, n)
	for _, r := range []string{metrics.HandoffStream, metrics.HandoffBody, metrics.HandoffHTTP10, metrics.HandoffUpgrade} {
		if h[r] == 0 {
			t.Errorf("no %s hand-over counted: %v", r, h)
		}
	}
}

// TestLoopTLSDrain: a drain waits for a TLS request a loop is serving,
// whose answer says "Connection: close", and closes an idle TLS
// connection.
func TestLoopTLSDrain(t *testing.T) {
	started := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			started <- struct{}{}
			time.Sleep(300 * time.Millisecond)
		}
		_, _ = io.WriteString(w, "done")
	}))
	t.Cleanup(up.Close)
	_, secure, roots, stop := startTLS(t, fmt.Sprintf(`namespace: drain
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}
`, up.URL))
	addr := strings.TrimPrefix(secure, "https://")
	dial := func() (*tls.Conn, *bufio.Reader) {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		return c, bufio.NewReader(c)
	}
	idle, ibr := dial()
	_, _ = io.WriteString(idle, "GET /first HTTP/1.1\r\nHost: x\r\n\r\n")
	if got := bodyOf(readAnswers(t, ibr, 1)[0]); got != "done" {
		t.Fatalf("first: %q", got)
	}
	busy, bbr := dial()
	_, _ = io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-started
	if err := stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	resp := readAnswers(t, bbr, 1)[0]
	if bodyOf(resp) != "done" || !resp.Close {
		t.Fatalf("in flight: %q, close %v", bodyOf(resp), resp.Close)
	}
	if _, err := ibr.ReadByte(); err != io.EOF {
		t.Fatalf("the idle connection after the drain: %v, want EOF", err)
	}
}

// holdConn passes its first write (the ClientHello) and holds the others
// until flush: the client's Finished and its first request reach the
// gateway in one segment.
type holdConn struct {
	net.Conn
	writes int
	held   []byte
}

func (c *holdConn) Write(b []byte) (int, error) {
	if c.writes++; c.writes == 1 {
		return c.Conn.Write(b)
	}
	c.held = append(c.held, b...)
	return len(b), nil
}

func (c *holdConn) flush() error {
	_, err := c.Conn.Write(c.held)
	return err
}

// TestLoopTLSRequestWithFinished: a request that came with the client's
// Finished, read by the handshake into crypto/tls's buffer (so epoll never
// says it is there), is served once the loop takes the connection.
func TestLoopTLSRequestWithFinished(t *testing.T) {
	t.Parallel()
	_, addr, ca := loopTLSNode(t, loopTLSUpstream(t, nil), Config{})
	raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
	hc := &holdConn{Conn: raw}
	tc := tls.Client(hc, &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS13})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(tc, "GET /with-finished HTTP/1.1\r\nHost: x\r\n\r\n")
	if err := hc.flush(); err != nil {
		t.Fatal(err)
	}
	if got := bodyOf(readAnswers(t, bufio.NewReader(tc), 1)[0]); got != "GET /with-finished  xfp=https" {
		t.Fatalf("GET: %q", got)
	}
}

// TestLoopTLSBadRecord: a record that does not decrypt ends its connection
// (an alert, then the close) and nothing else on the loop.
func TestLoopTLSBadRecord(t *testing.T) {
	t.Parallel()
	n, addr, ca := loopTLSNode(t, loopTLSUpstream(t, nil), Config{EventLoops: 1})
	other, _ := dialLoopTLS(t, addr, ca, 0)
	tc, sc := dialLoopTLS(t, addr, ca, tls.VersionTLS12)
	bad := append([]byte{23, 3, 3, 0, 40}, make([]byte, 40)...) // application data that fails its tag
	if _, err := sc.Conn.Write(bad); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(tc); err == nil || !strings.Contains(err.Error(), "remote error: tls: bad record MAC") {
		t.Fatalf("after a bad record: %v, want the gateway's bad_record_mac alert", err)
	}
	_, _ = io.WriteString(other, "GET /still HTTP/1.1\r\nHost: x\r\n\r\n")
	if got := bodyOf(readAnswers(t, bufio.NewReader(other), 1)[0]); got != "GET /still  xfp=https" {
		t.Fatalf("the other connection: %q", got)
	}
	if c := loopConns(t, n); c != 1 {
		t.Fatalf("the loop holds %d connections, want 1", c)
	}
}
