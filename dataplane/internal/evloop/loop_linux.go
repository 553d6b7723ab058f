//go:build linux

package evloop

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Supported reports whether event loops are built for this system.
const Supported = true

// read and write are the system calls on a non-blocking socket: they
// never wait, so they are made without telling the scheduler (a raw
// system call), which would otherwise prepare to hand the processor to
// another thread and take it back, a cost on every read and write.
func read(fd int, b []byte) (int, error) {
	r, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

func write(fd int, b []byte) (int, error) {
	r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// ErrWouldBlock is Conn.Read's error when nothing is there to read yet: the
// handler hears again (Readable) once there is.
var ErrWouldBlock = errors.New("evloop: would block")

// ErrClosed is the error of an operation on a closed or detached
// connection, or on a stopped loop.
var ErrClosed = errors.New("evloop: connection closed")

// Handler receives a connection's events. Its methods run on the
// connection's loop goroutine, one at a time, and must not block.
type Handler interface {
	// Readable is called when the connection may have bytes to read, or
	// its peer closed or failed (Read then returns io.EOF or the error).
	Readable(c *Conn)
	// Drained is called when output Write had to queue has all been
	// written.
	Drained(c *Conn)
	// Expired is called when the connection's deadline (SetDeadline)
	// passes; the deadline is cleared first.
	Expired(c *Conn)
}

// Conn is a connection registered on a loop. Its methods must be called on
// the loop's goroutine (from a Handler, or a function given to Post).
type Conn struct {
	l    *Loop
	fd   int
	slot int32
	gen  int32 // with slot, epoll's data: an event for a slot reused since is told apart
	h    Handler

	readable bool // epoll said readable, and no read has drained it since
	hup      bool // the peer closed or the socket failed: read until it says so
	closed   bool

	out    []byte // output Write could not write yet
	outOff int

	deadline int64 // on the loop's clock (Loop.Now); 0 for none
	heapAt   int64 // when the connection's live heap entry fires; 0 for none
}

// Fd is the connection's socket.
func (c *Conn) Fd() int { return c.fd }

// Loop is the connection's loop.
func (c *Conn) Loop() *Loop { return c.l }

// SetHandler makes h receive the connection's events from now on.
func (c *Conn) SetHandler(h Handler) { c.h = h }

// Closed reports whether the connection was closed or detached.
func (c *Conn) Closed() bool { return c.closed }

// Read reads what the socket holds into b. It returns ErrWouldBlock, without
// a system call, when epoll has not reported the socket readable since a
// read last drained it; io.EOF when the peer closed its side.
func (c *Conn) Read(b []byte) (int, error) {
	if c.closed {
		return 0, ErrClosed
	}
	if !c.readable {
		return 0, ErrWouldBlock
	}
	if len(b) == 0 {
		return 0, nil
	}
	n, err := read(c.fd, b)
	switch {
	case err == unix.EAGAIN:
		c.readable = false
		return 0, ErrWouldBlock
	case err == unix.EINTR:
		return 0, ErrWouldBlock // still readable: the next Read tries again
	case err != nil:
		c.readable = false
		return 0, os.NewSyscallError("read", err)
	case n == 0:
		c.readable = false
		return 0, io.EOF
	}
	if n < len(b) && !c.hup {
		// A short read took all there was (a stream socket gives what it
		// holds, up to len(b)); more will come with a new event. After a
		// hang-up no event follows: read on until the end is seen.
		c.readable = false
	}
	return n, nil
}

// Write writes b, queueing what the socket cannot take now (Drained tells
// when the queue is written; Pending how much is queued). b may be reused
// when Write returns. An error means the connection failed: close it.
func (c *Conn) Write(b []byte) error {
	if c.closed {
		return ErrClosed
	}
	if len(c.out) > c.outOff {
		c.out = append(c.out, b...)
		return nil
	}
	for len(b) > 0 {
		n, err := write(c.fd, b)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			break
		}
		if err != nil {
			return os.NewSyscallError("write", err)
		}
		b = b[n:]
	}
	if len(b) > 0 {
		c.out = append(c.out[:0], b...)
		c.outOff = 0
	}
	return nil
}

// Pending is the number of bytes Write queued that are not written yet.
func (c *Conn) Pending() int { return len(c.out) - c.outOff }

// flush writes queued output; it reports whether the queue emptied.
func (c *Conn) flush() (bool, error) {
	for c.outOff < len(c.out) {
		n, err := write(c.fd, c.out[c.outOff:])
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			return false, nil
		}
		if err != nil {
			return false, os.NewSyscallError("write", err)
		}
		c.outOff += n
	}
	c.out, c.outOff = c.out[:0], 0
	if cap(c.out) > 64<<10 {
		c.out = nil // a burst's buffer is not kept for an idle connection
	}
	return true, nil
}

