//go:build linux

package gateway

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/sys/unix"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/internal/evloop"
	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/dataplane/proxy"
	"github.com/sluicegw/sluice/dataplane/snapshot"
)

// The HTTP/1.1 engine serves the cleartext traffic listener's
// connections, and the TLS listener's once its handshake is done
// (looptls_linux.go), on a few event loops (package evloop), one per
// processor, instead of a goroutine per connection: a loop reads a
// connection only once epoll says it is readable, so an exchange costs one
// read and one write on each side (a goroutine per connection pays two
// reads more that find nothing, and the scheduler's hand-offs). fasthttp
// is the codec: it parses the request and the answer; the strict checks
// run (strictFast), and the snapshot serves the request (ServeLoop),
// forwarding on the loop (proxy.Upstream.ForwardLoop).
//
// A loop serves what it can serve without blocking: HTTP/1.1 requests
// without a body or with a body of known length up to proxy.LoopBodyMax,
// on routes whose targets are cleartext HTTP/1.1 (snapshot.ServeLoop; a
// decision that may wait, on a Redis-shared limit or a leaky bucket's
// delay, is made off the loop: loopwait_linux.go), and answers whose
// bodies are small and of known length. Any other request (HTTP/1.0, an
// Upgrade, a chunked or long body, a body behind Expect: 100-continue, a
// route the loop declines) is served off the loop by the same request
// path, and so is an answer whose body streams; the connection then goes
// back to a loop (offloop_linux.go). Only the h2c preface takes a
// connection to the HTTP/2 server for good.

// loopEngine is the event-loop engine of one Serve.
type loopEngine struct {
	n     *Node
	d     *dispatcher
	addr  net.Addr // the listener's
	lfd   int      // the listener's socket, duplicated for the loops
	loops []*loopState
	wg    sync.WaitGroup // the loops' goroutines
	// streams counts the goroutines serving connections off the loops:
	// answers whose bodies stream, requests served off the loop
	// (offloop_linux.go), and the upgrades they switch to; off holds their
	// connections, which a drain that runs out of time closes.
	streams sync.WaitGroup
	offMu   sync.Mutex
	off     map[net.Conn]struct{}
	relays  map[net.Conn]struct{} // upgrades' relays (not waited for)
	// foreignTLS warns once of TLS connections the loops cannot take
	// (serveTLS).
	foreignTLS sync.Once
	// deciding counts the decisions under way off the loops
	// (loopClient.offload); deciders the goroutines that run them, which
	// take them from jobs, and end when quit is closed.
	deciding sync.WaitGroup
	deciders sync.WaitGroup
	jobs     chan *loopClient
	idle     atomic.Int64 // deciders idle or on their way to jobs, less those claimed (handOff)
	quit     chan struct{}
	quitOnce sync.Once
	conns    atomic.Int64 // client connections on the loops
	draining atomic.Bool
}

// loopState is one loop and what its goroutine alone uses.
type loopState struct {
	e       *loopEngine
	l       *evloop.Loop
	in      []byte // reads land here first
	out     []byte // answers are serialized here
	clients map[*loopClient]struct{}
}

// loopClientMax bounds what a client connection holds of a request: the
// header's bound and a body the loop reads whole.
const loopClientMax = proxy.MaxHeaderBytes + proxy.LoopBodyMax

