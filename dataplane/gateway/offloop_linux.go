//go:build linux

package gateway

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/sys/unix"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/internal/evloop"
	"github.com/sluicegw/sluice/dataplane/proxy"
	"github.com/sluicegw/sluice/dataplane/snapshot"
)

// Off the loop. A request a loop cannot serve without blocking (a body that
// streams in: chunked, longer than proxy.LoopBodyMax, or behind "Expect:
// 100-continue"; an HTTP/1.0 request; a route whose targets need net/http's
// transports) is served by the same engine on a goroutine of its own: the
// connection leaves the loop with the request the loop parsed, the
// goroutine serves it on the request path every request takes (serveFast,
// or the snapshot's ServeFast once the loop ran the prelude), with
// fasthttp's body reader and answer writer, the framing the loop itself
// uses, and the connection then goes back to a loop (resume) with what
// followed the request. Only a protocol switch (an Upgrade, the h2c
// preface) leaves the loop for good.

// offKind is how an off-loop request's body comes.
type offKind uint8

const (
	offWhole  offKind = iota // none, or whole in the request already
	offStream                // it streams from the connection
	offExpect                // it streams once the client hears 100 Continue
	// offAnswered: the request was served on the loop, and its answer,
	// whose body streams, is to be written.
	offAnswered
)

// offRequest is a request served off the loop, and its connection.
type offRequest struct {
	cl   *loopClient // the loop's client it left (its view, its loop)
	ctx  *fasthttp.RequestCtx
	nc   net.Conn // the connection: the socket, or a *tls.Conn
	kind offKind
	// rest is what the loop read past the request's header (offStream,
	// offExpect) or past the whole request (offWhole).
	rest []byte
	// s, when set, serves the request (the loop ran the prelude already);
	// else serveFast does, with what strictFast found (status, why, seen).
	s      *snapshot.Snapshot
	status int
	why    string
	seen   fieldsSeen
	ids    snapshot.RequestIDs
}

// maxUnreadBody bounds what of a request's body the answer left unread is
// read and dropped so that the connection serves its next request: past
// it, the connection closes after the answer (fasthttp's bound).
const maxUnreadBody = 256 << 10

// offLoop serves the request in cl's context off the loop (see above):
// data is what the loop holds of the connection, used how much of it the
// request took (its header, and for offWhole its body), reason what
// sluice_evloop_handoffs_total counts it as.
func (cl *loopClient) offLoop(r *offRequest, data []byte, used int, reason string) {
	e := cl.ls.e
	e.n.metrics.LoopHandoffs.WithLabelValues(reason).Inc()
	r.cl, r.ctx = cl, cl.ctx
	r.rest = append([]byte(nil), data[used:]...)
	nc, err := cl.detach()
	// The context goes with the request: forget must not recycle it.
	cl.busy = true
	cl.forget()
	if err != nil {
		e.n.log.Debug("taking a connection off its loop failed", "err", err)
		r.end()
		return
	}
	r.nc = nc
	cl.view.nc, cl.view.wd = nc, false // deadlines set on ctx.Conn() reach it
	e.goOff(nc, r.serve)
}

// goOff runs serve, which serves c off the loops, on a goroutine the
// engine's drain waits for (streams), c among those a drain closes when it
// runs out of time (off).
func (e *loopEngine) goOff(c net.Conn, serve func()) {
	e.hold(e.off, c)
	e.streams.Add(1)
	go func() {
		defer e.streams.Done()
		defer e.dropOff(c)
		serve()
	}()
}

// dropOff forgets c (goOff's): it is closed, or back on a loop.
func (e *loopEngine) dropOff(c net.Conn) { e.release(e.off, c) }

// hold and release add c to and remove it from set (off, relays), under
// offMu.
func (e *loopEngine) hold(set map[net.Conn]struct{}, c net.Conn) {
	e.offMu.Lock()
	set[c] = struct{}{}
	e.offMu.Unlock()
}

func (e *loopEngine) release(set map[net.Conn]struct{}, c net.Conn) {
	e.offMu.Lock()
	delete(set, c)
	e.offMu.Unlock()
}

// relay runs an upgrade's relay with c on a goroutine of its own, which a
// drain does not wait for: a WebSocket has no end a drain could wait for.
// The drain closes c once the requests it waits for are done (closeOff).
func (e *loopEngine) relay(c net.Conn, relay func(net.Conn)) {
	e.hold(e.relays, c)
	go func() {
		defer e.release(e.relays, c)
		relay(c)
		_ = c.Close()
	}()
}

