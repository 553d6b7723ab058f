package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// fastPool is one origin's keep-alive pool for the fasthttp forward: it
// sends a fasthttp.Request and reads the fasthttp.Response header over a
// connection of the pool, with fasthttp's own writer and parser, and hands
// the body over as a stream (fastStream) that returns the connection when
// closed. It takes the place of fasthttp's HostClient, whose idle-connection
// cleaner is a goroutine that sleeps (up to its idle timeout, 90s) before it
// can notice that its pool is empty, so it outlives the pool's owner (a
// node's Run): here an idle connection expires by a timer (time.AfterFunc,
// no goroutine while it waits), which CloseIdleConnections stops.
//
// The zero value is not usable; newFastPool makes one. It is safe for
// concurrent use.
type fastPool struct {
	addr        string
	dial        func(addr string) (net.Conn, error)
	idleTimeout time.Duration
	maxConns    int

	mu     sync.Mutex
	idle   []*fastPoolConn // most recently used last
	open   int             // connections dialed and not closed
	closed bool            // forgotten: connections are closed when returned
	timer  *time.Timer     // expires idle connections; armed while there are any
	gen    uint64          // the armed timer's; a callback of an older one does nothing
}

// fastPoolConn is a pooled upstream connection.
type fastPoolConn struct {
	net.Conn
	lastUse time.Time
	werr    error     // the last write's error: the upstream stopped reading
	reused  bool      // kept alive for another exchange
	wArmed  bool      // a write deadline is set (an exchange that needed one)
	rArmed  time.Time // the read deadline arm set last
	// ctx is the exchange's context (DoContext); sent is set once the
	// request is written whole, when a client gone no longer interrupts
	// the exchange but gives it CancelGrace to end (cancelled).
	ctx  context.Context
	sent atomic.Bool
	cbs  sync.WaitGroup // cancelled, while it may run (watch)
}

// ErrRouteTimeout is the cause (context.Cause) with which Forward cancels
// an exchange whose route's timeout passed: the transport ends it at once,
// where a client gone (an HTTP/2 stream reset, a closed connection) lets
// an exchange already sent finish within CancelGrace.
var ErrRouteTimeout = errors.New("the route's upstream timeout passed")

// CancelGrace is how long an upstream exchange whose client went away
// after its request was sent may still take: an answer that comes within
// it, with no body or a body of known length up to 16 KiB, is read and
// dropped, and the connection goes back to the pool instead of being
// closed (a client that cancels requests, as in an HTTP/2 rapid reset,
// would otherwise cost a new upstream connection each). The client's
// handler, and the limits' hold on it (a concurrency slot), wait as long.
const CancelGrace = 250 * time.Millisecond

// cancelled is the exchange's context ending (DoContext): a route timeout,
// or a client gone before the request was sent whole, ends the exchange at
// once (interrupt); a client gone afterwards leaves it CancelGrace.
func (cc *fastPoolConn) cancelled() {
	if cc.sent.Load() && !errors.Is(context.Cause(cc.ctx), ErrRouteTimeout) {
		cc.rArmed = interruptedAt // re-armed by the next exchange
		_ = cc.SetDeadline(time.Now().Add(CancelGrace))
		return
	}
	cc.interrupt()
}

// watch runs cancelled when ctx ends, until the returned stop is called.
// stop reports, as context.AfterFunc's does, whether it kept cancelled from
// running; when it did not, it waits for cancelled to return, so that a
// connection going back to the pool is never touched by the exchange it
// served (cancelled sets its deadline). stop may be called more than once.
func (cc *fastPoolConn) watch(ctx context.Context) (stop func() bool) {
	cc.cbs.Add(1)
	after := context.AfterFunc(ctx, func() {
		defer cc.cbs.Done()
		cc.cancelled()
	})
	return func() bool {
		if after() {
			cc.cbs.Done()
			return true
		}
		cc.cbs.Wait()
		return false
	}
}

// quickHead is the largest request head without a body that do writes
// with no write deadline: it goes whole into the connection's send buffer
// (16 KiB at least; the previous exchange's bytes were read and acknowledged
// by the upstream, which answered), so its write cannot block, and it saves
// the runtime a timer update per exchange. The read deadline bounds the
// exchange as before.
const quickHead = 4 << 10

