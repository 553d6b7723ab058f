package gateway

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"
)

// The fasthttp engine serves each HTTP/1 connection with Server.ServeConn on
// the dispatcher's goroutine for that connection, rather than through
// Server.Serve: Serve runs a worker pool whose cleaner goroutine sleeps
// (MaxIdleWorkerDuration, 10s) before it notices a stop, so it would outlive
// the node. Without Serve, fasthttp's ShutdownWithContext has nothing to
// drain, so the dispatcher drains these connections itself (drainFast): it
// tracks each one's state through the engine's ConnState hook, closes those
// that are idle (or opened and silent), lets the node answer the others
// with "Connection: close" (Node.handleFast while draining), and waits for
// every connection's goroutine.

// fastTrack is what the dispatcher knows of one connection the fasthttp
// engine serves.
type fastTrack struct {
	state atomic.Int32 // fasthttp.ConnState, StateNew until the first request
	since time.Time    // when the connection was handed to the engine
	// upgrade is set by the engine's handler (on the connection's goroutine)
	// when the request asked to switch to h2c; the connection is then
	// hijacked and served by the HTTP/2 server once the engine lets go.
	upgrade *h2cUpgrade
}

// trackedConn is a connection handed to the fasthttp engine, with its
// tracking: fastConn, or fastTLSConn for a TLS one (so that the engine
// still sees a *tls.Conn's ConnectionState).
type trackedConn interface {
	net.Conn
	track() *fastTrack
	// kick ends a wait for the next request at once (a read deadline of
	// now, applied whatever the engine deferred: see readDeadlines).
	kick(now time.Time)
	// lastRead is what the connection's last Read returned, in the
	// reader's buffer (see expectFast): valid until the next Read.
	lastRead() []byte
}

type fastConn struct {
	net.Conn
	t    fastTrack
	rd   readDeadlines
	last []byte
}

func (c *fastConn) track() *fastTrack { return &c.t }
func (c *fastConn) holdH2C(up *h2cUpgrade) bool { return c.t.holdH2C(up) }
func (c *fastConn) lastRead() []byte  { return c.last }

func (c *fastConn) Read(b []byte) (int, error) {
	if err := c.rd.arm(c.Conn); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(b)
	c.last = b[:n]
	return n, err
}
func (c *fastConn) SetReadDeadline(t time.Time) error { return c.rd.set(c.Conn, t) }
func (c *fastConn) SetDeadline(t time.Time) error     { return c.rd.setBoth(c.Conn, t) }
func (c *fastConn) kick(now time.Time)                { _ = c.Conn.SetReadDeadline(now) }

type fastTLSConn struct {
	*tls.Conn
	t    fastTrack
	rd   readDeadlines
	last []byte
	pre  []byte // read first: what an event loop read and did not serve
}

func (c *fastTLSConn) track() *fastTrack { return &c.t }
func (c *fastTLSConn) holdH2C(up *h2cUpgrade) bool { return c.t.holdH2C(up) }
func (c *fastTLSConn) lastRead() []byte  { return c.last }

func (c *fastTLSConn) Read(b []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(b, c.pre)
		c.pre = c.pre[n:]
		c.last = b[:n]
		return n, nil
	}
	if err := c.rd.arm(c.Conn); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(b)
	c.last = b[:n]
	return n, err
}
func (c *fastTLSConn) SetReadDeadline(t time.Time) error { return c.rd.set(c.Conn, t) }
func (c *fastTLSConn) SetDeadline(t time.Time) error     { return c.rd.setBoth(c.Conn, t) }
func (c *fastTLSConn) kick(now time.Time)                { _ = c.Conn.SetReadDeadline(now) }

