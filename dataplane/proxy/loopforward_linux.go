//go:build linux

package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicegw/sluice/dataplane/answer"
	"github.com/sluicegw/sluice/dataplane/internal/evloop"
)

// This file is the event-loop engine's forward (ForwardLoop): the same
// exchange as ForwardFast's, with the same head (appendFastHead), the same
// parser for the answer (fasthttp's), the same cleaning (relayFast) and the
// same outcomes, but the upstream connections are a loop's, read when epoll
// says they are readable, and the exchange returns at once and ends with a
// callback on the loop. An answer whose body is small and of known length
// is read whole on the loop; any other body (chunked, long, or until the
// connection's end) is streamed by a goroutine: the connection leaves the
// loop for the origin's fastPool, and the body goes out as ForwardFast's
// does.

// LoopCapable reports whether the route's requests can be forwarded on an
// event loop (ForwardLoop): its targets are cleartext HTTP/1.1. (h2c and
// https targets go through net/http's transports.)
func (u *Upstream) LoopCapable() bool {
	t0 := u.targets[0]
	return t0.scheme == "http" && (t0.origin.rt.Protocols == nil || !t0.origin.rt.Protocols.UnencryptedHTTP2())
}

// LoopBodyMax is the largest request body the event-loop engine reads
// whole before forwarding (and the largest answer body ForwardLoop reads
// whole, smallBody): requests with longer bodies, or chunked ones, are
// served by the fasthttp engine, which streams them.
const LoopBodyMax = 64 << 10

// maxInterim is the most 1xx answers read before the final one (as
// fasthttp's limit).
const maxInterim = 16

// ForwardLoop sends the request in ctx (its body, if any, whole in
// ctx.Request) to the next target on m.Path and returns at once; the answer
// comes to x.LoopDone on loop l, which must be the caller's, never before
// ForwardLoop returns. The gateway's own answers (502, 504) are written
// through w. The route must be LoopCapable. The route's timeout bounds the
// exchange (504), as ForwardFast's; a target that cannot be reached is
// answered 502; a request that failed on a kept-alive connection before
// any answer is sent again on a new one when it is idempotent (retryable's
// rule).
func (u *Upstream) ForwardLoop(l *evloop.Loop, w http.ResponseWriter, x LoopExchange, ctx *fasthttp.RequestCtx, fr FastRequest, m Match) {
	f := loopFwds.Get().(*loopFwd)
	f.u, f.w, f.x, f.ctx, f.l = u, w, x, ctx, l
	f.start = time.Now()
	f.due = l.Now() + int64(u.timeout)
	f.ti = u.balance.pick()
	f.t = u.targets[f.ti]
	fr.bal, fr.ti = u.balance, f.ti
	f.fr = fr
	f.clientClose = ctx.Response.ConnectionClose()
	f.head = u.appendFastHead(f.head[:0], ctx, fr, f.t, m)
	if b := ctx.Request.Body(); len(b) > 0 {
		f.head = append(f.head, b...)
	}
	f.p = f.t.loopPool(l)
	if err := f.acquire(); err != nil {
		// No connection to be had now (the pool is full, or every idle
		// one failed): answered from the loop's task queue, after this
		// returns, as every other answer comes.
		f.err = err
		if !l.Post(f.failLater) {
			f.fail(err) // the loop has ended (not while it runs this)
		}
	}
}

// loopFwd is one ForwardLoop exchange.
type loopFwd struct {
	u           *Upstream
	t           *target
	ti          int
	l           *evloop.Loop
	p           *loopPool
	w           http.ResponseWriter
	x           LoopExchange
	ctx         *fasthttp.RequestCtx
	fr          FastRequest
	head        []byte // the request as it goes: head, then body
	start       time.Time
	due         int64 // the route's deadline, on the loop's clock
	clientClose bool  // the client's connection is to close after the answer
	uc          *loopConn
	err         error  // why acquire failed, for failLater
	failLater   func() // fail(err), bound once per pooled loopFwd
}

var loopFwds sync.Pool