// SetDeadline sets the moment (on the loop's clock, Loop.Now) at which
// Expired is called, replacing the one set before; 0 clears it.
func (c *Conn) SetDeadline(at int64) {
	if c.closed {
		return
	}
	c.deadline = at
	if at != 0 && (c.heapAt == 0 || at < c.heapAt) {
		c.l.pushTimer(c, at)
	}
}

// Deadline returns the connection's deadline, 0 for none.
func (c *Conn) Deadline() int64 { return c.deadline }

// Close closes the connection; its handler hears nothing more. Queued
// output is dropped.
func (c *Conn) Close() error {
	if c.closed {
		return nil
	}
	c.l.forget(c)
	return unix.Close(c.fd)
}

// CloseWrite shuts down the writing side of the socket (a FIN after what
// was written), as net.TCPConn's CloseWrite.
func (c *Conn) CloseWrite() error {
	if c.closed {
		return ErrClosed
	}
	return unix.Shutdown(c.fd, unix.SHUT_WR)
}

// Detach takes the connection out of the loop and returns it as a net.Conn
// served by the runtime's poller, for a goroutine to go on with (what is
// read or queued stays with the caller: Detach fails while output is
// queued). The handler hears nothing more.
func (c *Conn) Detach() (net.Conn, error) {
	if c.closed {
		return nil, ErrClosed
	}
	if c.Pending() > 0 {
		return nil, errors.New("evloop: detaching a connection with output queued")
	}
	// Out of epoll first: the net.Conn's descriptor is a duplicate of the
	// same socket, whose events would still reach this loop.
	_ = unix.EpollCtl(c.l.ep, unix.EPOLL_CTL_DEL, c.fd, nil)
	fd := c.fd
	c.l.forget(c)
	f := os.NewFile(uintptr(fd), "evloop")
	nc, err := net.FileConn(f) // a duplicate, on the runtime's poller
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("evloop: detaching: %w", err)
	}
	return nc, nil
}

// Loop is one event loop. Create it with New and run it with Run; Post,
// Stop and Len may be called from any goroutine.
type Loop struct {
	ep  int
	efd int // eventfd: Post wakes the loop with it
	id  int

	mu     sync.Mutex
	tasks  []func()
	spare  []func()
	posted atomic.Bool // tasks is not empty
	efdSet bool        // the eventfd was written and not read since (under mu)
	yield  bool        // Yield was called this turn
	// yielding: the loop is in Yield's pause, and looks at its tasks
	// after it: Post need not wake it.
	yielding atomic.Bool
	stopped  atomic.Bool
	// away counts goroutines that report back with Post (Away, Back):
	// while there are any, the loop waits on the runtime's poller.
	away atomic.Int64
	// epf is a duplicate of ep on the runtime's poller, eprc its raw
	// access, while the loop uses it (see pollOn); epAt is the read
	// deadline set on it, on the loop's clock (0 for none); epUsed is when
	// the loop last waited on it, epTried when it last tried to register it
	// (loop clock).
	epf     *os.File
	eprc    syscall.RawConn
	epAt    int64
	epUsed  int64
	epTried int64
	done    chan struct{} // closed when Run returns
	n       atomic.Int64  // connections registered

	conns     []*Conn // by slot (epoll's data)
	free      []int32
	gen       int32
	listeners map[int]*listener
	timers    timerHeap
	base      time.Time // the loop's clock: time since base
	now       int64
	events    [256]unix.EpollEvent
}

// New returns a loop; id is the caller's name for it (Loop.ID).
func New(id int) (*Loop, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(ep)
		return nil, os.NewSyscallError("eventfd", err)
	}
	l := &Loop{ep: ep, efd: efd, id: id, listeners: map[int]*listener{}, base: time.Now(),
		done: make(chan struct{})}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: -1}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, efd, &ev); err != nil {
		unix.Close(ep)
		unix.Close(efd)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	return l, nil
}