// startLoops serves ln's connections on count event loops (the dispatcher
// takes what they hand over); ln itself is left to the caller, who closes
// it (the loops drop their duplicate when they drain).
func (n *Node) startLoops(d *dispatcher, ln net.Listener, count int) (*loopEngine, error) {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return nil, errors.New("the event-loop engine needs a TCP listener")
	}
	fd, err := evloop.Dup(sc)
	if err != nil {
		return nil, err
	}
	e := &loopEngine{n: n, d: d, addr: ln.Addr(), lfd: fd, off: map[net.Conn]struct{}{}, relays: map[net.Conn]struct{}{},
		jobs: make(chan *loopClient), quit: make(chan struct{})}
	// Every loop is made (an epoll and an eventfd each) before any
	// accepts: connections accepted by the first would otherwise take the
	// descriptors the next needs, under a burst at start-up with a low
	// RLIMIT_NOFILE, and fail the start.
	for i := range count {
		l, err := evloop.New(i)
		if err != nil {
			e.stop()
			return nil, err
		}
		e.loops = append(e.loops, &loopState{e: e, l: l, in: make([]byte, loopClientMax), clients: map[*loopClient]struct{}{}})
		e.wg.Go(func() {
			if err := l.Run(); err != nil {
				n.log.Error("event loop failed", "loop", i, "err", err)
			}
		})
	}
	for _, ls := range e.loops {
		var lerr error
		if err := ls.l.Call(func() { lerr = ls.l.Listen(fd, ls.accept) }); err != nil || lerr != nil {
			e.stop()
			return nil, errors.Join(err, lerr)
		}
	}
	return e, nil
}

// stop ends the loops (closing what they hold) and waits for them.
func (e *loopEngine) stop() {
	for _, ls := range e.loops {
		ls.l.Stop()
	}
	e.wg.Wait()
	if e.lfd >= 0 {
		unix.Close(e.lfd)
		e.lfd = -1
	}
}

// drain stops accepting, closes idle connections as they become idle
// (answers say "Connection: close" meanwhile: Node.draining), and waits for
// the connections, and the answers streaming off the loops, to end, until
// ctx ends; then it stops the loops.
func (e *loopEngine) drain(ctx context.Context) error {
	e.draining.Store(true)
	for _, ls := range e.loops {
		_ = ls.l.Call(func() { ls.l.Unlisten(e.lfd) }) // a loop that ended listens no more
	}
	unix.Close(e.lfd)
	e.lfd = -1
	streams := make(chan struct{})
	go func() { e.streams.Wait(); close(streams) }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var err error
	for {
		for _, ls := range e.loops {
			ls.l.Post(ls.closeIdle)
		}
		if e.conns.Load() == 0 {
			select {
			case <-streams:
				e.stopLoops()
				e.closeOff() // the upgrades' relays
				return nil
			default:
			}
		}
		select {
		case <-ctx.Done():
			err = ctx.Err()
			e.stopLoops()
			e.closeOff()
			<-streams // their connections are closed: they end
			return err
		case <-tick.C:
		}
	}
}

func (e *loopEngine) stopLoops() {
	for _, ls := range e.loops {
		ls.l.Stop()
	}
	e.wg.Wait()
	e.deciding.Wait() // their requests end as their connections did
	e.quitOnce.Do(func() { close(e.quit) })
	e.deciders.Wait()
}

// closeIdle closes the loop's client connections that wait for a request
// (none under way), while the engine drains.
func (ls *loopState) closeIdle() {
	for cl := range ls.clients {
		if !cl.busy && cl.c.Pending() == 0 && len(cl.buf) == 0 {
			cl.close()
		}
	}
}

// accept registers a new client connection on the loop.
func (ls *loopState) accept(fd int, sa unix.Sockaddr) {
	e := ls.e
	if e.draining.Load() {
		unix.Close(fd)
		return
	}
	// As Go's listeners set up the connections they accept: no Nagle
	// delay, and keep-alive probes every 15 s, so that a peer gone without
	// a word is found out during a long request too.
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1)
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, 15)
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, 15)
	cl := &loopClient{ls: ls, first: true}
	cl.view.remote = tcpAddrOf(sa)
	cl.view.local = e.addr
	ls.add(fd, cl)
}