func init() {
	// Set here: fail puts the loopFwd back, an initialization cycle for a
	// composite literal.
	loopFwds.New = func() any {
		f := &loopFwd{head: make([]byte, 0, 1024)}
		f.failLater = func() { f.fail(f.err) }
		return f
	}
}

func (f *loopFwd) free() {
	head, failLater := f.head, f.failLater
	if cap(head) > 16<<10 {
		head = nil
	}
	*f = loopFwd{head: head[:0], failLater: failLater}
	loopFwds.Put(f)
}

// acquire sends the request on an idle connection of the pool, or on a
// new one once it is dialed (the dial's failure then ends the exchange).
// It returns why the request could not be sent now, for the caller to end
// the exchange with: the pool is full, or the idle connection tried last
// failed and the request may not be sent again (retryable).
func (f *loopFwd) acquire() error {
	p := f.p
	for n := len(p.idle); n > 0; n = len(p.idle) {
		uc := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		if uc.c.Closed() {
			continue
		}
		err := f.send(uc)
		if err == nil {
			return nil
		}
		if !f.retryable(uc, err) {
			return err
		}
	}
	if p.open >= p.max {
		return errFastPoolFull
	}
	p.open++
	uc := &loopConn{p: p}
	uc.f = f // dialing: an answer has nobody else to go to
	f.l.Dial(p.dial, uc, func(c *evloop.Conn, err error) {
		if err != nil {
			p.open--
			f.fail(err)
			return
		}
		uc.c = c
		if err := f.send(uc); err != nil {
			f.fail(err) // a new connection: not sent again
		}
	})
	return nil
}

// send writes the request on uc and waits for the answer; a write that
// fails drops uc.
func (f *loopFwd) send(uc *loopConn) error {
	f.uc, uc.f = uc, f
	uc.buf, uc.scanned, uc.interim = uc.buf[:0], 0, 0
	if err := uc.c.Write(f.head); err != nil {
		f.uc, uc.f = nil, nil
		f.p.drop(uc)
		return err
	}
	uc.c.SetDeadline(f.due)
	return nil
}

// retryable reports whether the request may go again on another
// connection after uc failed with err before any answer: uc was kept
// alive (it may have closed before the request reached it), the route's
// deadline has not passed, and the request is idempotent (as fastPool's).
func (f *loopFwd) retryable(uc *loopConn, err error) bool {
	return uc.reused && f.l.Now() < f.due && !isTimeout(err) && idempotent(&f.ctx.Request.Header)
}

// retryOrFail ends an exchange whose connection failed before the answer
// began: on a new connection when retryable (as fastPool's), else 502.
func (f *loopFwd) retryOrFail(err error) {
	uc := f.uc
	f.uc, uc.f = nil, nil
	f.p.drop(uc)
	if f.retryable(uc, err) {
		err = f.acquire()
		if err == nil {
			return
		}
	}
	f.fail(err)
}

// fail answers the client itself: 504 for the route's timeout, 502
// otherwise.
func (f *loopFwd) fail(err error) {
	if uc := f.uc; uc != nil {
		f.uc, uc.f = nil, nil
		f.p.drop(uc)
	}
	u, ctx := f.u, f.ctx
	resetFastResponse(&ctx.Response, f.clientClose)
	o := Outcome{Err: err}
	if isTimeout(err) {
		answer.WriteProblemID(f.w, f.fr.header(), f.fr.RequestID, http.StatusGatewayTimeout, "Gateway timeout", u.timeoutDetail)
		o.Status, o.Timeout = http.StatusGatewayTimeout, true
	} else {
		answer.WriteProblemID(f.w, f.fr.header(), f.fr.RequestID, http.StatusBadGateway, "Bad gateway", "the upstream could not be reached")
		o.Status = http.StatusBadGateway
	}
	o.Duration = time.Since(f.start)
	u.log.Debug("upstream exchange failed", "route", u.routeID, "target", f.t.url, "status", o.Status,
		"timeout", o.Timeout, "err", err)
	f.end(o)
}