// pollQuiet is how long the loop keeps its epoll instance on the runtime's
// poller after it last waited there. While it is registered, each event
// that makes it readable also wakes a thread the runtime has waiting on its
// poller (an idle processor's), for nothing unless the loop waits there:
// 18 % of a gateway's CPU on a shared 2-core box, where the loop's
// processor leaves the other idle. So it is registered only while
// goroutines are away (Away), and for pollQuiet after, so that a route
// that offloads its decisions now and then does not register it for each.
const pollQuiet = int64(time.Second)

// pollOn registers the loop's epoll instance with the runtime's poller, if
// it is not; false if it cannot be (the loop then waits in epoll_wait, and
// tries again after pollQuiet).
func (l *Loop) pollOn() bool {
	if l.epf != nil {
		return true
	}
	if l.epTried != 0 && l.now-l.epTried < pollQuiet {
		return false
	}
	l.epTried = l.now
	l.epf, l.eprc = pollable(l.ep)
	l.epAt = 0
	return l.epf != nil
}

// pollOff takes the loop's epoll instance off the runtime's poller once
// the loop has not waited there for pollQuiet.
func (l *Loop) pollOff() {
	if l.epf != nil && l.now-l.epUsed >= pollQuiet {
		l.epf.Close()
		l.epf, l.eprc = nil, nil
	}
}

// pollable returns a duplicate of the epoll instance ep registered with the
// runtime's poller (an epoll descriptor is readable while events are
// ready), and its raw access; nil if it cannot be registered (the loop then
// always waits in epoll_wait).
func pollable(ep int) (*os.File, syscall.RawConn) {
	fd, err := unix.FcntlInt(uintptr(ep), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, nil
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, nil
	}
	// Non-blocking, so os.NewFile registers it with the poller; only a
	// registered file takes a deadline.
	f := os.NewFile(uintptr(fd), "evloop-epoll")
	rc, err := f.SyscallConn()
	if err == nil {
		err = f.SetReadDeadline(time.Time{})
	}
	if err != nil {
		f.Close()
		return nil, nil
	}
	return f, rc
}

// ID is the loop's id, as given to New.
func (l *Loop) ID() int { return l.id }

// Now is the loop's clock, in nanoseconds: read once per turn of the loop
// (before its events are handled), monotonic.
func (l *Loop) Now() int64 { return l.now }

// Time is the wall-clock time of the loop's clock reading at (Now).
func (l *Loop) Time(at int64) time.Time { return l.base.Add(time.Duration(at)) }

// At is the loop's clock reading for t.
func (l *Loop) At(t time.Time) int64 { return int64(t.Sub(l.base)) }

// Len is the number of connections registered on the loop.
func (l *Loop) Len() int { return int(l.n.Load()) }

// Add registers the socket fd (non-blocking, owned by the loop from now on)
// with h as its handler. Call it on the loop's goroutine.
func (l *Loop) Add(fd int, h Handler) (*Conn, error) {
	if l.stopped.Load() {
		return nil, ErrClosed
	}
	l.gen++
	c := &Conn{l: l, fd: fd, h: h, gen: l.gen}
	if n := len(l.free); n > 0 {
		c.slot = l.free[n-1]
		l.free = l.free[:n-1]
		l.conns[c.slot] = c
	} else {
		c.slot = int32(len(l.conns))
		l.conns = append(l.conns, c)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET, Fd: c.slot, Pad: c.gen}
	if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		l.conns[c.slot] = nil
		l.free = append(l.free, c.slot)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	l.n.Add(1)
	return c, nil
}

// forget removes c from the loop (closed or detached).
func (l *Loop) forget(c *Conn) {
	c.closed = true
	c.deadline = 0
	c.out, c.outOff = nil, 0
	l.conns[c.slot] = nil
	l.free = append(l.free, c.slot)
	l.n.Add(-1)
}

// Listen has the loop accept connections from the listening socket fd
// (non-blocking; the caller keeps owning it): each is handed to accept,
// on the loop's goroutine, which registers it (Add) or closes it. Several
// loops may listen on one socket: each connection goes to one of them.
// When accepting fails for want of resources (EMFILE, ENFILE: out of file
// descriptors; ENOBUFS, ENOMEM), the loop stops watching fd and tries again
// after a pause that doubles from 5 ms up to a second (net/http's
// backoff), since the socket stays readable and would wake it at once
// again; a connection accepted resets the pause. Call it on the loop's
// goroutine.
func (l *Loop) Listen(fd int, accept func(fd int, sa unix.Sockaddr)) error {
	if err := l.watchListener(fd); err != nil {
		return err
	}
	l.listeners[fd] = &listener{accept: accept}
	return nil
}