// closeOff closes the connections served off the loops.
func (e *loopEngine) closeOff() {
	e.offMu.Lock()
	defer e.offMu.Unlock()
	for c := range e.off {
		_ = c.Close()
	}
	for c := range e.relays {
		_ = c.Close()
	}
}

// serve serves the request, writes its answer, and gives the connection
// back to a loop, or closes it.
func (r *offRequest) serve() {
	ctx, n := r.ctx, r.cl.ls.e.n
	var br *bufio.Reader
	var src *preReader
	var body io.Reader // the streamed body, read to its end after the answer
	closeConn, run := false, r.kind != offAnswered
	switch r.kind {
	case offExpect:
		// Decided before the 100 goes out (continueBody); the body may
		// then be unread, so the connection ends with the answer.
		ctx.Request.SetBodyStream(&continueBody{c: r.nc, n: int64(ctx.Request.Header.ContentLength()), ahead: r.rest}, ctx.Request.Header.ContentLength())
		closeConn = true
	case offStream:
		src = &preReader{pre: r.rest, r: r.nc}
		br = offReaders.Get().(*bufio.Reader)
		br.Reset(src)
		// The body's first bytes are read ahead (up to 8 KiB), bounded as
		// the loop bounds a body: the rules' shortest bodyTimeout.
		_ = r.nc.SetReadDeadline(time.Now().Add(r.cl.bodyBound()))
		if err := ctx.Request.ContinueReadBodyStream(br, fasthttp.DefaultMaxRequestBodySize, false); err != nil {
			fastError(ctx, err)
			closeConn, run = true, false
		} else {
			body = ctx.Request.BodyStream()
		}
	}
	view := &r.cl.view
	var relay func(net.Conn) // a WebSocket's, once its 101 is out
	if run {
		var up *h2cUpgrade
		handled := false
		if r.status == 0 && r.seen&seenUpgrade != 0 && h2cRequested(&ctx.Request.Header) {
			up, handled = n.upgradeFast(ctx)
		}
		switch {
		case up != nil:
			// Switched to HTTP/2: the session takes the connection.
			pre := r.rest
			if br != nil {
				pre = r.unread(br, src)
			}
			r.end()
			c := proxy.Prefixed(r.nc, pre)
			r.cl.ls.e.d.serveUpgraded(up, c)
			_ = c.Close()
			return
		case handled:
			closeConn = true // a malformed upgrade, answered
		case r.s != nil:
			relay = r.s.ServeFast(ctx, ctx.IsTLS(), true, &r.ids)
		default:
			relay = n.serveFast(ctx, r.status, r.why, r.seen, &r.ids)
		}
	}
	closeConn = closeConn || ctx.Request.Header.ConnectionClose() || ctx.Response.ConnectionClose() || n.draining.Load()
	// An HTTP/1.0 client reads no chunked body (RFC 9112 §6.1): an answer
	// of unknown length runs to the connection's close instead.
	untilClose := relay == nil && !ctx.Request.Header.IsHTTP11() && ctx.Response.IsBodyStream() && ctx.Response.Header.ContentLength() < 0
	closeConn = closeConn || untilClose
	switch {
	case relay != nil:
		// A switch (101): its Connection stays "Upgrade".
	case closeConn:
		ctx.Response.SetConnectionClose()
	case !ctx.Request.Header.IsHTTP11():
		ctx.Response.Header.Set("Connection", "keep-alive") // HTTP/1.0's keep-alive is asked for and confirmed
	}
	if ctx.Request.Header.IsHead() {
		ctx.Response.SkipBody = true
	}
	if !view.wd {
		// The gateway's own answer (a forwarded one set the route's
		// writeTimeout, or streams bounded write by write).
		_ = r.nc.SetWriteDeadline(time.Now().Add(api.DefaultWriteTimeout))
	}
	bw := loopWriters.Get().(*bufio.Writer)
	bw.Reset(r.nc)
	var err error
	if untilClose {
		err = writeUntilClose(bw, &ctx.Response)
	} else {
		err = ctx.Response.Write(bw) // closes a body stream when it ends
	}
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	loopWriters.Put(bw)
	_ = ctx.Response.CloseBodyStream() // a failed write left it open
	if relay != nil {
		// Switched (101): the relay has the connection until it ends.
		pre := r.rest
		if br != nil {
			pre = r.unread(br, src)
		}
		r.end()
		if err != nil {
			_ = r.nc.Close()
			return
		}
		c := proxy.Prefixed(r.nc, pre)
		_ = c.SetDeadline(time.Time{})
		r.cl.ls.e.relay(c, relay)
		return
	}
	if err == nil && !closeConn && body != nil {
		// What the answer left of the body is read and dropped, within
		// the body's bound, so that the next request is found after it.
		_ = r.nc.SetReadDeadline(time.Now().Add(r.cl.bodyBound()))
		if k, derr := io.CopyN(io.Discard, body, maxUnreadBody+1); derr != io.EOF || k > maxUnreadBody {
			closeConn = true
		}
	}
	pre := r.rest
	if br != nil {
		pre = r.unread(br, src)
	}
	r.end()
	if err != nil || closeConn {
		_ = r.nc.Close()
		return
	}
	_ = r.nc.SetDeadline(time.Time{})
	r.cl.resume(r.nc, pre)
}