// end reports the exchange's outcome and frees it.
func (f *loopFwd) end(o Outcome) {
	if !o.streamed {
		f.u.balance.done(f.ti, o.Err != nil || o.Status >= 500, o.ClientGone)
	}
	x := f.x
	f.free()
	x.LoopDone(o)
}

// errLoopTimeout is the route's timeout passing on a loop's exchange.
var errLoopTimeout = &loopTimeoutError{}

type loopTimeoutError struct{}

func (*loopTimeoutError) Error() string   { return "upstream timeout" }
func (*loopTimeoutError) Timeout() bool   { return true }
func (*loopTimeoutError) Temporary() bool { return true }

// readable reads what uc holds of the answer and goes on with it.
func (f *loopFwd) readable() {
	uc := f.uc
	for {
		if len(uc.buf) == cap(uc.buf) {
			if cap(uc.buf) >= loopAnswerMax {
				break // the header is over the bound: parse says so
			}
			uc.buf = append(uc.buf, make([]byte, min(max(cap(uc.buf), 4<<10), loopAnswerMax-cap(uc.buf)))...)[:len(uc.buf)]
		}
		n, err := uc.c.Read(uc.buf[len(uc.buf):cap(uc.buf)])
		uc.buf = uc.buf[:len(uc.buf)+n]
		if err == evloop.ErrWouldBlock {
			break
		}
		if err != nil {
			if len(uc.buf) == 0 && uc.interim == 0 {
				f.retryOrFail(err) // nothing of an answer: the connection had closed
				return
			}
			uc.eof = true
			break
		}
	}
	f.parse()
}

// loopAnswerMax bounds what a loop reads of an answer before it is parsed
// (header) or streamed (body): the header's bound and a small body.
const loopAnswerMax = MaxHeaderBytes + smallBody

// parse goes on with the answer in uc.buf: its header, then its body.
func (f *loopFwd) parse() {
	uc := f.uc
	out := &f.ctx.Response
	for {
		if !headerEnds(uc.buf, &uc.scanned) {
			switch {
			case uc.eof:
				f.fail(io.ErrUnexpectedEOF)
			case len(uc.buf) >= MaxHeaderBytes:
				f.fail(errors.New("the upstream's answer header is too large"))
			}
			return
		}
		n, err := readHeader(uc.buf, func(br *bufio.Reader) error { return out.Header.Read(br) })
		if err == nil && n > MaxHeaderBytes {
			err = errors.New("the upstream's answer header is too large")
		}
		if err != nil {
			f.fail(err)
			return
		}
		status := out.StatusCode()
		if status >= 200 || status == http.StatusSwitchingProtocols {
			uc.hdr = n
			break
		}
		// An interim answer (100 Continue, 103): the final one follows.
		if uc.interim++; uc.interim > maxInterim {
			f.fail(errors.New("too many interim answers"))
			return
		}
		uc.buf = append(uc.buf[:0], uc.buf[n:]...)
		uc.scanned = 0
	}
	f.answered()
}

