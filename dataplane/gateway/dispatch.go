package gateway

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/http2"

	"github.com/sluicegw/sluice/dataplane/proxy"
)

// h2Preface is the start of an HTTP/2 client connection preface (RFC 9113
// §3.4): a cleartext connection that opens with it speaks h2c with prior
// knowledge.
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// dispatcher hands each connection of the TLS listener to the server of
// its protocol, decided once by the handshake's ALPN: "h2" to the HTTP/2
// server, "http/1.1" or none to an event loop (tlsLoop); and serves as
// HTTP/2 a cleartext connection an event loop hands over because it opened
// with the h2c preface (adopt). h1 serves no connection: it carries the
// HTTP/2 configuration and its graceful shutdown. It is safe for
// concurrent use.
type dispatcher struct {
	h1      *http.Server  // HTTP/2's base configuration; never serves
	h2      *http2.Server // configured on h1 (graceful shutdown)
	handler http.Handler  // what HTTP/2 connections serve
	// sniffTimeout bounds the wait for a connection's first bytes or TLS
	// handshake (the server's ReadHeaderTimeout).
	sniffTimeout time.Duration
	// h2cfg is the base configuration of HTTP/2 sessions (h2base); h2log
	// receives x/net's connection errors (a client's protocol errors, a
	// rapid reset's GOAWAY), nil for the standard logger.
	h2cfg     *http.Server
	h2log     *log.Logger
	h2cfgOnce sync.Once
	// guard wraps the connection of every HTTP/2 session (Node.guardH2:
	// rapid reset); nil serves it as it is.
	guard func(net.Conn) net.Conn
	// tlsLoop takes a TLS connection whose handshake chose HTTP/1.1 (or
	// nothing) to an event loop (loopEngine.serveTLS); false closes it (a
	// drain).
	tlsLoop func(*tls.Conn) bool

	mu      sync.Mutex
	pending map[net.Conn]struct{} // connections not yet dispatched
	closed  bool
	h2conns sync.WaitGroup // HTTP/2 connections being served
}

func newDispatcher(h1 *http.Server, h2 *http2.Server, handler http.Handler) (*dispatcher, error) {
	if err := http2.ConfigureServer(h1, h2); err != nil {
		return nil, err
	}
	return &dispatcher{h1: h1, h2: h2, handler: handler,
		sniffTimeout: h1.ReadHeaderTimeout, pending: map[net.Conn]struct{}{}}, nil
}

// serve accepts connections from ln and dispatches each until ln is closed.
// It returns ln's accept error (net.ErrClosed after shutdown).
func (d *dispatcher) serve(ln net.Listener) error {
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			var tmp interface{ Temporary() bool }
			if !errors.Is(err, net.ErrClosed) && errors.As(err, &tmp) && tmp.Temporary() {
				// A transient failure (EMFILE: out of file descriptors):
				// back off and retry, as net/http's Serve does.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		if !d.track(c) {
			c.Close()
			return net.ErrClosed
		}
		go d.dispatch(c)
	}
}

// track records c as pending; false once the dispatcher is shut down.
func (d *dispatcher) track(c net.Conn) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	d.pending[c] = struct{}{}
	return true
}

// untrack removes c from the pending connections; false when shutdown
// closed it meanwhile.
func (d *dispatcher) untrack(c net.Conn) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.pending[c]
	delete(d.pending, c)
	return ok && !d.closed
}

// adopt dispatches c, a connection the event-loop engine hands over (with
// what it read of it put back), on a goroutine of its own.
func (d *dispatcher) adopt(c net.Conn) {
	if !d.track(c) {
		c.Close()
		return
	}
	go d.dispatch(c)
}

// dispatch decides c's protocol and hands it on.
func (d *dispatcher) dispatch(c net.Conn) {
	h2, conn, err := d.sniff(c)
	if !d.untrack(c) || err != nil {
		c.Close()
		return
	}
	if !h2 {
		// HTTP/1.1 over TLS, to a loop; a cleartext connection comes here
		// only with the h2c preface.
		if tc, ok := conn.(*tls.Conn); !ok || d.tlsLoop == nil || !d.tlsLoop(tc) {
			conn.Close()
		}
		return
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		conn.Close()
		return
	}
	d.h2conns.Add(1)
	d.mu.Unlock()
	defer d.h2conns.Done()
	d.h2.ServeConn(d.guarded(conn), &http2.ServeConnOpts{BaseConfig: d.h2base(), Handler: d.handler})
}

