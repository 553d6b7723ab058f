//go:build linux

package evloop

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// echo is a handler that writes back what it reads, and closes the
// connection when its peer does or its deadline passes.
type echo struct {
	buf     []byte
	drained int
	expired chan struct{}
}

func (e *echo) Readable(c *Conn) {
	for {
		n, err := c.Read(e.buf)
		if n > 0 {
			if werr := c.Write(e.buf[:n]); werr != nil {
				c.Close()
				return
			}
		}
		if errors.Is(err, ErrWouldBlock) {
			return
		}
		if err != nil {
			c.Close()
			return
		}
	}
}

func (e *echo) Drained(*Conn) { e.drained++ }

func (e *echo) Expired(c *Conn) {
	c.Close()
	if e.expired != nil {
		close(e.expired)
	}
}

// startLoop runs a loop that accepts from a new listener with accept,
// stopped when the test ends.
func startLoop(t *testing.T, accept func(l *Loop, fd int)) (*Loop, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	fd, err := Dup(ln.(*net.TCPListener))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	l, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Run() }()
	listening := make(chan error, 1)
	l.Post(func() {
		listening <- l.Listen(fd, func(nfd int, _ unix.Sockaddr) { accept(l, nfd) })
	})
	if err := <-listening; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.Stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return l, ln.Addr().String()
}

func TestEcho(t *testing.T) {
	_, addr := startLoop(t, func(l *Loop, fd int) {
		if _, err := l.Add(fd, &echo{buf: make([]byte, 512)}); err != nil {
			t.Error(err)
		}
	})
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		msg := bytes.Repeat([]byte("hello, loop "), 100) // more than one read's buffer
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("echo: got %q", got)
		}
		c.(*net.TCPConn).CloseWrite()
		if n, err := c.Read(got); n != 0 || err != io.EOF {
			t.Fatalf("after half-close: %d, %v; want the loop to close its side", n, err)
		}
		c.Close()
	}
}

// A peer that sends and closes at once is still read whole: the hang-up
// comes with the data, and the short-read rule must not stop the reading
// before the end.
func TestReadToEndAfterHangUp(t *testing.T) {
	got := make(chan []byte, 1)
	_, addr := startLoop(t, func(l *Loop, fd int) {
		var all []byte
		buf := make([]byte, 64)
		_, err := l.Add(fd, handlerFuncs{readable: func(c *Conn) {
			for {
				n, err := c.Read(buf)
				all = append(all, buf[:n]...)
				if errors.Is(err, ErrWouldBlock) {
					return
				}
				if err != nil {
					got <- all
					c.Close()
					return
				}
			}
		}})
		if err != nil {
			t.Error(err)
		}
	})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	msg := bytes.Repeat([]byte{'x'}, 1000)
	c.Write(msg)
	c.Close()
	select {
	case b := <-got:
		if len(b) != len(msg) {
			t.Fatalf("read %d bytes, want %d", len(b), len(msg))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the end of the stream was not seen")
	}
}

// Output the socket cannot take is queued, written as the peer reads, and
// Drained is called once it is all out.
func TestWriteQueuesAndDrains(t *testing.T) {
	const size = 64 << 20
	drained, queued := make(chan int, 1), make(chan int, 1)
	_, addr := startLoop(t, func(l *Loop, fd int) {
		c, err := l.Add(fd, handlerFuncs{drained: func(c *Conn) { drained <- c.Pending() }})
		if err != nil {
			t.Error(err)
			return
		}
		if err := c.Write(bytes.Repeat([]byte{'y'}, size)); err != nil {
			t.Error(err)
		}
		queued <- c.Pending()
	})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if p := <-queued; p == 0 {
		t.Fatal("64 MiB went out in one write: the test does not test queueing")
	}
	n, err := io.Copy(io.Discard, io.LimitReader(c, size))
	if err != nil || n != size {
		t.Fatalf("read %d bytes (%v), want %d", n, err, size)
	}
	select {
	case p := <-drained:
		if p != 0 {
			t.Fatalf("Drained with %d bytes pending", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Drained was not called")
	}
}

// Deadlines fire in order; moving one later postpones it, clearing it
// cancels it, and moving it earlier brings it forward.
func TestDeadlines(t *testing.T) {
	l, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Run() }()
	defer func() { l.Stop(); <-done }()
	var mu sync.Mutex
	var fired []string
	expired := make(chan struct{}, 8)
	mk := func(name string) Handler {
		return handlerFuncs{expired: func(c *Conn) {
			mu.Lock()
			fired = append(fired, name)
			mu.Unlock()
			expired <- struct{}{}
		}}
	}
	pair := func() int {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fds[1]) })
		return fds[0]
	}
	fa, fb, fc, fd := pair(), pair(), pair(), pair()
	l.Post(func() {
		ms := func(n int) int64 { return l.Now() + int64(n)*int64(time.Millisecond) }
		a, _ := l.Add(fa, mk("a"))
		b, _ := l.Add(fb, mk("b"))
		c, _ := l.Add(fc, mk("c"))
		d, _ := l.Add(fd, mk("d"))
		a.SetDeadline(ms(60))
		b.SetDeadline(ms(20))
		b.SetDeadline(ms(100)) // later: fires after a
		c.SetDeadline(ms(30))
		c.SetDeadline(0) // cleared: never fires
		d.SetDeadline(ms(500))
		d.SetDeadline(ms(10)) // earlier: fires first
	})
	for i := 0; i < 3; i++ {
		select {
		case <-expired:
		case <-time.After(5 * time.Second):
			t.Fatalf("only %v fired", fired)
		}
	}
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"d", "a", "b"}; len(fired) != 3 || fired[0] != want[0] || fired[1] != want[1] || fired[2] != want[2] {
		t.Fatalf("fired %v, want %v", fired, want)
	}
}