// add registers cl's connection, the socket fd, on the loop; false when it
// could not (fd is closed).
func (ls *loopState) add(fd int, cl *loopClient) bool {
	e := ls.e
	c, err := ls.l.Add(fd, cl)
	if err != nil {
		unix.Close(fd)
		return false
	}
	cl.c = c
	ls.clients[cl] = struct{}{}
	e.conns.Add(1)
	e.n.metrics.LoopConnections.Inc()
	// The first request's first byte, as the fasthttp engine bounds it
	// (its ReadTimeout).
	c.SetDeadline(ls.l.Now() + int64(ReadHeaderTimeout))
	return true
}

func tcpAddrOf(sa unix.Sockaddr) *net.TCPAddr {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: append(net.IP(nil), a.Addr[:]...), Port: a.Port}
	case *unix.SockaddrInet6:
		ta := &net.TCPAddr{IP: append(net.IP(nil), a.Addr[:]...), Port: a.Port}
		if a.ZoneId != 0 {
			if ifi, err := net.InterfaceByIndex(int(a.ZoneId)); err == nil {
				ta.Zone = ifi.Name
			}
		}
		return ta
	}
	return &net.TCPAddr{}
}

// loopClient is a client connection on a loop.
type loopClient struct {
	ls   *loopState
	c    *evloop.Conn
	view connView
	ctx  *fasthttp.RequestCtx // the request under way, and its answer
	// tls is a TLS connection's (looptls_linux.go); nil for cleartext.
	tls *loopTLS
	// buf holds what was read and not served yet, when a request came in
	// pieces or behind another (pipelined); reads land in the loop's
	// buffer otherwise.
	buf     []byte
	scanned int   // how much of the pending request headerEnds searched
	since   int64 // when the pending request's first bytes came
	// bound is how long the pending request may take to arrive whole,
	// from since: the header's bound, or the body's once the header is in
	// (inBody), when since moves on with each read that brings more.
	bound   time.Duration
	inBody  bool
	busy    bool // a request is being decided off the loop or forwarded
	first   bool // no request yet: the h2c preface may come
	closing bool // the answer said close: the connection ends once it is out
	uri     fasthttp.URI
	// writeBound bounds the client's taking of the answer under way: the
	// route's writeTimeout for a forwarded answer, as the fasthttp engine
	// bounds its body; api.DefaultWriteTimeout for the gateway's own.
	writeBound time.Duration
	// req is the request being decided off the loop or forwarded, and
	// decidedFn is cl.decided, bound once (for the loop's task queue).
	req       snapshot.LoopRequest
	decidedFn func()
}

// Readable reads and serves what the connection brings, unless a request
// is under way (what comes meanwhile waits in the socket).
func (cl *loopClient) Readable(*evloop.Conn) {
	if cl.closing {
		cl.linger()
		return
	}
	if !cl.busy {
		cl.serve()
	}
}

// Drained: the answer is out; serving goes on.
func (cl *loopClient) Drained(*evloop.Conn) {
	if cl.closing {
		cl.shutdown()
		return
	}
	cl.c.SetDeadline(cl.ls.l.Now() + int64(IdleTimeout))
	if !cl.busy {
		cl.serve()
	}
}

// Expired: a bound on the client passed.
func (cl *loopClient) Expired(c *evloop.Conn) {
	switch {
	case cl.busy:
		// The exchange is bounded by the route's timeout, on the
		// upstream's side; the client waits for it.
		c.SetDeadline(cl.ls.l.Now() + int64(IdleTimeout))
	case cl.closing, c.Pending() > 0:
		cl.close() // the client did not take its answer
	case len(cl.buf) > 0:
		// A request that did not arrive whole in time: 408, as the
		// fasthttp engine answers a header that stalls.
		ctx := cl.acquire()
		snapshot.WriteProblemFast(ctx, http.StatusRequestTimeout, "Request timeout", "the request did not arrive in time")
		ctx.SetConnectionClose()
		cl.respond()
	default:
		cl.close() // idle
	}
}