// readDeadlines defers and coalesces the read deadlines the engine sets on
// a connection it serves. The engine sets two per keep-alive request: the
// idle bound before it waits for the request, then the header's bound
// (ReadHeaderTimeout) once the first byte is in, and each costs the
// runtime a timer update (about 700 instructions, a third of the engine's
// own work per request). A deadline only matters to a read that blocks, so
// set records it and arm, before each read, applies what was recorded
// last: the header's bound of a request whose header came whole with its
// first byte is never applied, being replaced by the next idle bound before
// the next read. And an idle bound later than the one already armed by
// less than a sixty-fourth of the time left (at most a second) is not
// applied again: a connection is closed idle for at least 63/64 of
// IdleTimeout (74 s of 75), re-armed about once a second while busy.
//
// Until the engine hands the connection over (a hijack: WebSocket, h2c,
// which SetDeadline marks, the engine clearing both deadlines first) only
// the connection's own goroutine sets read deadlines and reads, so the
// fields need no lock; after it, deadlines apply at once, as other
// goroutines read and set them. The dispatcher's drain ends an idle wait
// with kick, which applies a past deadline at once and touches nothing
// here.
type readDeadlines struct {
	pending, armed time.Time
	dirty          bool // pending is not applied
	direct         bool // handed over: deadlines apply at once
}

func (d *readDeadlines) set(c net.Conn, t time.Time) error {
	if d.direct {
		return c.SetReadDeadline(t)
	}
	d.pending, d.dirty = t, true
	return nil
}

func (d *readDeadlines) setBoth(c net.Conn, t time.Time) error {
	d.direct, d.dirty, d.armed = true, false, t
	return c.SetDeadline(t)
}

// arm applies the pending read deadline before a read, unless the armed one
// is as good (see readDeadlines).
func (d *readDeadlines) arm(c net.Conn) error {
	if !d.dirty {
		return nil
	}
	d.dirty = false
	t := d.pending
	if !t.IsZero() && !d.armed.IsZero() {
		if ahead := t.Sub(d.armed); ahead == 0 || ahead > 0 && ahead < min(time.Second, time.Until(t)/64) {
			return nil
		}
	}
	d.armed = t
	return c.SetReadDeadline(t)
}

func newTrackedConn(c net.Conn, now time.Time) trackedConn {
	if tc, ok := c.(*tls.Conn); ok {
		return newTrackedTLS(tc, nil, now)
	}
	fc := &fastConn{Conn: c}
	fc.t.since = now
	return fc
}

// newTrackedTLS is newTrackedConn's for a TLS connection, with pre to be
// read first.
func newTrackedTLS(tc *tls.Conn, pre []byte, now time.Time) trackedConn {
	fc := &fastTLSConn{Conn: tc, pre: pre}
	fc.t.since = now
	return fc
}

// trackOf returns c's tracking, or nil for a connection the dispatcher did
// not hand over (a test serving the engine directly).
// holdH2C takes an h2c upgrade for the dispatcher, after fasthttp's
// hijack.
func (t *fastTrack) holdH2C(up *h2cUpgrade) bool {
	t.upgrade = up
	return false
}

func trackOf(c net.Conn) *fastTrack {
	if tc, ok := c.(trackedConn); ok {
		return tc.track()
	}
	return nil
}

// fastState is the engine's ConnState hook.
func fastState(c net.Conn, s fasthttp.ConnState) {
	if t := trackOf(c); t != nil {
		t.state.Store(int32(s))
	}
}

// serveFast serves c with the fasthttp engine until the connection ends,
// then, if its last request asked for h2c (Upgrade), serves it as HTTP/2.
// It runs on c's dispatch goroutine, counted in d.fastWG.
func (d *dispatcher) serveFast(c net.Conn) {
	d.serveTracked(newTrackedConn(c, time.Now()))
}

// serveTracked is serveFast's, for the connection with its tracking.
func (d *dispatcher) serveTracked(tc trackedConn) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		tc.Close()
		return
	}
	d.fastConns[tc] = struct{}{}
	d.fastWG.Add(1)
	d.mu.Unlock()
	defer d.fastWG.Done()
	_ = d.h1fast.ServeConn(tc)
	d.mu.Lock()
	delete(d.fastConns, tc)
	d.mu.Unlock()
	t := tc.track()
	if up := t.upgrade; up != nil && fasthttp.ConnState(t.state.Load()) == fasthttp.StateHijacked {
		// The engine handed the connection (its buffered bytes included)
		// to the hijack handler, which waits for the HTTP/2 session.
		d.serveUpgraded(up)
	}
}

