//go:build linux

package gateway

import (
	"crypto/tls"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicegw/sluice/dataplane/internal/evloop"
)

// TLS HTTP/1.1 on the event loops. crypto/tls reads and writes a net.Conn,
// and a loop's connections are not net.Conns: so each TLS connection the
// gateway accepts is a tls.Conn over a recordConn, which is the socket,
// blocking, for the handshake (on the dispatcher's goroutine, bounded as
// before: dispatcher.sniff), and once ALPN chose HTTP/1.1 (or nothing)
// becomes the loop's (loopEngine.serveTLS): the loop takes the socket out
// of Go's poller (a duplicate, as for the connections it accepts), and the
// connection is served as a cleartext one is, but that its plaintext is
// read with tls.Conn.Read and its answers written with tls.Conn.Write
// (loopClient.read, write). Under them the recordConn reads the socket
// through the loop (evloop.Conn.Read) and, when nothing is there, says so
// with errWouldBlock, a temporary net.Error: crypto/tls keeps what it read
// of a record and does not make such an error stick (readRecordOrCCS sets
// the connection's error only for one that is not Temporary), so the loop
// calls tls.Conn.Read again when epoll says more came; and it gathers the
// ciphertext tls.Conn.Write makes (one record per 16 KiB, fewer bytes while
// the connection is new) for one evloop.Conn.Write, the loop's, that
// queues what the socket cannot take.
//
// A request served off the loop (an Upgrade, a streamed answer, HTTP/1.0,
// a long body, a route the loop declines: offloop_linux.go) takes the
// tls.Conn with it, the recordConn reading and writing the socket blocking
// again (evloop.Conn.Detach's net.Conn); the connection then comes back to
// a loop (serveTLS, with the plaintext read and not served). The
// certificate, its rotation and OCSP staple are the tls.Config's. A TLS
// connection the loop closes sends its close_notify first.

// newTLSListener is the TLS listener of the gateway's own TLS address (and
// of Node.ListenTLS): tls.NewListener's, but that each connection is a
// tls.Conn over a recordConn, which the event loops can take over once its
// handshake is done.
func newTLSListener(l net.Listener, cfg *tls.Config) net.Listener {
	return &recordListener{Listener: l, cfg: cfg}
}

// recordListener is newTLSListener's listener.
type recordListener struct {
	net.Listener
	cfg *tls.Config
}

func (l *recordListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return tls.Server(&recordConn{nc: c, local: c.LocalAddr(), remote: c.RemoteAddr()}, l.cfg), nil
}

// recordConn is the connection under a TLS connection of the gateway's
// TLS listener: the socket (nc, on Go's poller) until an event loop takes
// it (lc), and again once the loop hands it over. While a loop has it, its
// methods run on the loop's goroutine only.
type recordConn struct {
	nc            net.Conn     // the socket, blocking; nil while on a loop
	lc            *evloop.Conn // the socket on its loop
	out           []byte       // ciphertext written on the loop, for the loop to send
	local, remote net.Addr
}

// errWouldBlock is a recordConn's Read on a loop when the socket has
// nothing more: temporary, so crypto/tls keeps the connection usable.
var errWouldBlock net.Error = wouldBlock{}

type wouldBlock struct{}

func (wouldBlock) Error() string   { return "tls record: would block" }
func (wouldBlock) Timeout() bool   { return true }
func (wouldBlock) Temporary() bool { return true }

func (rc *recordConn) Read(b []byte) (int, error) {
	if rc.lc == nil {
		return rc.nc.Read(b)
	}
	n, err := rc.lc.Read(b)
	if err == evloop.ErrWouldBlock {
		return 0, errWouldBlock
	}
	return n, err
}

func (rc *recordConn) Write(b []byte) (int, error) {
	if rc.lc == nil {
		return rc.nc.Write(b)
	}
	rc.out = append(rc.out, b...)
	return len(b), nil
}

// Close closes the socket, unless a loop has it (the loop closes it).
func (rc *recordConn) Close() error {
	if rc.lc == nil {
		return rc.nc.Close()
	}
	return nil
}

func (rc *recordConn) LocalAddr() net.Addr  { return rc.local }
func (rc *recordConn) RemoteAddr() net.Addr { return rc.remote }

// Deadlines are the socket's; on a loop the loop bounds the connection
// (crypto/tls sets one around a close_notify, which never waits there).
func (rc *recordConn) SetDeadline(t time.Time) error {
	if rc.lc == nil {
		return rc.nc.SetDeadline(t)
	}
	return nil
}

func (rc *recordConn) SetReadDeadline(t time.Time) error {
	if rc.lc == nil {
		return rc.nc.SetReadDeadline(t)
	}
	return nil
}

func (rc *recordConn) SetWriteDeadline(t time.Time) error {
	if rc.lc == nil {
		return rc.nc.SetWriteDeadline(t)
	}
	return nil
}

// loopTLS is what a loop's TLS client connection has beyond a cleartext
// one.
type loopTLS struct {
	tc   *tls.Conn
	rc   *recordConn
	view tlsView
}

// tlsView is a TLS connection's request context connection (ctx.Conn):
// the connView, and the TLS connection's state, by which fasthttp's IsTLS
// and TLSConnectionState know it (the forwarded X-Forwarded-Proto: https).
type tlsView struct {
	*connView
	tc *tls.Conn
}