// serve serves the requests the connection holds, reading what it brings,
// until one is under way, the socket has nothing more, or the answers are
// not taken.
func (cl *loopClient) serve() {
	ls := cl.ls
	for !cl.busy && !cl.closing && !cl.c.Closed() && cl.c.Pending() == 0 {
		var data []byte
		own := len(cl.buf) > 0
		if own {
			data = cl.buf
		} else {
			n, err := cl.read(ls.in)
			if n == 0 {
				cl.readFailed(err)
				return
			}
			data = ls.in[:n]
			cl.since = ls.l.Now()
		}
		used, whole := cl.serveOne(data)
		if cl.c.Closed() || used < 0 {
			return // handed over, or closed
		}
		if !whole {
			// The request is not all there: keep it and read on.
			if !own {
				cl.buf = append(cl.buf[:0], data...)
			}
			if !cl.readMore() {
				return
			}
			if cl.inBody {
				// The body's bound is on its progress, as on the
				// other engines (the header's is on the whole header).
				cl.since = ls.l.Now()
			}
			continue
		}
		// Keep what follows the request (pipelined), if anything.
		rest := data[used:]
		if own {
			cl.buf = cl.buf[:copy(cl.buf, rest)]
		} else if len(rest) > 0 {
			cl.buf = append(cl.buf[:0], rest...)
		}
		if len(cl.buf) == 0 && cap(cl.buf) > 16<<10 {
			cl.buf = nil
		}
		cl.since = ls.l.Now()
	}
}

// readMore reads what the socket holds onto cl.buf; it reports whether
// anything came (else the request waits, bounded, for the rest).
func (cl *loopClient) readMore() bool {
	if len(cl.buf) == cap(cl.buf) {
		if cap(cl.buf) >= loopClientMax {
			// Over the header's bound (a body that long was handed
			// over when its header came): 431, as the fasthttp engine.
			ctx := cl.acquire()
			headerTooLarge(ctx)
			ctx.SetConnectionClose()
			cl.respond()
			return false
		}
		cl.buf = append(cl.buf, make([]byte, min(max(cap(cl.buf), 4<<10), loopClientMax-cap(cl.buf)))...)[:len(cl.buf)]
	}
	n, err := cl.read(cl.buf[len(cl.buf):cap(cl.buf)])
	cl.buf = cl.buf[:len(cl.buf)+n]
	if n == 0 {
		cl.readFailed(err)
		return false
	}
	return true
}

// readFailed deals with a read that brought nothing: wait for more (a
// request part read, within its bound), or close.
func (cl *loopClient) readFailed(err error) {
	if err == evloop.ErrWouldBlock {
		if len(cl.buf) > 0 {
			cl.c.SetDeadline(cl.since + int64(cl.bound))
		}
		return
	}
	cl.close() // the client closed, or its socket failed
}