// arm sets the exchange's deadline on cc: the read deadline alone for a
// quick head (quickHead) on a connection that never had a write deadline,
// both otherwise.
//
// A quick exchange's read deadline is set a little late, by the slack
// (deadlineSlack), and the next exchanges on the connection whose deadline
// falls within that slack before it keep it instead of setting their own:
// each setting costs the runtime a timer update (about 650 instructions, a
// few percent of a proxied request), and a busy connection then sets one
// about once a second at most. So the route's timeout fires between its
// duration and that plus a sixty-fourth of it (at most a second) late, as
// a timer fires late anyway; never early.
//
// now is the caller's reading of the clock, a moment ago.
func (cc *fastPoolConn) arm(deadline time.Time, quick bool, now time.Time) error {
	if quick && !cc.wArmed && !deadline.IsZero() {
		slack := deadlineSlack(deadline, now)
		if ahead := cc.rArmed.Sub(deadline); ahead >= 0 && ahead <= slack {
			return nil
		}
		cc.rArmed = deadline.Add(slack)
		return cc.SetReadDeadline(cc.rArmed)
	}
	cc.wArmed, cc.rArmed = true, deadline
	return cc.SetDeadline(deadline)
}

// deadlineSlack is how much later than deadline arm may leave a quick
// exchange's read deadline: a sixty-fourth of the time left at now, at most
// a second.
func deadlineSlack(deadline, now time.Time) time.Duration {
	return max(0, min(time.Second, deadline.Sub(now)/64))
}

// retryable reports whether req, which failed with err on cc before any
// answer, may be sent again on a new connection (net/http's client's
// rule): cc was kept alive from an earlier exchange, so the upstream may
// have closed it meanwhile; err is no timeout; and req can be replayed
// (no body stream) and is idempotent (GET, HEAD, OPTIONS, TRACE, or it
// carries an Idempotency-Key).
func retryable(cc *fastPoolConn, out fastOut, err error) bool {
	if !cc.reused || isTimeout(err) {
		return false
	}
	if out.req == nil {
		return idempotent(out.header)
	}
	return !out.req.IsBodyStream() && idempotent(&out.req.Header)
}

// idempotent tells a request that may be sent twice: GET, HEAD, OPTIONS,
// TRACE, or one that carries an Idempotency-Key.
func idempotent(h *fasthttp.RequestHeader) bool {
	return h.IsGet() || h.IsHead() || h.IsOptions() || h.IsTrace() ||
		len(h.Peek("Idempotency-Key")) > 0 || len(h.Peek("X-Idempotency-Key")) > 0
}

// fastOut is a request as do sends it: req, or head, the request line and
// header of a request without a body (appendFastHead), sent as they are.
type fastOut struct {
	req    *fasthttp.Request
	head   []byte
	header *fasthttp.RequestHeader // head's request as received (its method, for retryable)
	isHead bool                    // a HEAD request: its answer has no body
	// into: the response is the client's own (the engine's, with its
	// settings): it is read into as it is, not reset, and the body's
	// stream is returned to the caller instead of set as its body (see
	// doInto).
	into bool
}

// Write is the connection's, remembering a failure (DoContext reads an
// answer the upstream sent before it stopped reading).
func (cc *fastPoolConn) Write(b []byte) (int, error) {
	n, err := cc.Conn.Write(b)
	if err != nil {
		cc.werr = err
	}
	return n, err
}

// interruptedAt is a deadline in the past: set on a connection, it fails
// the reads and writes in progress at once.
var interruptedAt = time.Unix(1, 0)

// interrupt fails cc's reads and writes in progress and to come: the
// exchange's context ended (DoContext). cc is not pooled after that.
func (cc *fastPoolConn) interrupt() {
	cc.rArmed = interruptedAt
	_ = cc.SetDeadline(interruptedAt)
}

func newFastPool(addr string, dial func(string) (net.Conn, error), idleTimeout time.Duration, maxConns int) *fastPool {
	return &fastPool{addr: addr, dial: dial, idleTimeout: idleTimeout, maxConns: maxConns}
}

var errFastPoolFull = errors.New("no free connection to the upstream (too many open)")

