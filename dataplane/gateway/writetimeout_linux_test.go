//go:build linux

package gateway

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
)

// TestWriteTimeoutWholeAnswers: on every engine, an answer forwarded whole
// (not streamed) waits for a client that takes nothing only as long as the
// route's writeTimeout, as a streamed body does (TestClientStopsTakingBody),
// not the gateway's default; on the event loop, without leaving it. The
// client pipelines many requests, with a small receive buffer, and reads
// nothing for 3s: with writeTimeout 300ms the gateway has given up on it
// by then, so fewer answers come than were asked for; with the default
// (api.DefaultWriteTimeout, 10s) all of them come.
func TestWriteTimeoutWholeAnswers(t *testing.T) {
	body := strings.Repeat("x", 12<<10) // an answer the loop keeps whole (not streamed)
	up := newPlainUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(body))) // not chunked: whole on the loop
		_, _ = io.WriteString(w, body)
	})
	// More answers than the sockets can hold: twice the largest send
	// buffer the kernel grows a socket to (tcp_wmem's maximum), and at
	// least 800 (10 MB).
	asked := max(800, 2*sendBufferMax()/len(body)+100)
	for _, tc := range []struct {
		writeTimeout string
		cut          bool
	}{
		{"300ms", true}, {"", false},
	} {
		t.Run("writeTimeout="+tc.writeTimeout, func(t *testing.T) {
			wt := ""
			if tc.writeTimeout != "" {
				wt = "writeTimeout: " + tc.writeTimeout + ", "
			}
			t.Parallel()
			n, base, _ := MustStartConfig(t, fmt.Sprintf(`namespace: wt
routes:
  - {id: api, match: {pathPrefix: /}, upstream: {%stargets: [{url: %q}]}}
`, wt, up), Config{})
			addr := strings.TrimPrefix(base, "http://")
			c, err := dialSmallReceiver("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, strings.Repeat("GET /a HTTP/1.1\r\nHost: g\r\n\r\n", asked)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * time.Second)
			got := countAnswers(c, asked, func(_ *http.Response, n int64) bool { return n == int64(len(body)) })
			t.Logf("writeTimeout %q: %d of %d answers", tc.writeTimeout, got, asked)
			if h := handoffs(t, n); len(h) != 0 {
				t.Fatalf("hand-overs %v: the answers were to stay on the loop", h)
			}
			if tc.cut && got == asked {
				t.Fatalf("all %d answers came to a client that took nothing for 3s: the route's writeTimeout (300ms) did not bound the write", asked)
			}
			if !tc.cut && got != asked {
				t.Fatalf("%d of %d answers with the default writeTimeout (10s), after 3s", got, asked)
			}
		})
	}
}

// TestWriteTimeoutOwnAnswers: the gateway's own answers (here 404s: no
// route matches) wait for a client that takes nothing no longer than
// api.DefaultWriteTimeout on every engine (net/http's server, once an
// engine, cleared the connection's write deadline for them and waited for
// ever). The client
// pipelines more 404s than the sockets hold and reads nothing for longer
// than the default: the gateway has given up by then, so fewer answers
// come than were asked for.
func TestWriteTimeoutOwnAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out api.DefaultWriteTimeout")
	}
	asked := max(20000, 2*sendBufferMax()/400+1000) // 404s of about 400 bytes
	t.Parallel()
	_, base, _ := MustStartConfig(t, `namespace: own
routes:
  - {id: api, match: {pathPrefix: /api}, upstream: {targets: [{url: "http://127.0.0.1:9"}]}}
`, Config{})
	c, err := dialSmallReceiver("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Written from a goroutine: the gateway stops reading once it
	// cannot write, and the requests are more than its buffers.
	go func() {
		_, _ = io.WriteString(c, strings.Repeat("GET /none HTTP/1.1\r\nHost: g\r\n\r\n", asked))
	}()
	// The gateway's write deadline runs from when its writes stall,
	// which on a loaded machine can be seconds after the requests
	// were sent (its send buffer grows to tcp_wmem's maximum as it
	// writes). Its socket's queues (from /proc/net/tcp: what it has
	// not read, what it has not sent) tell: once neither moves, it
	// neither reads nor writes. They must then be still for a write
	// timeout and 3 s, or the wait starts again.
	for limit := time.Now().Add(90 * time.Second); ; {
		stalledAt, q := waitPeerQueuesStill(t, c, time.Second, time.Until(limit))
		time.Sleep(time.Until(stalledAt.Add(api.DefaultWriteTimeout + 3*time.Second)))
		// Still the same, or no longer an open connection (the
		// gateway gave up): it stalled for that long.
		if now := peerQueues(t, c); now == q || !strings.HasPrefix(now, "01 ") {
			break
		}
	}
	got := countAnswers(c, asked, func(r *http.Response, _ int64) bool { return r.StatusCode == http.StatusNotFound })
	t.Logf("%d of %d answers", got, asked)
	if got == asked {
		t.Fatalf("all %d answers came to a client that took nothing for %v: the gateway's own answers had no write deadline", asked, api.DefaultWriteTimeout+3*time.Second)
	}
}

// sendBufferMax is the largest send buffer the kernel grows a TCP socket
// to (tcp_wmem's maximum), or 0 when it cannot be read.
// peerQueues is the state and the send and receive queues, as
// /proc/net/tcp shows them ("01 tx:rx" in hex; 01 is ESTABLISHED), of the
// socket at the other end of c (both on this machine), or "" when it is
// gone.
func peerQueues(t *testing.T, c net.Conn) string {
	t.Helper()
	local, remote := c.LocalAddr().(*net.TCPAddr), c.RemoteAddr().(*net.TCPAddr)
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	// The peer's socket: its local port is c's remote one, its remote c's local one.
	want := fmt.Sprintf(":%04X", remote.Port)
	peer := fmt.Sprintf(":%04X", local.Port)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasSuffix(f[1], want) && strings.HasSuffix(f[2], peer) {
			return f[3] + " " + f[4]
		}
	}
	return ""
}

// waitPeerQueuesStill waits until the queues of c's peer socket are the
// same for still, and returns when they stopped changing and what they
// are; it fails the test after limit.
func waitPeerQueuesStill(t *testing.T, c net.Conn, still, limit time.Duration) (time.Time, string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	last, since := peerQueues(t, c), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		if q := peerQueues(t, c); q != last {
			last, since = q, time.Now()
		} else if time.Since(since) >= still {
			return since, q
		}
	}
	t.Fatalf("the gateway's socket queues still moved after %v (last %s)", limit, last)
	return time.Time{}, ""
}

func sendBufferMax() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_wmem")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return 0
	}
	most, _ := strconv.Atoi(f[2])
	return most
}

// dialSmallReceiver dials addr with a 4 KiB receive buffer: a client whose
// unread answers soon back up into the gateway's socket.
func dialSmallReceiver(network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		return cmp.Or(err, serr)
	}}
	return d.Dial(network, addr)
}

// countAnswers reads up to asked answers from c (for at most 30s) and
// returns how many came whole and passed ok, given each answer and its
// body's length; it stops at the first that did not.
func countAnswers(c net.Conn, asked int, ok func(*http.Response, int64) bool) int {
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReaderSize(c, 64<<10)
	got := 0
	for ; got < asked; got++ {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			break
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || !ok(resp, n) {
			break
		}
	}
	return got
}