// serveOne serves the request at the start of data: it returns how many
// bytes it took and true, or false while the request is not all there, or
// -1 when the connection was handed over or closed.
func (cl *loopClient) serveOne(data []byte) (int, bool) {
	if cl.first {
		if p := min(len(data), len(h2Preface)); string(data[:p]) == h2Preface[:p] {
			if p < len(h2Preface) {
				return 0, false
			}
			cl.handOver(data, metrics.HandoffH2C) // h2c with prior knowledge
			return -1, true
		}
	}
	ctx := cl.acquire()
	h := &ctx.Request.Header
	n, whole, err := proxy.ReadRequestHeader(h, data, &cl.scanned)
	if !whole {
		if len(data) >= proxy.MaxHeaderBytes {
			headerTooLarge(ctx)
			ctx.SetConnectionClose()
			cl.respond()
			return -1, true
		}
		cl.bound, cl.inBody = ReadHeaderTimeout, false
		return 0, false
	}
	if n > proxy.MaxHeaderBytes {
		// Whole in one read but over the bound the other engines hold
		// (fasthttp's read buffer, net/http's MaxHeaderBytes): 431.
		headerTooLarge(ctx)
		ctx.SetConnectionClose()
		cl.respond()
		return -1, true
	}
	if err == nil {
		// As the fasthttp engine's server, which refuses a target its URI
		// parse refuses (400) before the handler runs.
		err = cl.uri.Parse(h.Host(), h.RequestURI())
	}
	if err != nil {
		fastError(ctx, err)
		ctx.SetConnectionClose()
		cl.respond()
		return -1, true
	}
	cl.first = false
	var ids snapshot.RequestIDs
	status, why, seen := strictFast(h, &ids)
	bodyLen := proxy.FastContentLength(h)
	// reason, when set, is why the request is served off the loop, its
	// body coming as kind says (offStream whenever it has one, but behind
	// Expect).
	reason, kind := "", offWhole
	switch {
	case status != 0:
		// Refused below, before anything reads the request.
	case seen&seenUpgrade != 0:
		// A protocol switch (a WebSocket, h2c), or a request served as
		// HTTP/1.1 without one.
		reason = metrics.HandoffUpgrade
	case !h.IsHTTP11():
		reason = metrics.HandoffHTTP10 // HTTP/1.0: its own keep-alive and framing
	case bodyLen < 0, bodyLen > proxy.LoopBodyMax, bodyLen > 0 && len(data)-n < int(bodyLen) && ctx.Request.MayContinue():
		// A body that streams in; behind Expect, the client waits for 100
		// Continue, which is sent once the request is let through.
		reason = metrics.HandoffBody
		if ctx.Request.MayContinue() {
			reason, kind = metrics.HandoffExpect, offExpect
		}
	case bodyLen > 0:
		if len(data)-n < int(bodyLen) {
			cl.bound, cl.inBody = cl.bodyBound(), true
			return 0, false
		}
		ctx.Request.SetBody(data[n : n+int(bodyLen)])
		n += int(bodyLen)
	}
	cl.scanned, cl.inBody = 0, false
	ctx.Request.SetURI(&cl.uri)
	if reason != "" {
		if kind == offWhole && bodyLen != 0 {
			kind = offStream
		}
		cl.offLoop(&offRequest{kind: kind, status: status, why: why, seen: seen, ids: ids}, data, n, reason)
		return -1, true
	}
	res, req := snapshot.LoopAnswered, snapshot.LoopRequest{}
	s := cl.ls.e.n.fastPrelude(ctx, status, why, seen)
	if s != nil {
		res, req = s.ServeLoop(ctx, &ids)
	}
	switch res {
	case snapshot.LoopDeclined:
		// Targets that need net/http's transports: off the loop, the
		// prelude run.
		cl.offLoop(&offRequest{kind: offWhole, s: s, ids: ids}, data, n, metrics.HandoffRoute)
		return -1, true
	case snapshot.LoopForward:
		cl.busy = true
		cl.forward(req)
	case snapshot.LoopDecide:
		cl.busy = true
		cl.offload(req)
	default:
		cl.respond()
	}
	return n, true
}

// bodyBound is the wait for the rest of a request's body: the shortest
// bodyTimeout of the rules (the route is not known yet), as the fasthttp
// engine's HeaderReceived bounds it.
func (cl *loopClient) bodyBound() time.Duration {
	if s := cl.ls.e.n.current.Load(); s != nil {
		return s.MinBodyTimeout()
	}
	return api.DefaultBodyTimeout
}

// acquire returns the connection's request context, ready for a request.
func (cl *loopClient) acquire() *fasthttp.RequestCtx {
	if cl.ctx == nil {
		cl.ctx = loopCtxs.Get().(*fasthttp.RequestCtx)
		cl.ctx.Init2(cl.viewConn(), quietLogger{}, false)
		cl.ctx.Response.Header.SetNoDefaultContentType(true)
	}
	return cl.ctx
}

var loopCtxs = sync.Pool{New: func() any { return new(fasthttp.RequestCtx) }}

// recycle readies the connection's context for the next request.
func (cl *loopClient) recycle() {
	cl.writeBound = 0
	ctx := cl.ctx
	ctx.Request.Reset()
	ctx.Response.Reset()
	ctx.Response.Header.SetNoDefaultContentType(true)
}