// DoDeadline sends req and reads the response's header into resp, all by
// deadline, which also bounds the body's reading (one deadline on the
// connection, as HostClient.DoDeadline). The body, when there is one, is
// resp's body stream (fastStream), which returns the connection to the
// pool when closed after being read to its end, and closes it otherwise.
// A write or read timeout is fasthttp.ErrTimeout; a connection the upstream
// closed before answering, fasthttp.ErrConnectionClosed. A request that
// failed so on a kept-alive connection (the upstream closed it while it
// was idle) is sent again on a new connection when it is replayable and
// idempotent (retryable), as net/http's client does; nothing else is
// retried.
func (p *fastPool) DoDeadline(req *fasthttp.Request, resp *fasthttp.Response, deadline time.Time) error {
	now := time.Now()
	if !now.Before(deadline) {
		return fasthttp.ErrTimeout
	}
	return install(p.do(nil, fastOut{req: req, isHead: req.Header.IsHead()}, resp, now, deadline))
}

// doInto is DoDeadline for the gateway's forward (ForwardFast), out.req a
// request or out.head the head of one without a body (appendFastHead),
// sent as it is (out.header the request as the client sent it: its
// method): the response is read straight into resp, the client's response
// (the engine's ctx.Response), so that the upstream's header is parsed once
// and never copied; resp is not reset first (the engine's settings for it
// stay), and the body's stream, when there is a body, is returned instead
// of set as resp's body (the caller reads or wraps it, and closes it). A
// body of known length up to smallBody is read into resp instead, and no
// stream returned: an error reading it is doInto's.
// resp's Connection: close, when set, is the upstream's after doInto.
// now is the caller's reading of the clock a moment ago (the exchange's
// start: one reading serves the whole exchange).
func (p *fastPool) doInto(out fastOut, resp *fasthttp.Response, now, deadline time.Time) (*fastStream, error) {
	if !now.Before(deadline) {
		return nil, fasthttp.ErrTimeout
	}
	out.into = true
	return p.do(nil, out, resp, now, deadline)
}

// install sets a body stream do returned as its response's body.
func install(s *fastStream, err error) error {
	if s != nil {
		s.resp.SetBodyStream(s, s.cl)
	}
	return err
}

// DoContext is DoDeadline bounded by ctx (its end, its deadline among
// them) instead of a deadline: when ctx ends before the response's header
// is read, DoContext returns ctx.Err() promptly, and when it ends while the
// body is read, the body's Read fails with ctx.Err(); either way the
// connection is closed, not pooled. Except: when ctx ends after the request
// was sent whole, and not with ErrRouteTimeout as its cause (a client gone),
// the exchange gets CancelGrace to end: an answer without a body or with a
// short one (16 KiB) that comes within it is read and dropped, the
// connection pooled, and DoContext returns ctx.Err() then. (ctx ends the exchange by moving the
// connection's deadline to the past, from context.AfterFunc: no goroutine
// waits on it.) A response without Content-Type gets none (fasthttp would
// report its default).
func (p *fastPool) DoContext(ctx context.Context, req *fasthttp.Request, resp *fasthttp.Response) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// No deadline on the connection from ctx's: it could fire a moment
	// before ctx ends and read as the upstream's timeout; ctx's end
	// interrupts the exchange, and is what the caller then sees.
	return install(p.do(ctx, fastOut{req: req, isHead: req.Header.IsHead()}, resp, time.Now(), time.Time{}))
}