func (v *tlsView) Handshake() error                     { return nil } // done before the loop took it
func (v *tlsView) ConnectionState() tls.ConnectionState { return v.tc.ConnectionState() }

// serveTLS moves tc, a connection of the gateway's TLS listener whose
// handshake is done and chose HTTP/1.1 (or no protocol), onto the loop
// that holds the fewest connections. It runs on the dispatcher's goroutine
// for tc; false leaves tc to the caller, blocking as it was (a connection
// of another listener, a socket that cannot be duplicated, a drain).
func (e *loopEngine) serveTLS(tc *tls.Conn, pre []byte) bool {
	rc, ok := tc.NetConn().(*recordConn)
	if !ok {
		e.foreignTLS.Do(func() {
			e.n.log.Warn("a TLS connection chose HTTP/1.1 on a listener not made by Node.ListenTLS: the event loops cannot take it over, so it is closed (HTTP/2 is served); make the listener with Node.ListenTLS")
		})
		return false
	}
	if e.draining.Load() {
		return false
	}
	sc, ok := rc.nc.(syscall.Conn)
	if !ok {
		return false
	}
	fd, err := evloop.Dup(sc)
	if err != nil {
		return false
	}
	// The loop owns the duplicate: Go's descriptor leaves its poller.
	_ = rc.nc.Close()
	rc.nc = nil
	ls := e.loops[0]
	for _, o := range e.loops[1:] {
		if o.l.Len() < ls.l.Len() {
			ls = o
		}
	}
	taken := false
	_ = ls.l.Call(func() {
		taken = true
		ls.adoptTLS(fd, tc, rc, pre)
	})
	if !taken {
		unix.Close(fd) // the loop ended first
	}
	return true
}

// adoptTLS registers a TLS connection on the loop and serves what its
// handshake's reads brought with them (a first request that came with the
// client's Finished is in the tls.Conn already, and epoll will not say so).
func (ls *loopState) adoptTLS(fd int, tc *tls.Conn, rc *recordConn, pre []byte) {
	if ls.e.draining.Load() {
		unix.Close(fd)
		return
	}
	cl := &loopClient{ls: ls, tls: &loopTLS{tc: tc, rc: rc}, buf: pre}
	cl.view.local, cl.view.remote = rc.local, rc.remote
	cl.tls.view = tlsView{connView: &cl.view, tc: tc}
	if !ls.add(fd, cl) {
		return
	}
	rc.lc = cl.c
	cl.serve()
}

// viewConn is the connection a request context holds (ctx.Conn).
func (cl *loopClient) viewConn() net.Conn {
	if cl.tls != nil {
		return &cl.tls.view
	}
	return &cl.view
}

// read reads what the connection brings into b: the socket's bytes, or on
// TLS the plaintext of the next whole record it brought (a record at most:
// the engine reads on until evloop.ErrWouldBlock whenever it stops reading
// for a while, so what crypto/tls holds is read before the loop waits for
// epoll, as what the socket holds is; and reading on here would cost a
// read that finds nothing per request, since most requests are one
// record); evloop.ErrWouldBlock when there is nothing (more) yet.
func (cl *loopClient) read(b []byte) (int, error) {
	t := cl.tls
	if t == nil {
		return cl.c.Read(b)
	}
	n, err := t.tc.Read(b)
	if len(t.rc.out) > 0 {
		// What reading made crypto/tls answer: a KeyUpdate, an alert.
		if werr := cl.flushTLS(); err == nil {
			err = werr
		}
	}
	switch {
	case n > 0:
		// An error after data is crypto/tls's to repeat (it keeps all
		// but errWouldBlock), or the socket's, or the next read finds it.
		return n, nil
	case err == errWouldBlock:
		return 0, evloop.ErrWouldBlock
	}
	return 0, err
}

// write writes b to the connection: on TLS, its records.
func (cl *loopClient) write(b []byte) error {
	if cl.tls == nil {
		return cl.c.Write(b)
	}
	if _, err := cl.tls.tc.Write(b); err != nil {
		return err
	}
	return cl.flushTLS()
}

// flushTLS hands the loop the ciphertext crypto/tls wrote.
func (cl *loopClient) flushTLS() error {
	rc := cl.tls.rc
	err := cl.c.Write(rc.out)
	rc.out = rc.out[:0]
	if cap(rc.out) > 64<<10 {
		rc.out = nil
	}
	return err
}

// closeNotify sends a TLS connection's close_notify alert, once, before
// the connection is closed or half-closed (as tls.Conn.Close and CloseWrite
// do); nothing on a cleartext connection.
func (cl *loopClient) closeNotify() {
	if cl.tls == nil || cl.c.Closed() {
		return
	}
	if err := cl.tls.tc.CloseWrite(); err == nil {
		_ = cl.flushTLS()
	}
}

// detach takes the connection off the loop for a goroutine: the socket, or
// on TLS the tls.Conn, its recordConn on the socket again.
func (cl *loopClient) detach() (net.Conn, error) {
	nc, err := cl.c.Detach()
	if err != nil || cl.tls == nil {
		return nc, err
	}
	rc := cl.tls.rc
	rc.lc, rc.nc = nil, nc
	return cl.tls.tc, nil
}