// forward starts the forward the request path planned for the request
// under way (req) on the connection's loop; its outcome comes to LoopDone.
func (cl *loopClient) forward(req snapshot.LoopRequest) {
	cl.req = req
	if cl.c.Closed() {
		// Closed while its decision ran off the loop (the loop ended):
		// nobody takes an answer.
		cl.LoopDone(proxy.Outcome{Status: proxy.StatusClientClosed, ClientGone: true})
		return
	}
	u := req.Upstream()
	cl.writeBound = u.WriteTimeout()
	u.ForwardLoop(cl.ls.l, req, cl, cl.ctx, req.Request(), req.Match())
}

// LoopDone ends the forward under way (proxy.LoopExchange): the request
// path is told its outcome (it records it, now or once a streamed body
// ends), and the answer is written.
func (cl *loopClient) LoopDone(o proxy.Outcome) {
	req := cl.req
	cl.req = snapshot.LoopRequest{}
	req.End(o)
	cl.answered()
}

// answered: the request's answer is in the context, after a forward or a
// decision made off the loop. An answer whose body streams is written off
// the loop; any other now, and serving goes on.
func (cl *loopClient) answered() {
	cl.busy = false
	if cl.c.Closed() {
		// Gone meanwhile (the engine stopped): end what the answer holds.
		_ = cl.ctx.Response.CloseBodyStream()
		cl.recycle()
		loopCtxs.Put(cl.ctx)
		cl.ctx = nil
		return
	}
	if cl.ctx.Response.IsBodyStream() {
		// Its body's reads block: written off the loop, after which the
		// connection comes back with what followed the request.
		cl.offLoop(&offRequest{kind: offAnswered}, cl.buf, 0, metrics.HandoffStream)
		return
	}
	cl.respond()
	cl.serve()
}

// respond writes the answer in the context: the fasthttp engine's framing
// (Content-Length from the body; none for HEAD, 1xx, 204 and 304), and
// "Connection: close" when the request, the answer or a drain asks for it.
func (cl *loopClient) respond() {
	ctx := cl.ctx
	resp := &ctx.Response
	closeConn := ctx.Request.Header.ConnectionClose() || resp.ConnectionClose() || cl.ls.e.n.draining.Load()
	if closeConn {
		resp.SetConnectionClose()
	}
	if ctx.Request.Header.IsHead() {
		resp.SkipBody = true
	}
	body := resp.Body()
	status := resp.StatusCode()
	sendBody := !resp.SkipBody && status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
	if sendBody || len(body) > 0 {
		resp.Header.SetContentLength(len(body))
	}
	out := resp.Header.AppendBytes(cl.ls.out[:0])
	if sendBody {
		out = append(out, body...)
	}
	err := cl.write(out)
	if cap(out) <= 64<<10 {
		cl.ls.out = out[:0]
	}
	bound := cmp.Or(cl.writeBound, api.DefaultWriteTimeout)
	cl.recycle()
	now := cl.ls.l.Now()
	switch {
	case err != nil:
		cl.close()
	case closeConn:
		cl.closing = true
		if cl.c.Pending() == 0 {
			cl.shutdown()
		} else {
			cl.c.SetDeadline(now + int64(bound))
		}
	case cl.c.Pending() > 0:
		// The client is slow to take it: bounded as the fasthttp engine
		// bounds a response body's write.
		cl.c.SetDeadline(now + int64(bound))
	default:
		cl.c.SetDeadline(now + int64(IdleTimeout))
	}
}

