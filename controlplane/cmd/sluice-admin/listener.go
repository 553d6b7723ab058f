package main

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"
)

// raiseNoFile raises the process's RLIMIT_NOFILE soft limit to its hard
// limit and returns the resulting soft limit (the old one when it cannot
// be raised).
func raiseNoFile(logger *slog.Logger) uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		logger.Warn("reading RLIMIT_NOFILE", "err", err)
		return 0
	}
	if lim.Cur < lim.Max {
		old := lim.Cur
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			logger.Warn("raising RLIMIT_NOFILE", "soft", old, "hard", lim.Max, "err", err)
			return old
		}
		logger.Info("raised the open-file limit (RLIMIT_NOFILE) to its hard limit", "from", old, "to", lim.Cur)
		return lim.Cur
	}
	logger.Info("open-file limit (RLIMIT_NOFILE)", "soft", lim.Cur, "hard", lim.Max)
	return lim.Cur
}

// maxConnsFor is the admin API's default connection cap for an open-file
// limit of nofile: half of it, between 16 and 4096, so that the embedded
// etcd, the Postgres pool and the etcd clients keep the other half.
func maxConnsFor(nofile uint64) int {
	if nofile == 0 {
		return 1024
	}
	return int(min(max(nofile/2, 16), 4096))
}

// limitListener accepts at most max connections at once: past it Accept
// waits for one to close (new connections wait in the kernel's backlog,
// holding no descriptor of ours). An accept that fails for lack of
// descriptors (EMFILE, ENFILE) or buffers is retried with a backoff (5ms,
// doubling up to 1s) rather than returned, so that the server neither
// spins nor gives up. Safe for concurrent use.
type limitListener struct {
	net.Listener
	sem    chan struct{}
	done   chan struct{}
	once   sync.Once
	logger *slog.Logger
	// sleep waits d or until the listener closes; a test may replace it.
	sleep func(d time.Duration)
}

func newLimitListener(l net.Listener, max int, logger *slog.Logger) *limitListener {
	ll := &limitListener{Listener: l, sem: make(chan struct{}, max), done: make(chan struct{}), logger: logger}
	ll.sleep = func(d time.Duration) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ll.done:
		}
	}
	return ll
}

// resourceShortage reports whether err is an accept failure for lack of
// descriptors or memory, which passes once some are freed.
func resourceShortage(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// Accept implements net.Listener.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	backoff := 5 * time.Millisecond
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
		}
		if !resourceShortage(err) {
			<-l.sem
			return nil, err
		}
		if backoff == 5*time.Millisecond {
			l.logger.Warn("admin API: out of descriptors accepting connections; backing off", "err", err, "open", len(l.sem)-1)
		}
		l.sleep(backoff)
		select {
		case <-l.done:
			<-l.sem
			return nil, net.ErrClosed
		default:
		}
		backoff = min(backoff*2, time.Second)
	}
}

// Close implements net.Listener.
func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// open returns the number of connections held.
func (l *limitListener) open() int { return len(l.sem) }

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
