package gateway

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// deadlineCounter is a connection that counts the read deadlines applied to
// it (the engine's connection under fastConn).
type deadlineCounter struct {
	net.Conn
	reads atomic.Int32
	last  atomic.Int64 // the last read deadline, unix nanoseconds (0: none)
}

func (c *deadlineCounter) SetReadDeadline(t time.Time) error {
	c.reads.Add(1)
	if t.IsZero() {
		c.last.Store(0)
	} else {
		c.last.Store(t.UnixNano())
	}
	return c.Conn.SetReadDeadline(t)
}

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// TestReadDeadlinesDeferred: the engine's deadlines apply at the next read,
// the last one set winning; one later than the armed one by a hair is not
// applied again, one earlier is; a read that blocks past the deadline
// applied fails with a timeout, as it did when deadlines applied at once.
func TestReadDeadlinesDeferred(t *testing.T) {
	client, server := tcpPair(t)
	under := &deadlineCounter{Conn: server}
	c := &fastConn{Conn: under}
	buf := make([]byte, 16)

	// Idle bound, then the header's bound before any read: only the last
	// is applied, by the read.
	now := time.Now()
	_ = c.SetReadDeadline(now.Add(time.Minute))
	_ = c.SetReadDeadline(now.Add(10 * time.Second))
	if n := under.reads.Load(); n != 0 {
		t.Fatalf("%d deadlines applied before a read, want 0", n)
	}
	fmt.Fprint(client, "a")
	if _, err := c.Read(buf); err != nil {
		t.Fatal(err)
	}
	if n, last := under.reads.Load(), under.last.Load(); n != 1 || last != now.Add(10*time.Second).UnixNano() {
		t.Fatalf("after the read: %d applied, last %v; want 1, the header's bound", n, time.Unix(0, last))
	}

	// Keep-alive requests whose header comes whole: the header's bound is
	// set after each first byte and never applied, and the idle bound, a
	// little later each time, is applied once (it moved by far more than
	// the slack from the header's bound), then not again.
	for i := range 5 {
		_ = c.SetReadDeadline(time.Now().Add(time.Minute)) // idle
		fmt.Fprint(client, "b")
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second)) // header: never read under it
		_ = i
	}
	if n := under.reads.Load(); n != 2 {
		t.Fatalf("%d deadlines applied after five requests, want 2 (the first request's header bound, one idle bound)", n)
	}

	// An earlier deadline is applied, and a blocked read fails with a
	// timeout at it.
	_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	start := time.Now()
	_, err := c.Read(buf)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want a timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the timeout took %v", d)
	}

	// Zero clears it, at the next read.
	_ = c.SetReadDeadline(time.Time{})
	go func() { time.Sleep(100 * time.Millisecond); fmt.Fprint(client, "c") }()
	if _, err := c.Read(buf); err != nil {
		t.Fatalf("read with no deadline: %v", err)
	}
	if under.last.Load() != 0 {
		t.Fatal("the zero deadline was not applied")
	}
}

// TestReadDeadlinesHandedOver: once the engine hands the connection over
// (SetDeadline, as its hijack does), read deadlines apply at once, so that
// another goroutine's deadline ends a read blocked in this one (what x/net's
// HTTP/2 server does to an upgraded connection), and kick ends a blocked
// read whatever was deferred.
func TestReadDeadlinesHandedOver(t *testing.T) {
	client, server := tcpPair(t)
	c := &fastConn{Conn: server}
	_ = c.SetReadDeadline(time.Now().Add(time.Hour)) // deferred
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 4))
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	c.kick(time.Now())
	if err := <-done; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("kicked read: %v, want a timeout", err)
	}

	_ = c.SetDeadline(time.Time{}) // the hijack
	go func() {
		_, err := c.Read(make([]byte, 4))
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	_ = c.SetReadDeadline(time.Now()) // from another goroutine: at once
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read after the hand-over: %v, want a timeout", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a deadline set after the hand-over did not end the blocked read")
	}
	_ = client
}

// TestSlowHeaderStillBounded: fasthttp's server over fastConn (as the
// dispatcher serves it) still cuts off a client that sends its header a
// byte at a time (the header's bound, applied at its second read) and an
// idle keep-alive connection (the idle bound), while back-to-back
// keep-alive requests apply about one read deadline in all, not two each.
func TestSlowHeaderStillBounded(t *testing.T) {
	const header, idle = 300 * time.Millisecond, 600 * time.Millisecond
	s := &fasthttp.Server{
		Handler:     func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(http.StatusNotFound) },
		ReadTimeout: header, IdleTimeout: idle, Logger: quietLogger{},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	counted := make(chan *deadlineCounter, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dc := &deadlineCounter{Conn: c}
			counted <- dc
			go func() { _ = s.ServeConn(newTrackedConn(dc, time.Now())) }()
		}
	}()
	addr := ln.Addr().String()

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dc := <-counted
	br := bufio.NewReader(conn)
	const requests = 50
	for range requests {
		fmt.Fprint(conn, "GET /missing HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusNotFound {
			t.Fatalf("keep-alive request: %v, %v", resp, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if n := dc.reads.Load(); n > 5 {
		t.Fatalf("%d read deadlines applied for %d keep-alive requests, want a handful", n, requests)
	}
	// Idle: closed after about 600 ms, not before 63/64 of it.
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("an idle connection got bytes")
	}
	if d := time.Since(start); d < idle*63/64-50*time.Millisecond || d > 3*time.Second {
		t.Fatalf("idle connection closed after %v, want about %v", d, idle)
	}

	// Slow header: a byte every 50 ms, cut off by the 300 ms bound.
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	start = time.Now()
	for _, b := range []byte("GET / HTTP/1.1\r\nHost: x\r\nX-Slow: 1234567890\r\n\r\n") {
		if _, err := slow.Write([]byte{b}); err != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = slow.SetReadDeadline(time.Now().Add(3 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(slow), nil); err == nil && resp.StatusCode == http.StatusNotFound {
		t.Fatalf("a header sent a byte every 50ms for %v was served", time.Since(start))
	}
}