// answered goes on once the answer's header is in the client's response.
func (f *loopFwd) answered() {
	uc := f.uc
	out := &f.ctx.Response
	status := out.StatusCode()
	cl := out.Header.ContentLength()
	closeConn := out.ConnectionClose() || status == http.StatusSwitchingProtocols
	noBody := cl == 0 || f.ctx.Request.Header.IsHead() || status < 200 || status == http.StatusNoContent ||
		status == http.StatusNotModified
	switch {
	case noBody:
		closeConn = closeConn || len(uc.buf) > uc.hdr // bytes the answer has no room for
		f.uc, uc.f = nil, nil
		f.p.put(uc, closeConn)
		f.end(f.u.relayFast(f.w, f.ctx, f.fr, nil, f.clientClose, f.start))
	case cl > 0 && cl <= smallBody:
		have := len(uc.buf) - uc.hdr
		if have < cl {
			if uc.eof {
				f.fail(io.ErrUnexpectedEOF)
			}
			return // the rest comes
		}
		out.SetBody(uc.buf[uc.hdr : uc.hdr+cl])
		closeConn = closeConn || have > cl
		f.uc, uc.f = nil, nil
		f.p.put(uc, closeConn)
		f.end(f.u.relayFast(f.w, f.ctx, f.fr, nil, f.clientClose, f.start))
	default:
		// Chunked, long, or until the connection's end: streamed by a
		// goroutine, off the loop, through the origin's fastPool.
		pre := uc.buf[uc.hdr:]
		nc, err := uc.c.Detach()
		f.uc, uc.f = nil, nil
		f.p.open--
		if err != nil {
			uc.c.Close()
			f.fail(err)
			return
		}
		if cl == -2 {
			closeConn = true // the body ends with the connection
		}
		s := f.t.fastClient().adopt(nc, pre, cl, closeConn)
		// The stream's own bound: the route's deadline, as fastPool's.
		_ = nc.SetReadDeadline(f.l.Time(f.due))
		f.end(f.u.relayFast(f.w, f.ctx, f.fr, s, f.clientClose, f.start))
	}
}

// headerEnds reports whether b holds a blank line after a first line: the
// end of a header block (LF LF, or LF CR LF). scanned is how much of b was
// searched before, resumed from (less the two bytes a terminator may
// straddle).
func headerEnds(b []byte, scanned *int) bool {
	i := max(*scanned-2, 0)
	for {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			*scanned = len(b)
			return false
		}
		i += j + 1
		if i < len(b) && b[i] == '\n' || i+1 < len(b) && b[i] == '\r' && b[i+1] == '\n' {
			return true
		}
	}
}

// loopReader is a parse's reader over the bytes at hand: fasthttp's
// parsers read from a bufio.Reader. The loop's goroutine owns one at a
// time.
type loopReader struct {
	r  bytes.Reader
	br *bufio.Reader
}

var loopReaders = sync.Pool{New: func() any {
	lr := new(loopReader)
	lr.br = bufio.NewReaderSize(&lr.r, loopAnswerMax)
	return lr
}}

// readHeader runs read (a fasthttp header's Read) over b, which holds a
// whole header block (headerEnds), and returns the block's length.
func readHeader(b []byte, read func(*bufio.Reader) error) (int, error) {
	lr := loopReaders.Get().(*loopReader)
	lr.r.Reset(b)
	lr.br.Reset(&lr.r)
	err := read(lr.br)
	n := len(b) - lr.br.Buffered() - lr.r.Len()
	lr.r.Reset(nil)
	lr.br.Reset(&lr.r)
	loopReaders.Put(lr)
	return n, err
}

// ReadRequestHeader parses the request header block at the start of b
// into h, for the event-loop engine: it reports whether b holds a whole
// block (else nothing is parsed), and the block's length. scanned carries
// the search for the block's end from one call to the next, as b grows.
func ReadRequestHeader(h *fasthttp.RequestHeader, b []byte, scanned *int) (n int, whole bool, err error) {
	if !headerEnds(b, scanned) {
		return 0, false, nil
	}
	n, err = readHeader(b, h.Read)
	return n, true, err
}

// loopPool is one origin's keep-alive connections on one loop, used from
// that loop's goroutine only.
type loopPool struct {
	l           *evloop.Loop
	dial        func() (net.Conn, error)
	idle        []*loopConn // most recently used last
	open        int         // dialing, in use or idle
	max         int
	idleTimeout int64
	closed      bool // the origin is released: connections are closed as they come back
}

// loopPools are an origin's pools, by loop id.
type loopPools struct {
	mu    sync.Mutex
	pools atomic.Pointer[[]*loopPool]
}