// Detach hands a connection, and what the peer sends next, to a goroutine
// on the runtime's poller.
func TestDetach(t *testing.T) {
	detached := make(chan net.Conn, 1)
	_, addr := startLoop(t, func(l *Loop, fd int) {
		buf := make([]byte, 16)
		_, err := l.Add(fd, handlerFuncs{readable: func(c *Conn) {
			n, err := c.Read(buf)
			if err != nil || string(buf[:n]) != "first" {
				t.Errorf("read %q, %v", buf[:n], err)
			}
			nc, err := c.Detach()
			if err != nil {
				t.Error(err)
				return
			}
			detached <- nc
		}})
		if err != nil {
			t.Error(err)
		}
	})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("first"))
	nc := <-detached
	defer nc.Close()
	c.Write([]byte("second"))
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 16)
	n, err := nc.Read(buf)
	if err != nil || string(buf[:n]) != "second" {
		t.Fatalf("the detached connection read %q, %v", buf[:n], err)
	}
	nc.Write([]byte("back"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err = c.Read(buf)
	if err != nil || string(buf[:n]) != "back" {
		t.Fatalf("the peer read %q, %v", buf[:n], err)
	}
}

// Dial connects off the loop and registers the connection on it.
func TestDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte("hi"))
			c.Close()
		}
	}()
	l, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Run() }()
	defer func() { l.Stop(); <-done }()
	got := make(chan string, 1)
	buf := make([]byte, 8)
	h := handlerFuncs{readable: func(c *Conn) {
		n, err := c.Read(buf)
		if n > 0 {
			got <- string(buf[:n])
		}
		if err != nil && !errors.Is(err, ErrWouldBlock) {
			c.Close()
		}
	}}
	l.Post(func() {
		l.Dial(func() (net.Conn, error) { return net.Dial("tcp", ln.Addr().String()) }, h, func(c *Conn, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	})
	select {
	case s := <-got:
		if s != "hi" {
			t.Fatalf("read %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("nothing read")
	}
	// A dial that fails reports its error.
	failed := make(chan error, 1)
	l.Post(func() {
		l.Dial(func() (net.Conn, error) { return nil, syscall.ECONNREFUSED }, h, func(c *Conn, err error) { failed <- err })
	})
	if err := <-failed; !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("failed dial: %v", err)
	}
}

// A read that would block makes no system call until epoll says the
// socket is readable again.
func TestNoReadWithoutEvent(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[1])
	l, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.Add(fds[0], handlerFuncs{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.readable = true
	unix.Write(fds[1], []byte("abc"))
	buf := make([]byte, 16)
	if n, err := c.Read(buf); n != 3 || err != nil {
		t.Fatalf("read %d, %v", n, err)
	}
	if c.readable {
		t.Fatal("a short read left the socket marked readable")
	}
	unix.Write(fds[1], []byte("def")) // no loop turn: nobody told the conn
	if _, err := c.Read(buf); !errors.Is(err, ErrWouldBlock) {
		t.Fatalf("read without an event: %v, want ErrWouldBlock", err)
	}
}

type handlerFuncs struct {
	readable, drained, expired func(*Conn)
}

func (h handlerFuncs) Readable(c *Conn) {
	if h.readable != nil {
		h.readable(c)
	}
}
func (h handlerFuncs) Drained(c *Conn) {
	if h.drained != nil {
		h.drained(c)
	}
}
func (h handlerFuncs) Expired(c *Conn) {
	if h.expired != nil {
		h.expired(c)
	}
}

// Call runs a function on the loop and waits; on a loop that has ended it
// returns ErrClosed, and Post does nothing.
func TestCallAndStop(t *testing.T) {
	l, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Run() }()
	ran := false
	if err := l.Call(func() { ran = true }); err != nil || !ran {
		t.Fatalf("Call: %v, ran %v", err, ran)
	}
	l.Stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	if err := l.Call(func() { t.Error("ran on an ended loop") }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Call on an ended loop: %v", err)
	}
	l.Post(func() { t.Error("ran on an ended loop") })
}