// do is DoDeadline, DoContext and doInto: ctx may be nil, and a zero
// deadline is none; now is the caller's reading of the clock. It returns
// the body's stream, when there is a body, for the caller to set as resp's
// (install) or to read itself (doInto).
func (p *fastPool) do(ctx context.Context, out fastOut, resp *fasthttp.Response, now, deadline time.Time) (*fastStream, error) {
	cc, err := p.acquire(now)
	if err != nil {
		return nil, err
	}
	if ctx != nil && ctx.Err() != nil {
		// The client went away (an HTTP/2 stream reset) while the
		// connection was found or dialed: nothing is sent, and the
		// connection, unused, stays in the pool rather than being
		// interrupted and closed.
		p.put(cc, false)
		return nil, ctx.Err()
	}
	req := out.req
	if req != nil {
		req.URI().DisablePathNormalizing = true
	}
	// One pooled object holds the exchange's buffers and, when there is a
	// body, becomes its stream.
	s := fastStreams.Get().(*fastStream)
	var (
		stop  func() bool
		early bool
	)
	quick := req == nil && len(out.head) <= quickHead
	for {
		if err := cc.arm(deadline, quick, now); err != nil {
			p.put(cc, true)
			s.free()
			return nil, err
		}
		stop = nil
		if ctx != nil && ctx.Done() != nil {
			cc.ctx = ctx
			cc.sent.Store(false)
			stop = cc.watch(ctx)
		}
		bw := s.bw
		bw.Reset(cc)
		if req != nil {
			err = req.Write(bw)
		} else {
			_, err = bw.Write(out.head)
		}
		if err == nil {
			err = bw.Flush()
		}
		bw.Reset(nil)
		if err == nil && stop != nil {
			cc.sent.Store(true)
		}
		early = false
		if err != nil && ctx != nil && cc.werr != nil && !isTimeout(cc.werr) && ctx.Err() == nil && !retryable(cc, out, err) {
			// An upstream may answer before it has read the whole
			// request (413, 401) and close: its answer is read as
			// net/http's client would. Only for DoContext, whose caller
			// (net/http's server) deals with a request body left unread;
			// and only when the connection refused the write, not the
			// client's body its read.
			early, err = true, nil
		}
		if err == nil {
			s.br.Reset(cc)
			if !out.into {
				resp.Reset()
				resp.Header.SetNoDefaultContentType(ctx != nil)
			}
			resp.SkipBody = true // the header only; the body is streamed below
			err = resp.ReadLimitBody(s.br, 0)
			resp.SkipBody = false
		}
		if err == nil {
			break
		}
		// A retry past the deadline would only fail at once, on a new
		// connection: a timeout that read nothing comes as fasthttp's
		// ErrNothingRead, which hides the timeout from retryable.
		now = time.Now()
		if !retryable(cc, out, err) || ctx != nil && ctx.Err() != nil || !deadline.IsZero() && !now.Before(deadline) {
			s.free()
			return nil, p.fail(ctx, stop, cc, err)
		}
		// A kept-alive connection the upstream had closed meanwhile
		// (its idle timeout shorter than ours): a replayable request is
		// sent again on a new connection, as net/http's client does.
		if stop != nil {
			stop()
		}
		p.put(cc, true)
		if cc, err = p.dialNew(); err != nil {
			s.free()
			return nil, err
		}
	}
	status := resp.StatusCode()
	closeConn := early || req != nil && req.ConnectionClose() || resp.ConnectionClose() || status == fasthttp.StatusSwitchingProtocols
	cl := resp.Header.ContentLength()
	noBody := cl == 0 || out.isHead || status < 200 || status == fasthttp.StatusNoContent || status == fasthttp.StatusNotModified
	if ctx != nil && ctx.Err() != nil {
		// The client went away while the answer came (within
		// CancelGrace): a short answer is read and dropped, and the
		// connection kept.
		if !closeConn && !noBody && cl > 0 && cl <= smallBody {
			resp.StreamBody = false
			closeConn = resp.ReadBody(s.br, cl) != nil
			noBody = true
		}
		s.free()
		if stop != nil {
			stop()
		}
		p.put(cc, closeConn || !noBody)
		return nil, ctx.Err()
	}
	if !noBody && out.into && cl > 0 && cl <= smallBody {
		// A small body of known length is read at once into the client's
		// response (doInto), to go out with the header in one write; the
		// connection goes back to the pool now.
		resp.StreamBody = false
		if err := resp.ReadBody(s.br, cl); err != nil {
			s.free()
			return nil, p.fail(ctx, stop, cc, err)
		}
		noBody = true
	}
	if noBody {
		s.free()
		if stop != nil && !stop() {
			closeConn = true // ctx ended meanwhile: the deadline is spoilt
		}
		p.put(cc, closeConn)
		return nil, nil
	}
	if !out.into {
		s.resp = resp
	}
	s.ctx, s.stop = ctx, stop
	s.begin(p, cc, closeConn, cl)
	return s, nil
}

// begin makes s the stream of a body of length cl (-1 chunked, -2 until
// the connection's end) read from cc through s.br, where the header was
// read: Close returns cc to p, unless closeConn.
func (s *fastStream) begin(p *fastPool, cc *fastPoolConn, closeConn bool, cl int) {
	s.p, s.cc, s.closeConn, s.cl = p, cc, closeConn, cl
	s.body.StreamBody = true
	s.body.Header.SetContentLength(cl)
	_ = s.body.ReadBody(s.br, 0) // a stream: reads nothing yet
	s.r = s.body.BodyStream()
}

