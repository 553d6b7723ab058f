package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/proxy"
	"github.com/sluicegw/sluice/dataplane/snapshot"
)

// H2CBodyMax is the longest request body an "Upgrade: h2c" request may
// carry and still switch its connection to HTTP/2: the body of the upgrade
// request is read whole before the switch (it becomes stream 1's), so it
// is bounded. A request whose body is longer, or of unknown length
// (chunked), is served as HTTP/1.1 without switching (RFC 9110 §7.8 lets a
// server ignore Upgrade), its body streamed as any other's; on every
// HTTP/1 engine (h2cFits).
const H2CBodyMax = 64 << 10

// h2cFits reports whether a request body of length n (-1: unknown) is short
// enough for an h2c upgrade (H2CBodyMax).
func h2cFits(n int64) bool { return n >= 0 && n <= H2CBodyMax }

// h2cSwitching is the answer to an h2c upgrade, as x/net's h2c handler
// writes it.
const h2cSwitching = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"

// h2cUpgrade is an HTTP/1.1 request that switches its connection to HTTP/2
// (RFC 7540 §3.2), handed from the engine's handler to the dispatcher.
type h2cUpgrade struct {
	req      *http.Request // served as stream 1
	settings []byte        // the client's HTTP2-Settings, decoded
	conn     chan net.Conn // the hijacked connection (buffered bytes kept)
	served   chan struct{} // closed when the HTTP/2 session ends
}

// h2cRequested reports whether h asks to switch to h2c as x/net's h2c
// handler recognises it: an Upgrade listing "h2c" and
// a Connection listing "HTTP2-Settings".
func h2cRequested(h *fasthttp.RequestHeader) bool {
	return hasToken(h.PeekAll("Upgrade"), "h2c") && hasToken(h.PeekAll("Connection"), "HTTP2-Settings")
}

// hasToken reports whether a comma-separated list in lines holds tok (any
// case).
func hasToken(lines [][]byte, tok string) bool {
	for _, line := range lines {
		for len(line) > 0 {
			var t []byte
			t, line, _ = bytes.Cut(line, []byte{','})
			if bytes.EqualFold(bytes.TrimSpace(t), []byte(tok)) {
				return true
			}
		}
	}
	return false
}

// upgradeFast switches ctx's connection to HTTP/2 as x/net's h2c handler
// does, for a request whose framing strictFast
// accepted (handleFast calls it only then), its body is read whole, and it is
// then answered 101 and served as HTTP/2 stream 1 through the node's one
// request path (ServeHTTP). An HTTP2-Settings that is missing, repeated or
// not base64url is answered 500, as there. It reports false when the
// request is to be served as HTTP/1.1 instead: over TLS
// (h2c is cleartext only; TLS negotiates h2 by ALPN), a body over
// H2CBodyMax or of unknown length, or a connection the dispatcher did not
// hand over.
func (n *Node) upgradeFast(ctx *fasthttp.RequestCtx) bool {
	h := &ctx.Request.Header
	hold, ok := ctx.Conn().(h2cHolder)
	if !ok || ctx.IsTLS() || !h2cFits(proxy.FastContentLength(h)) {
		return false
	}
	settings, ok := h2cSettings(h)
	if !ok {
		snapshot.WriteProblemFast(ctx, http.StatusInternalServerError, "Internal server error",
			"the h2c upgrade needs exactly one HTTP2-Settings header in base64url")
		return true
	}
	// Head and body as net/http parses them, for ServeHTTP.
	head := make([]byte, 0, len(h.RawHeaders())+len(h.RequestURI())+32)
	head = append(append(append(append(append(head, h.Method()...), ' '), h.RequestURI()...), ' '), h.Protocol()...)
	head = append(append(head, "\r\n"...), bytes.TrimRight(h.RawHeaders(), "\r\n")...)
	head = append(head, "\r\n\r\n"...)
	r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
	if err != nil {
		ctx.SetConnectionClose()
		snapshot.WriteProblemFast(ctx, http.StatusBadRequest, "Bad request", "the request could not be parsed")
		return true
	}
	var body []byte
	if proxy.FastHasBody(h) {
		proxy.GuardBodyConn(ctx.Conn(), true, api.DefaultBodyTimeout)
		if bs := ctx.RequestBodyStream(); bs != nil {
			// Its length is known, at most H2CBodyMax; the bound holds
			// whatever the framing says.
			body, err = io.ReadAll(io.LimitReader(bs, H2CBodyMax))
		} else {
			body = append([]byte(nil), ctx.Request.Body()...)
		}
		if err != nil {
			ctx.SetConnectionClose()
			snapshot.WriteProblemFast(ctx, http.StatusBadRequest, "Bad request", "the request body is malformed or incomplete")
			return true
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.RemoteAddr = ctx.RemoteAddr().String()
	up := &h2cUpgrade{req: r, settings: settings, conn: make(chan net.Conn, 1), served: make(chan struct{})}
	if hold.holdH2C(up) {
		return true // the engine answers 101 and serves the session
	}
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		// The HTTP/2 server sets its own deadlines: none of the engine's
		// (WriteTimeout's, on the answer it did not write) may stay.
		_ = c.SetDeadline(time.Time{})
		// The engine closes c when this returns: hold it for the session,
		// which the dispatcher serves (serveUpgraded).
		up.conn <- c
		<-up.served
	})
	return true
}

// h2cHolder is a client connection an h2c upgrade is handed to (through
// the request context's Conn), for the engine to serve the session once
// the handler returns (dispatcher.serveUpgraded); holdH2C reports whether
// it did so without fasthttp's hijack.
type h2cHolder interface{ holdH2C(*h2cUpgrade) bool }

// h2cSettings decodes the request's one HTTP2-Settings header.
func h2cSettings(h *fasthttp.RequestHeader) ([]byte, bool) {
	vs := h.PeekAll("HTTP2-Settings")
	if len(vs) != 1 {
		return nil, false
	}
	s, err := base64.RawURLEncoding.DecodeString(string(vs[0]))
	return s, err == nil
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