// listener is a listening socket a loop accepts from.
type listener struct {
	accept func(fd int, sa unix.Sockaddr)
	pause  time.Duration // the last backoff; 0 after an accept
	paused bool          // out of epoll until the pause ends
}

// watchListener adds the listening socket fd to the loop's epoll.
func (l *Loop) watchListener(fd int) error {
	// Data: -2, then the listening socket (connections: slot and
	// generation; the eventfd: -1).
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLEXCLUSIVE, Fd: -2, Pad: int32(fd)}
	if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}

// Unlisten stops accepting from fd. Call it on the loop's goroutine.
func (l *Loop) Unlisten(fd int) {
	if ln, ok := l.listeners[fd]; ok {
		if !ln.paused {
			_ = unix.EpollCtl(l.ep, unix.EPOLL_CTL_DEL, fd, nil)
		}
		delete(l.listeners, fd)
	}
}

// backOff stops watching the listening socket fd for a pause (see Listen)
// and watches it again after it, unless it was unlistened meanwhile.
func (l *Loop) backOff(fd int, ln *listener) {
	ln.pause = min(max(2*ln.pause, 5*time.Millisecond), time.Second)
	ln.paused = true
	_ = unix.EpollCtl(l.ep, unix.EPOLL_CTL_DEL, fd, nil)
	time.AfterFunc(ln.pause, func() {
		l.Post(func() {
			if l.listeners[fd] != ln || l.stopped.Load() {
				return
			}
			ln.paused = false
			if err := l.watchListener(fd); err != nil {
				l.backOff(fd, ln) // try again later
			}
		})
	})
}

// Post runs f on the loop's goroutine, soon, in the order posted. It
// reports whether f will run: true, unless the loop has ended (then f is
// dropped, and the caller may clean up after it itself). A task posted
// after Stop and accepted still runs, once, as the loop ends (on its way
// out, with the loop's connections closed).
func (l *Loop) Post(f func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.efd < 0 {
		return false // the loop has ended
	}
	l.tasks = append(l.tasks, f)
	// The loop sets yielding before its pause and clears it before it
	// looks at posted: a Post that saw it set is seen after the pause.
	if !l.posted.Swap(true) && !l.yielding.Load() {
		// Under the lock: shut closes the eventfd under it too, so the
		// number is never written after it could name another file.
		one := [8]byte{1}
		_, _ = unix.Write(l.efd, one[:])
		l.efdSet = true
	}
	return true
}

// Call runs f on the loop's goroutine and waits for it; it returns
// ErrClosed, without waiting, if the loop has ended (or ends first).
func (l *Loop) Call(f func()) error {
	ran := make(chan struct{})
	if !l.Post(func() { f(); close(ran) }) {
		return ErrClosed
	}
	select {
	case <-ran:
		return nil
	case <-l.done:
		select {
		case <-ran: // the loop ran it on its way out
			return nil
		default:
			return ErrClosed
		}
	}
}

// Yield has the loop let the runtime run other goroutines before it next
// waits for events: goroutines a handler started (go) then run at once, on
// the loop's processor and thread, where they would otherwise wait for the
// runtime to take the processor from the loop blocked in epoll_wait (a
// tick of its monitor, 20 µs to 10 ms) or to wake another thread for
// them, when every processor runs a loop. Call it on the loop's goroutine.
func (l *Loop) Yield() { l.yield = true }

// Away tells the loop that a goroutine will report back to it with Post;
// Back, from that goroutine after its Post, that it has. While goroutines
// are away the loop waits for its events on the runtime's poller (its
// goroutine parks, and the runtime's wait for sockets, Redis replies among
// them, wakes it too) instead of in epoll_wait: the goroutines' sockets and
// the loop's are then watched in one wait, on one thread, rather than the
// loop's thread holding a processor in a system call while a reply that
// arrives must wait for another thread. Both may be called from any
// goroutine.
func (l *Loop) Away() { l.away.Add(1) }

// Back undoes an Away.
func (l *Loop) Back() { l.away.Add(-1) }

// Done is closed when Run returns.
func (l *Loop) Done() <-chan struct{} { return l.done }