// adopt takes c into the pool, a connection on which another reader (the
// event-loop engine's, see ForwardLoop) read an answer's header and pre,
// the first bytes of its body: it returns the body's stream (cl as for
// begin), which reads pre first, then c, and returns c to the pool when
// closed after the body's end.
func (p *fastPool) adopt(c net.Conn, pre []byte, cl int, closeConn bool) *fastStream {
	p.mu.Lock()
	p.open++
	p.mu.Unlock()
	cc := &fastPoolConn{Conn: Prefixed(c, pre), reused: true}
	s := fastStreams.Get().(*fastStream)
	s.br.Reset(cc)
	s.begin(p, cc, closeConn, cl)
	return s
}

// Prefixed returns c with pre put back before what it reads next: a
// connection whose first bytes another reader took (a protocol sniff, an
// event loop handing the connection over). It half-closes (CloseWrite)
// when c does, so that a server can send an error answer and a FIN before
// closing, rather than a reset that may discard the answer.
func Prefixed(c net.Conn, pre []byte) net.Conn {
	if len(pre) == 0 {
		return c
	}
	return &preConn{Conn: c, pre: pre}
}

// preConn is a connection whose first bytes were read already, into pre.
type preConn struct {
	net.Conn
	pre []byte
}

func (c *preConn) Read(b []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(b, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

func (c *preConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// fail closes cc after the exchange failed with err, and returns the error
// to report: ctx's when it ended (its interruption caused err), else err as
// HostClient reports it.
func (p *fastPool) fail(ctx context.Context, stop func() bool, cc *fastPoolConn, err error) error {
	if stop != nil {
		stop()
	}
	p.put(cc, true)
	if ctx != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
	}
	return fastErr(err)
}

// fastErr is err as HostClient reports it.
func fastErr(err error) error {
	switch {
	case isTimeout(err):
		return fasthttp.ErrTimeout
	case errors.Is(err, io.EOF):
		return fasthttp.ErrConnectionClosed
	}
	return err
}

// acquire returns the most recently used idle connection, or a new one.
// now is the caller's reading of the clock.
func (p *fastPool) acquire(now time.Time) (*fastPoolConn, error) {
	p.mu.Lock()
	for n := len(p.idle); n > 0; n = len(p.idle) {
		cc := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		if now.Sub(cc.lastUse) < p.idleTimeout {
			p.mu.Unlock()
			return cc, nil
		}
		// The most recent is expired, and so are all the others.
		p.open--
		p.mu.Unlock()
		cc.Close()
		p.mu.Lock()
	}
	p.mu.Unlock()
	return p.dialNew()
}

// dialNew returns a new connection.
func (p *fastPool) dialNew() (*fastPoolConn, error) {
	p.mu.Lock()
	if p.maxConns > 0 && p.open >= p.maxConns {
		p.mu.Unlock()
		return nil, errFastPoolFull
	}
	p.open++
	p.mu.Unlock()
	c, err := p.dial(p.addr)
	if err != nil {
		p.mu.Lock()
		p.open--
		p.mu.Unlock()
		return nil, err
	}
	return &fastPoolConn{Conn: c}, nil
}

// put returns cc to the pool, or closes it (discard, or the pool is
// closed).
func (p *fastPool) put(cc *fastPoolConn, discard bool) {
	p.mu.Lock()
	if discard || p.closed {
		p.open--
		p.mu.Unlock()
		cc.Close()
		return
	}
	cc.lastUse = time.Now()
	cc.reused = true
	p.idle = append(p.idle, cc)
	if p.timer == nil {
		p.arm(p.idleTimeout)
	}
	p.mu.Unlock()
}

// arm starts the expiry timer; p.mu is held.
func (p *fastPool) arm(d time.Duration) {
	p.gen++
	gen := p.gen
	p.timer = time.AfterFunc(d, func() { p.expire(gen) })
}

// expire closes the connections idle for idleTimeout and, while others are
// idle, arms the timer for the oldest of them. gen is the timer's: one
// stopped or replaced meanwhile does nothing.
func (p *fastPool) expire(gen uint64) {
	now := time.Now()
	p.mu.Lock()
	if gen != p.gen {
		p.mu.Unlock()
		return
	}
	var old []*fastPoolConn
	i := 0
	for i < len(p.idle) && now.Sub(p.idle[i].lastUse) >= p.idleTimeout {
		i++
	}
	old = append(old, p.idle[:i]...)
	n := copy(p.idle, p.idle[i:])
	clear(p.idle[n:])
	p.idle = p.idle[:n]
	p.open -= len(old)
	p.timer = nil
	p.gen++
	if len(p.idle) > 0 && !p.closed {
		p.arm(p.idleTimeout - now.Sub(p.idle[0].lastUse))
	}
	p.mu.Unlock()
	for _, cc := range old {
		cc.Close()
	}
}

// CloseIdleConnections closes the idle connections and stops the expiry
// timer; connections in use go back to the pool as before.
func (p *fastPool) CloseIdleConnections() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.open -= len(idle)
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
		p.gen++
	}
	p.mu.Unlock()
	for _, cc := range idle {
		cc.Close()
	}
}