// h2base is the http.Server configuration HTTP/2 sessions are served
// with: the HTTP/1 server's (h1), but for the header bound. net/http reads
// MaxHeaderBytes + 4096 bytes of an HTTP/1 header, so h1 has the gateway's
// bound (proxy.MaxHeaderBytes) less 4096; x/net's server caps an HTTP/2
// header list (names, values and 32 bytes a field, RFC 9113 §6.5.2) at
// MaxHeaderBytes + 320, so HTTP/2 sessions get the bound less 320: 64 KiB
// either way.
func (d *dispatcher) h2base() *http.Server {
	d.h2cfgOnce.Do(func() {
		h1 := d.h1
		d.h2cfg = &http.Server{ReadHeaderTimeout: h1.ReadHeaderTimeout, IdleTimeout: h1.IdleTimeout,
			ErrorLog: cmp.Or(d.h2log, h1.ErrorLog), ConnState: h1.ConnState, MaxHeaderBytes: proxy.MaxHeaderBytes - h2FieldAllowance}
	})
	return d.h2cfg
}

// h2FieldAllowance is what x/net's server adds to http.Server's
// MaxHeaderBytes for an HTTP/2 header list's bound: 32 bytes for each of
// ten fields.
const h2FieldAllowance = 10 * 32

// guarded is c as an HTTP/2 session reads it (see guard).
func (d *dispatcher) guarded(c net.Conn) net.Conn {
	if d.guard == nil {
		return c
	}
	return d.guard(c)
}

// sniff reads what decides c's protocol: the TLS handshake's ALPN, or the
// first bytes of a cleartext connection (kept for the server that takes it).
func (d *dispatcher) sniff(c net.Conn) (h2 bool, conn net.Conn, err error) {
	if d.sniffTimeout > 0 {
		_ = c.SetReadDeadline(time.Now().Add(d.sniffTimeout))
		defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	}
	if tc, ok := c.(*tls.Conn); ok {
		ctx, cancel := context.WithTimeout(context.Background(), max(d.sniffTimeout, time.Second))
		defer cancel()
		if err := tc.HandshakeContext(ctx); err != nil {
			return false, nil, err
		}
		return tc.ConnectionState().NegotiatedProtocol == http2.NextProtoTLS, tc, nil
	}
	br := bufio.NewReaderSize(c, len(h2Preface))
	// Peek waits for the whole preface only while the bytes so far match
	// it: an HTTP/1 request line differs by its first byte or so.
	for n := 1; n <= len(h2Preface); n++ {
		b, err := br.Peek(n)
		if err != nil {
			return false, nil, err
		}
		if b[n-1] != h2Preface[n-1] {
			return false, sniffed(c, br), nil
		}
	}
	return true, sniffed(c, br), nil
}

// sniffed is c with the bytes br read ahead of it put back.
func sniffed(c net.Conn, br *bufio.Reader) net.Conn {
	b, _ := br.Peek(br.Buffered())
	return proxy.Prefixed(c, b)
}

// shutdown stops dispatching: connections still being sniffed are closed,
// HTTP/2 connections start their graceful shutdown (http.Server.Shutdown
// of h1, on which x/net hangs it), and shutdown waits for the HTTP/2
// connections to finish, until ctx ends.
func (d *dispatcher) shutdown(ctx context.Context) error {
	d.mu.Lock()
	d.closed = true
	for c := range d.pending {
		c.Close()
	}
	d.mu.Unlock()
	d.h2base().SetKeepAlivesEnabled(false) // as Shutdown does h1's: sessions end as streams close
	err := d.h1.Shutdown(ctx)              // HTTP/2's graceful shutdown hangs on it
	done := make(chan struct{})
	go func() { d.h2conns.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		if err == nil {
			err = ctx.Err()
		}
	}
	return err
}