// Stop ends Run after the loop's current turn. Connections still
// registered are closed.
func (l *Loop) Stop() {
	l.stopped.Store(true)
	l.Post(func() {})
}

// Run runs the loop until Stop, on the calling goroutine, then closes the
// loop's connections and epoll instance. It returns an error only if
// epoll fails.
func (l *Loop) Run() error {
	defer close(l.done)
	defer l.shut()
	for !l.stopped.Load() {
		if l.yield {
			l.yield = false
			l.yielding.Store(true)
			runtime.Gosched()
			l.yielding.Store(false)
			if l.posted.Load() {
				// What the goroutines reported meanwhile (Post did not
				// wake the loop for it), then the turn starts again: a
				// Stop among it is seen before the loop waits.
				l.runTasks()
				continue
			}
		}
		wait := l.nextWait()
		var n int
		var err error
		if wait != 0 && l.away.Load() > 0 && l.pollOn() {
			l.epUsed = l.now
			n, err = l.pollWait(wait)
		} else {
			l.pollOff()
			n, err = unix.EpollWait(l.ep, l.events[:], wait)
		}
		l.now = int64(time.Since(l.base))
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return os.NewSyscallError("epoll_wait", err)
		}
		for i := 0; i < n; i++ {
			ev := &l.events[i]
			switch {
			case ev.Fd >= 0:
				l.dispatch(ev)
			case ev.Fd == -1:
				l.runTasks()
			default:
				l.accept(int(ev.Pad))
			}
		}
		if l.posted.Load() {
			l.runTasks()
		}
		l.runTimers()
	}
	return nil
}

// pollWait waits for events on the runtime's poller (see Away), up to wait
// milliseconds (-1: no bound): it parks the loop's goroutine until the
// epoll descriptor is readable or the earliest deadline passes, then takes
// the events without waiting.
func (l *Loop) pollWait(wait int) (int, error) {
	at := int64(0)
	if wait > 0 {
		at = l.timers[0].at
	}
	if at != l.epAt {
		var t time.Time
		if at != 0 {
			t = l.Time(at)
		}
		if err := l.epf.SetReadDeadline(t); err != nil {
			return 0, err
		}
		l.epAt = at
	}
	var n int
	var werr error
	err := l.eprc.Read(func(uintptr) bool {
		n, werr = unix.EpollWait(l.ep, l.events[:], 0)
		if werr == unix.EINTR {
			n, werr = 0, nil
			return true
		}
		return n > 0 || werr != nil
	})
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The file's deadline stays passed: set it again next time.
		l.epAt = -1
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return n, werr
}

func (l *Loop) dispatch(ev *unix.EpollEvent) {
	slot := int(ev.Fd)
	if slot >= len(l.conns) {
		return
	}
	c := l.conns[slot]
	if c == nil || c.gen != ev.Pad {
		return // closed by an earlier event of this turn (and the slot reused)
	}
	e := ev.Events
	if e&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		c.hup = true
	}
	if e&unix.EPOLLOUT != 0 && c.Pending() > 0 {
		done, err := c.flush()
		if err != nil {
			// The handler finds out when it reads (the socket failed).
			c.out, c.outOff = c.out[:0], 0
			c.readable, c.hup = true, true
			c.h.Readable(c)
			return
		}
		if done {
			c.h.Drained(c)
			if c.closed {
				return
			}
		}
	}
	if e&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		c.readable = true
		c.h.Readable(c)
	}
}