// close closes the idle connections, and those in use when they are
// returned: the pool is forgotten.
func (p *fastPool) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.CloseIdleConnections()
}

var (
	fastStreams = sync.Pool{New: func() any {
		return &fastStream{bw: bufio.NewWriterSize(nil, 4<<10), br: bufio.NewReaderSize(nil, MaxHeaderBytes),
			body: new(fasthttp.Response)}
	}}
)

// free puts s back in its pool, its buffers kept and emptied.
func (s *fastStream) free() {
	s.br.Reset(nil)
	s.body.Reset()
	bw, br, body := s.bw, s.br, s.body
	*s = fastStream{bw: bw, br: br, body: body}
	fastStreams.Put(s)
}

// fastStream is a response body read from a pooled connection: Close
// (the response's CloseBodyStream, or its release) returns the connection
// to the pool when the body was read to its end and neither side asked to
// close it, and closes it otherwise. Reads and Close come from one
// goroutine at a time (the engine writing the body).
type fastStream struct {
	p         *fastPool
	cc        *fastPoolConn
	br        *bufio.Reader // the exchange's buffers, kept with the pooled stream
	bw        *bufio.Writer
	resp      *fasthttp.Response // the caller's: it may ask to close (SetConnectionClose) until Close; nil for doInto
	body      *fasthttp.Response // holds fasthttp's body reader over br
	r         io.Reader
	cl        int // the body's Content-Length, -1 for chunked, -2 until the connection's end
	closeConn bool
	eof       bool
	failed    bool
	ctx       context.Context // DoContext's; nil for DoDeadline
	stop      func() bool     // stops ctx's interruption of cc; nil without
}

func (s *fastStream) Read(b []byte) (int, error) {
	if s.r == nil {
		return 0, io.ErrClosedPipe
	}
	n, err := s.r.Read(b)
	switch {
	case err == io.EOF:
		s.eof = true
	case err != nil && forbiddenTrailer(err):
		// The body is whole, but its trailer section holds a field that
		// must not be a trailer (fasthttp's list: Content-Type,
		// Set-Cookie, Location, ...), which fasthttp refuses: the body
		// ends there, without its trailer section (fasthttp kept none of
		// its fields), as net/http's server ends it without a forbidden
		// declared field; the connection, its reader left before that
		// section, is not reused.
		s.eof, s.closeConn, s.r = true, true, eofReader{}
		return n, io.EOF
	case err != nil:
		s.failed = true
		if s.ctx != nil && s.ctx.Err() != nil {
			err = s.ctx.Err() // the exchange was interrupted (DoContext)
		}
	}
	return n, err
}

// forbiddenTrailer reports whether err is fasthttp's refusal of a field
// in a chunked body's trailer section that must not be a trailer
// (isBadTrailer; the error is fasthttp's "forbidden trailer key %q", as
// its header error wraps it).
func forbiddenTrailer(err error) bool {
	inner := errors.Unwrap(err)
	return inner != nil && strings.HasPrefix(inner.Error(), "forbidden trailer key ")
}

// eofReader is a body read to its end.
type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// trailer returns the trailer section of a chunked body read to its end
// ("name: value" lines, names in canonical form, values as received, then
// a blank line), or nil when it had no field.
func (s *fastStream) trailer() []byte {
	if len(s.body.Header.PeekTrailerKeys()) == 0 {
		return nil
	}
	return s.body.Header.TrailerHeader()
}

func (s *fastStream) Close() error {
	if s.r == nil {
		return nil
	}
	reuse := s.eof && !s.failed && !s.closeConn && (s.resp == nil || !s.resp.ConnectionClose())
	if s.stop != nil && !s.stop() {
		reuse = false // ctx ended: cc's deadline is spoilt
	}
	_ = s.body.CloseBodyStream()
	s.p.put(s.cc, !reuse)
	s.free()
	return nil
}