// shutdown ends a connection whose last answer is out: a FIN, then what
// the client still sends is read and dropped until it closes too (or a
// second passes), so that its unread bytes do not turn the close into a
// reset that could discard the answer.
func (cl *loopClient) shutdown() {
	if cl.closeNotify(); cl.c.Pending() > 0 {
		// TLS's close_notify is queued: Drained comes back here.
		cl.c.SetDeadline(cl.ls.l.Now() + int64(time.Second))
		return
	}
	if err := cl.c.CloseWrite(); err != nil {
		cl.close()
		return
	}
	cl.c.SetDeadline(cl.ls.l.Now() + int64(time.Second))
	cl.linger()
}

// linger reads and drops what a closing connection brings, until its end.
func (cl *loopClient) linger() {
	if cl.c.Pending() > 0 {
		return // the answer is still going out
	}
	for {
		_, err := cl.c.Read(cl.ls.in)
		if err == evloop.ErrWouldBlock {
			return
		}
		if err != nil {
			cl.close()
			return
		}
	}
}

// close closes the connection and forgets it.
func (cl *loopClient) close() {
	if !cl.c.Closed() {
		cl.closeNotify()
		cl.c.Close()
	}
	cl.forget()
}

// forget drops the connection from the loop's books (closed, or handed
// over).
func (cl *loopClient) forget() {
	ls := cl.ls
	if _, ok := ls.clients[cl]; !ok {
		return
	}
	delete(ls.clients, cl)
	ls.e.conns.Add(-1)
	ls.e.n.metrics.LoopConnections.Dec()
	if cl.ctx != nil && !cl.busy { // a forward under way still holds it
		cl.recycle()
		loopCtxs.Put(cl.ctx)
		cl.ctx = nil
	}
	cl.buf = nil
}

// handOver takes a cleartext connection that opened with the h2c preface
// off the loop for good, with pending (what was read of it), to the
// dispatcher, which serves it as HTTP/2; reason is counted
// (sluice_evloop_handoffs_total).
func (cl *loopClient) handOver(pending []byte, reason string) {
	cl.ls.e.n.metrics.LoopHandoffs.WithLabelValues(reason).Inc()
	pre := append([]byte(nil), pending...)
	nc, err := cl.detach()
	cl.forget()
	if err != nil {
		cl.ls.e.n.log.Debug("handing a connection over failed", "err", err)
		return
	}
	cl.ls.e.d.adopt(proxy.Prefixed(nc, pre))
}

var loopWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 16<<10) }}

// connView is the net.Conn a loop's request context holds (ctx.Conn):
// the client's addresses, and, once the connection leaves the loop with an
// answer whose body streams, the connection itself (so that the body's
// write deadlines reach it); before that, reads, writes and deadlines do
// nothing (the loop bounds the connection itself).
type connView struct {
	local, remote net.Addr
	nc            net.Conn
	// wd: a write deadline was set on nc (by the request path, for an
	// answer served off the loop: offloop_linux.go).
	wd bool
}

var errOnLoop = errors.New("the connection is served by an event loop")

func (v *connView) Read(b []byte) (int, error) {
	if v.nc != nil {
		return v.nc.Read(b)
	}
	return 0, errOnLoop
}

func (v *connView) Write(b []byte) (int, error) {
	if v.nc != nil {
		return v.nc.Write(b)
	}
	return 0, errOnLoop
}

func (v *connView) Close() error {
	if v.nc != nil {
		return v.nc.Close()
	}
	return nil
}

func (v *connView) LocalAddr() net.Addr  { return v.local }
func (v *connView) RemoteAddr() net.Addr { return v.remote }

func (v *connView) SetDeadline(t time.Time) error {
	if v.nc != nil {
		v.wd = true
		return v.nc.SetDeadline(t)
	}
	return nil
}

func (v *connView) SetReadDeadline(t time.Time) error {
	if v.nc != nil {
		return v.nc.SetReadDeadline(t)
	}
	return nil
}

func (v *connView) SetWriteDeadline(t time.Time) error {
	if v.nc != nil {
		v.wd = true
		return v.nc.SetWriteDeadline(t)
	}
	return nil
}

var _ io.ReadWriteCloser = (*connView)(nil)