func (l *Loop) accept(lfd int) {
	ln := l.listeners[lfd]
	if ln == nil || ln.paused {
		return
	}
	// A few per turn, so that one loop does not take a burst alone while
	// the others sleep (the socket is level-triggered: what is left wakes
	// a loop again).
	for i := 0; i < 16; i++ {
		fd, sa, err := unix.Accept4(lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		switch err {
		case nil:
			ln.pause = 0
			ln.accept(fd, sa)
			continue
		case unix.EINTR, unix.ECONNABORTED:
			continue // that connection is gone; others may wait
		case unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM:
			// The connection stays queued and the socket readable:
			// without a pause the loop would wake for it again at once,
			// and spin.
			l.backOff(lfd, ln)
		}
		return // EAGAIN: none left
	}
}

func (l *Loop) runTasks() {
	l.mu.Lock()
	if l.efdSet && l.efd >= 0 { // closed once the loop ends (shut)
		var b [8]byte
		_, _ = unix.Read(l.efd, b[:])
		l.efdSet = false
	}
	tasks := l.tasks
	l.tasks = l.spare[:0]
	l.posted.Store(false)
	l.mu.Unlock()
	for i, f := range tasks {
		f()
		tasks[i] = nil
	}
	l.spare = tasks[:0]
}

// nextWait is epoll_wait's timeout: until the earliest deadline, in
// milliseconds rounded up, or -1 for none.
func (l *Loop) nextWait() int {
	if len(l.timers) == 0 {
		return -1
	}
	d := l.timers[0].at - int64(time.Since(l.base))
	if d <= 0 {
		return 0
	}
	return int((d + int64(time.Millisecond) - 1) / int64(time.Millisecond))
}

func (l *Loop) pushTimer(c *Conn, at int64) {
	c.heapAt = at
	l.timers.push(timerEntry{at: at, c: c})
}

func (l *Loop) runTimers() {
	for len(l.timers) > 0 && l.timers[0].at <= l.now {
		t := l.timers.pop()
		c := t.c
		if c.closed || t.at != c.heapAt {
			continue // stale: the connection's live entry is another
		}
		c.heapAt = 0
		switch {
		case c.deadline == 0:
		case c.deadline > l.now:
			l.pushTimer(c, c.deadline) // moved later since the entry was made
		default:
			c.deadline = 0
			c.h.Expired(c)
		}
	}
}

// shut closes what the loop still holds.
func (l *Loop) shut() {
	for _, c := range l.conns {
		if c != nil {
			_ = c.Close()
		}
	}
	for fd := range l.listeners {
		l.Unlisten(fd)
	}
	l.timers = nil
	// Tasks posted meanwhile run once, on a stopped loop: a dial's
	// registration fails and closes its socket. Post accepts no more once
	// the eventfd is closed, under the lock, so every task it accepted is
	// among these.
	l.mu.Lock()
	unix.Close(l.efd)
	l.efd = -1
	l.mu.Unlock()
	l.runTasks()
	if l.epf != nil {
		l.epf.Close()
	}
	unix.Close(l.ep)
}

type timerEntry struct {
	at int64
	c  *Conn
}

// timerHeap is a min-heap of deadlines (the earliest first).
type timerHeap []timerEntry

func (h *timerHeap) push(t timerEntry) {
	*h = append(*h, t)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if a[p].at <= a[i].at {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *timerHeap) pop() timerEntry {
	a := *h
	t := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a[n] = timerEntry{}
	a = a[:n]
	for i := 0; ; {
		m, l, r := i, 2*i+1, 2*i+2
		if l < n && a[l].at < a[m].at {
			m = l
		}
		if r < n && a[r].at < a[m].at {
			m = r
		}
		if m == i {
			break
		}
		a[m], a[i] = a[i], a[m]
		i = m
	}
	*h = a
	return t
}

// Dup returns a duplicate of the socket under c (a net.Listener or
// net.Conn of the net package), non-blocking, close-on-exec, for a loop to
// own. c keeps its own descriptor: closing c does not close the duplicate,
// though a listening socket stops accepting only once both are closed.
func Dup(c syscall.Conn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	nfd := -1
	var derr error
	err = rc.Control(func(fd uintptr) {
		nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	})
	if err == nil {
		err = derr
	}
	if err != nil {
		return -1, os.NewSyscallError("fcntl", err)
	}
	if err := unix.SetNonblock(nfd, true); err != nil {
		unix.Close(nfd)
		return -1, os.NewSyscallError("fcntl", err)
	}
	return nfd, nil
}

// Dial connects on a goroutine of its own (dial may resolve a name and
// block) and registers the connection on the loop with h as its handler,
// then calls done on the loop's goroutine with it, or with dial's error.
// done is not called if the loop stops first (the connection is closed).
func (l *Loop) Dial(dial func() (net.Conn, error), h Handler, done func(*Conn, error)) {
	go func() {
		nc, err := dial()
		fd := -1
		if err == nil {
			if sc, ok := nc.(syscall.Conn); ok {
				fd, err = Dup(sc)
			} else {
				err = fmt.Errorf("evloop: dialing: a %T has no socket to register", nc)
			}
			nc.Close()
		}
		l.Post(func() {
			if err != nil {
				done(nil, err)
				return
			}
			c, err := l.Add(fd, h)
			if err != nil {
				unix.Close(fd)
				done(nil, err)
				return
			}
			done(c, nil)
		})
	}()
}