// serveUpgraded answers an h2c upgrade with 101 and serves the connection
// as HTTP/2, its upgrade request as stream 1, as x/net's h2c handler does.
func (d *dispatcher) serveUpgraded(up *h2cUpgrade) {
	conn := <-up.conn
	defer close(up.served)
	if _, err := conn.Write([]byte(h2cSwitching)); err != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // the upgrade request's context ends with the session
	sc := &sessionConn{Conn: conn, local: conn.LocalAddr(), remote: conn.RemoteAddr()}
	defer sc.end()
	d.h2.ServeConn(d.guarded(sc), &http2.ServeConnOpts{Context: ctx, BaseConfig: d.h2base(), Handler: d.handler,
		UpgradeRequest: up.req.WithContext(ctx), Settings: up.settings})
}

// sessionConn is a hijacked connection lent to an HTTP/2 session. The
// engine recycles the connection's wrapper as soon as the hijack handler
// returns, and x/net's server can still be writing a frame from a goroutine
// of its own after ServeConn returned: end, called before the handler
// returns, ends the calls in flight (a deadline in the past) and waits for
// them, and every call after it fails with net.ErrClosed instead of
// reaching the recycled wrapper (a nil dereference that took the process
// down).
type sessionConn struct {
	net.Conn
	local, remote net.Addr
	mu            sync.RWMutex
	ended         bool
}

func (c *sessionConn) end() {
	_ = c.Conn.SetDeadline(time.Unix(1, 0))
	c.mu.Lock()
	c.ended = true
	c.mu.Unlock()
}

func (c *sessionConn) Read(b []byte) (int, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.ended {
		return 0, net.ErrClosed
	}
	return c.Conn.Read(b)
}

func (c *sessionConn) Write(b []byte) (int, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.ended {
		return 0, net.ErrClosed
	}
	return c.Conn.Write(b)
}

func (c *sessionConn) Close() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.ended {
		return nil
	}
	return c.Conn.Close()
}

func (c *sessionConn) SetDeadline(t time.Time) error {
	return c.guard(func() error { return c.Conn.SetDeadline(t) })
}
func (c *sessionConn) SetReadDeadline(t time.Time) error {
	return c.guard(func() error { return c.Conn.SetReadDeadline(t) })
}
func (c *sessionConn) SetWriteDeadline(t time.Time) error {
	return c.guard(func() error { return c.Conn.SetWriteDeadline(t) })
}
func (c *sessionConn) LocalAddr() net.Addr  { return c.local }
func (c *sessionConn) RemoteAddr() net.Addr { return c.remote }

func (c *sessionConn) guard(f func() error) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.ended {
		return net.ErrClosed
	}
	return f()
}

// drainFast ends the fasthttp engine's connections: every pass closes the
// idle ones and those opened but silent for a second (a client dialing
// ahead), until every connection's goroutine has returned or ctx ends, when
// the remaining connections are closed. Connections in a request finish it
// and close (Node.handleFast answers with "Connection: close" once the node
// drains); hijacked ones (WebSocket, h2c) end with their session, which the
// HTTP/2 server's graceful shutdown (GOAWAY) covers for h2c.
func (d *dispatcher) drainFast(ctx context.Context) error {
	done := make(chan struct{})
	go func() { d.fastWG.Wait(); close(done) }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		d.closeFastConns(time.Now(), false)
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			d.closeFastConns(time.Now(), true)
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// closeFastConns ends the engine's idle connections and those opened but
// silent for a second, or all of them.
func (d *dispatcher) closeFastConns(now time.Time, all bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for c := range d.fastConns {
		t := c.track()
		switch s := fasthttp.ConnState(t.state.Load()); {
		case all && s != fasthttp.StateHijacked:
			c.Close()
		case s == fasthttp.StateIdle, s == fasthttp.StateNew && now.Sub(t.since) > time.Second:
			// A past read deadline ends the engine's wait for the next
			// request; it closes the connection itself.
			c.kick(now)
		}
	}
}