// writeUntilClose writes resp, whose body streams with no length known,
// for an HTTP/1.0 client: no transfer coding, the body as it comes (each
// piece flushed, as chunks are), ended by the connection's close.
func writeUntilClose(bw *bufio.Writer, resp *fasthttp.Response) error {
	h := &resp.Header
	h.SetContentLength(-2) // identity, and Connection: close
	h.Del("Transfer-Encoding")
	if err := h.Write(bw); err != nil {
		return err
	}
	if resp.SkipBody || h.StatusCode() < 200 || h.StatusCode() == http.StatusNoContent || h.StatusCode() == http.StatusNotModified {
		return nil
	}
	body := resp.BodyStream()
	buf := make([]byte, 16<<10)
	for {
		k, err := body.Read(buf)
		if k > 0 {
			if _, werr := bw.Write(buf[:k]); werr != nil {
				return werr
			}
			if werr := bw.Flush(); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// unread returns what was read of the connection and not served: what br
// holds, then what it did not take of rest (src's); br goes back to its
// pool.
func (r *offRequest) unread(br *bufio.Reader, src *preReader) []byte {
	b, _ := br.Peek(br.Buffered())
	b = append(append([]byte(nil), b...), src.pre...)
	br.Reset(nil)
	offReaders.Put(br)
	return b
}

// end releases the request's context.
func (r *offRequest) end() {
	ctx := r.ctx
	_ = ctx.Request.CloseBodyStream()
	_ = ctx.Response.CloseBodyStream() // an answer not written ends its exchange
	ctx.Request.Reset()
	ctx.Response.Reset()
	r.cl.view.nc = nil
	loopCtxs.Put(ctx)
}

var offReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 16<<10) }}

// preReader reads pre, then r.
type preReader struct {
	pre []byte
	r   io.Reader
}

func (p *preReader) Read(b []byte) (int, error) {
	if len(p.pre) > 0 {
		n := copy(b, p.pre)
		p.pre = p.pre[n:]
		return n, nil
	}
	return p.r.Read(b)
}

// resume gives nc, the connection cl left its loop with (detach's), back to
// cl's loop, pre (what was read of it and not served) to be served first;
// it closes nc when the loop is gone or the engine drains.
func (cl *loopClient) resume(nc net.Conn, pre []byte) {
	e := cl.ls.e
	e.dropOff(nc) // the loop's again: a drain ends it there
	if cl.tls != nil {
		if !e.serveTLS(cl.tls.tc, pre) {
			_ = nc.Close()
		}
		return
	}
	sc, ok := nc.(syscall.Conn)
	if !ok || e.draining.Load() {
		_ = nc.Close()
		return
	}
	fd, err := evloop.Dup(sc)
	_ = nc.Close() // the loop owns the duplicate
	if err != nil {
		return
	}
	ls := cl.ls
	local, remote := cl.view.local, cl.view.remote
	if !ls.l.Post(func() {
		if e.draining.Load() {
			unix.Close(fd)
			return
		}
		back := &loopClient{ls: ls, buf: pre}
		back.view.local, back.view.remote = local, remote
		if ls.add(fd, back) {
			back.since = ls.l.Now()
			if len(pre) == 0 {
				back.c.SetDeadline(back.since + int64(IdleTimeout))
			}
			back.serve()
		}
	}) {
		unix.Close(fd) // the loop ended
	}
}