// loopPool returns t's origin's pool on l. (A pool of an earlier loop of
// the same id, stopped since, is replaced: its connections closed with it.)
func (t *target) loopPool(l *evloop.Loop) *loopPool {
	lp := &t.origin.loop
	if ps := lp.pools.Load(); ps != nil && l.ID() < len(*ps) && (*ps)[l.ID()] != nil && (*ps)[l.ID()].l == l {
		return (*ps)[l.ID()]
	}
	lp.mu.Lock()
	defer lp.mu.Unlock()
	var ps []*loopPool
	if old := lp.pools.Load(); old != nil {
		ps = *old
	}
	if l.ID() < len(ps) && ps[l.ID()] != nil && ps[l.ID()].l == l {
		return ps[l.ID()]
	}
	next := make([]*loopPool, max(len(ps), l.ID()+1))
	copy(next, ps)
	d, addr := t.tr.dialer, t.hostPort()
	p := &loopPool{l: l, max: 1 << 14, idleTimeout: int64(t.tr.settings.IdleConnTimeout),
		dial: func() (net.Conn, error) { return d.Dial("tcp", addr) }}
	next[l.ID()] = p
	lp.pools.Store(&next)
	return p
}

// closeLoops closes o's loop pools: their idle connections now (on their
// loops), the others as they come back.
func closeLoops(o *origin) {
	ps := o.loop.pools.Load()
	if ps == nil {
		return
	}
	for _, p := range *ps {
		if p != nil {
			p.l.Post(p.close)
		}
	}
}

func (p *loopPool) close() {
	p.closed = true
	p.closeIdle()
}

// closeIdle closes the pool's idle connections (on its loop).
func (p *loopPool) closeIdle() {
	for _, uc := range p.idle {
		uc.c.Close()
		p.open--
	}
	clear(p.idle)
	p.idle = p.idle[:0]
}

// closeLoopsIdle closes the idle connections of o's loop pools (on their
// loops); the pools stay in use.
func closeLoopsIdle(o *origin) {
	if ps := o.loop.pools.Load(); ps != nil {
		for _, p := range *ps {
			if p != nil {
				p.l.Post(p.closeIdle)
			}
		}
	}
}

// put returns uc to the pool, or closes it.
func (p *loopPool) put(uc *loopConn, closeConn bool) {
	if closeConn || p.closed || uc.c.Closed() {
		p.drop(uc)
		return
	}
	uc.reused = true
	if cap(uc.buf) > 16<<10 {
		uc.buf = nil
	}
	uc.buf, uc.eof = uc.buf[:0], false
	p.idle = append(p.idle, uc)
	uc.c.SetDeadline(p.l.Now() + p.idleTimeout)
}

// drop closes uc, which is in no list.
func (p *loopPool) drop(uc *loopConn) {
	if !uc.c.Closed() {
		uc.c.Close()
	}
	p.open--
}

// loopConn is an upstream connection of a loop pool; its exchange, when
// one is in flight, hears its events.
type loopConn struct {
	p       *loopPool
	c       *evloop.Conn
	f       *loopFwd // the exchange in flight; nil when idle
	buf     []byte   // the answer read so far
	scanned int      // how much of buf headerEnds searched
	hdr     int      // the final answer's header length, once parsed
	interim int      // interim answers skipped
	reused  bool     // kept alive from an earlier exchange
	eof     bool     // the upstream closed the connection
}

func (uc *loopConn) Readable(c *evloop.Conn) {
	if uc.f != nil {
		uc.f.readable()
		return
	}
	// Idle: the upstream closed it (or sent what nobody asked for).
	var b [64]byte
	if _, err := c.Read(b[:]); err == evloop.ErrWouldBlock {
		return
	}
	for i, o := range uc.p.idle {
		if o == uc {
			uc.p.idle = append(uc.p.idle[:i], uc.p.idle[i+1:]...)
			break
		}
	}
	uc.p.drop(uc)
}

func (uc *loopConn) Drained(*evloop.Conn) {}

func (uc *loopConn) Expired(c *evloop.Conn) {
	if f := uc.f; f != nil {
		f.fail(errLoopTimeout)
		return
	}
	for i, o := range uc.p.idle {
		if o == uc {
			uc.p.idle = append(uc.p.idle[:i], uc.p.idle[i+1:]...)
			break
		}
	}
	uc.p.drop(uc)
}
