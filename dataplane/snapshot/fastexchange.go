package snapshot

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/answer"
	"github.com/sluicegw/sluice/dataplane/limit"
	"github.com/sluicegw/sluice/dataplane/proxy"
	"github.com/sluicegw/sluice/dataplane/reqview"
)

// ServeFast serves one request the engine serves off its loop (it may
// block): it builds the request's view from ctx without copying (see
// fastExchange.fill), and runs Serve on it with the fasthttp Exchange. tls
// tells whether the client's connection is TLS. The answer is in
// ctx.Response when it returns; a forwarded body is streamed by the engine
// afterwards. ids, when not nil, are the request's ids as a pass of the
// engine's over the whole raw header gathered them (RequestIDs.Field); nil
// has ServeFast find them itself. It returns the relay of a connection the
// answer switches (a WebSocket's 101), which the engine runs once the
// answer is out (proxy.Outcome.Relay), or nil.
func (s *Snapshot) ServeFast(ctx *fasthttp.RequestCtx, tls, noUpgrade bool, ids *RequestIDs) (relay func(net.Conn)) {
	x := fastExchanges.Get().(*fastExchange)
	x.ctx, x.tls, x.noUpgrade = ctx, tls, noUpgrade
	v := x.fill(ctx, ids)
	v.ClientIP, v.TrustedPeer = s.fastClientIP(ctx, v)
	if s.decideAt(x, v, s.router.MatchView(v), s.now(), &x.plan) {
		x.forwardFast()
	}
	relay = x.relay
	x.reset()
	fastExchanges.Put(x)
	return relay
}

// fastEnd is the forward of a response whose body the engine streams after
// the forward returned: its Plan, taken from the exchange, and the
// outcome, finished (Plan.finish) when the body has been written (end, as
// proxy.FastRequest.Release), so that a concurrency slot is held while the
// client takes the answer and a body cut off mid-way counts against the
// route (breaker, degrade, metrics), as on net/http, where Forward streams
// the body itself.
type fastEnd struct {
	plan Plan
	out  proxy.Outcome
	fn   func(error) // end, bound once per pooled fastEnd
}

var fastEnds sync.Pool

func init() {
	// Set here: end puts the fastEnd back, an initialization cycle
	// for a composite literal.
	fastEnds.New = func() any {
		e := new(fastEnd)
		e.fn = e.end
		return e
	}
	fastExchanges.New = func() any {
		return &fastExchange{header: make(http.Header, 8), reqH: make(http.Header, 16), vals: make([]string, 0, 32)}
	}
}

func (e *fastEnd) end(err error) {
	p, out := e.plan, e.out
	*e = fastEnd{fn: e.fn}
	fastEnds.Put(e)
	p.finish(out, err)
}

// fastExchange is the fasthttp Exchange, pooled with the request view and
// the header map it builds: both are refilled for each request, their
// strings pointing into the engine's buffers, valid until the request ends.
type fastExchange struct {
	ctx       *fasthttp.RequestCtx
	tls       bool
	noUpgrade bool           // the request has no Upgrade field (the engine's strict pass saw none)
	relay     func(net.Conn) // a switched connection's relay (ServeFast returns it)
	status    int
	header    http.Header // the gateway's own answer header, copied on WriteHeader
	view      reqview.View
	reqH      http.Header // the request's header, as the view reads it, once built (BuildHeader)
	vals      []string    // backing of reqH's values
	built     bool        // reqH holds the request's header
	flushed   bool
	id        [1]string // the X-Request-Id header value
	// The storage of a request id and a trace the gateway starts: their
	// strings are valid until the request ends, as the rest of the view's.
	idBuf [answer.RequestIDMax]byte
	trace reqview.TraceBuf
	rl    limit.Fields // the admitting limit's RateLimit fields (TakeRateLimit), if Taken
	rlBuf []byte       // their values, formatted by flush
	// The forward the request path planned (decide), and, once the
	// forward gave the answer a body the engine streams afterwards
	// (TakeRelease), where the plan went to finish when the body ends.
	plan Plan
	end  *fastEnd
	// An event loop's decision run off the loop (LoopRequest.Decide):
	// the snapshot and the match it decides on, from offAt. (Whether it
	// planned a forward is whether plan is set.)
	snap  *Snapshot
	off   proxy.Match
	offAt int64
}

// fastExchanges' New is set in init, beside fastEnds'.
var fastExchanges sync.Pool

func (x *fastExchange) reset() {
	x.rl = limit.Fields{}
	clear(x.header)
	if x.built {
		clear(x.reqH)
		clear(x.vals)
		x.vals = x.vals[:0]
		x.built = false
	}
	x.view, x.id, x.plan, x.end = reqview.View{}, [1]string{}, Plan{}, nil
	x.ctx, x.tls, x.noUpgrade, x.status, x.flushed, x.relay = nil, false, false, 0, false, nil
	x.snap, x.off, x.offAt = nil, proxy.Match{}, 0
}

// b2s is the string of b without a copy; b must outlive the string's use
// and not change meanwhile (the engine's request buffers, for the request).
func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// fill builds the view of ctx's request: method, host, path, query, all
// pointing into the engine's buffers, and the header, built when a stage
// first asks for it (BuildHeader: most requests are decided without it).
// It also settles the request id and the trace context, as ServeHTTP does,
// from the fields of ids (or, if nil, of one pass over the raw header that
// finds them: scanIDs).
func (x *fastExchange) fill(ctx *fasthttp.RequestCtx, found *RequestIDs) *reqview.View {
	h := &ctx.Request.Header
	var ids RequestIDs
	if found != nil {
		ids = *found
	} else {
		ids = scanIDs(h.RawHeaders())
	}
	uri := ctx.URI()
	cl := proxy.FastContentLength(h)
	v := &x.view
	*v = reqview.View{Method: b2s(h.Method()), Host: b2s(h.Host()), RawPath: b2s(uri.PathOriginal()),
		RawQuery: b2s(uri.QueryString()), ContentLength: cl, Ctx: ctx}
	v.SetHeaderSource(x)
	if q := v.RawPath; len(q) > 0 {
		if i := indexByte(q, '?'); i >= 0 { // PathOriginal is the target less the host
			v.RawPath = q[:i]
		}
	}
	v.Path = v.RawPath
	if ids.requestIDs == 1 && answer.ValidRequestID(ids.requestID) {
		v.RequestID = ids.requestID
	} else {
		v.RequestID = b2s(answer.AppendRequestID(x.idBuf[:0]))
	}
	x.id[0] = v.RequestID
	v.Trace = reqview.TraceOf(ids.traceparent, ids.traceparents, &x.trace) // carried by the header once built
	return v
}

// RequestIDs are the fields of a request's raw header that fill reads
// before anything else: X-Request-Id and traceparent, the first value of
// each (trimmed, as the header map holds it) and how many lines of each.
// An engine's pass over the raw header (the fasthttp engine's strict check)
// gathers them with Field, so that ServeFast need not pass over it again.
type RequestIDs struct {
	requestID, traceparent   string
	requestIDs, traceparents int
}

// Field notes one field of the raw header, if it is one of the ids' (names
// in any case, as the header map's canonical keys match them). value must
// stay valid and unchanged for the request (the engine's buffer).
func (r *RequestIDs) Field(name, value []byte) {
	if len(name) == len(api.HeaderRequestID) || len(name) == len(reqview.HeaderTraceparent) {
		r.field(name, value)
	}
}

func (r *RequestIDs) field(name, value []byte) {
	switch {
	case len(name) == len(api.HeaderRequestID) && proxy.EqualFoldASCII(name, api.HeaderRequestID):
		if r.requestIDs == 0 {
			r.requestID = b2s(value)
		}
		r.requestIDs++
	case len(name) == len(reqview.HeaderTraceparent) && proxy.EqualFoldASCII(name, reqview.HeaderTraceparent):
		if r.traceparents == 0 {
			r.traceparent = b2s(value)
		}
		r.traceparents++
	}
}

// scanIDs gathers the ids of raw, a whole raw header, with Field.
func scanIDs(raw []byte) RequestIDs {
	var r RequestIDs
	for len(raw) > 0 {
		name, value, rest, _ := proxy.NextRawField(raw)
		raw = rest
		r.Field(name, value)
	}
	return r
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// fastClientIP is clientIP for the fasthttp engine.
func (s *Snapshot) fastClientIP(ctx *fasthttp.RequestCtx, v *reqview.View) (netip.Addr, bool) {
	var a netip.Addr
	switch ra := ctx.RemoteAddr().(type) {
	case *net.TCPAddr:
		a = ra.AddrPort().Addr()
	default:
		if host, _, err := net.SplitHostPort(ra.String()); err == nil {
			a, _ = netip.ParseAddr(host)
		}
	}
	if len(s.trusted) == 0 {
		return a.Unmap(), false
	}
	return api.ClientIP(a, v.Header().Values("X-Forwarded-For"), s.trusted), trustedPeer(a, s.trusted)
}

func (x *fastExchange) Header() http.Header { return x.header }

// WriteHeader puts the gateway's answer header and status in the engine's
// response.
func (x *fastExchange) WriteHeader(code int) {
	if x.status != 0 {
		return
	}
	x.status = code
	x.flush()
	x.ctx.Response.SetStatusCode(code)
	if x.header.Get("Connection") == "close" {
		x.ctx.SetConnectionClose()
	}
}

// flush copies the answer header into the engine's response (once): the
// request id, the RateLimit fields (TakeRateLimit), and those of the Header map. It
// runs when the gateway answers itself (WriteHeader) and, for a forwarded
// answer, once the upstream's header is in the response (Forward).
func (x *fastExchange) flush() {
	if x.flushed {
		return
	}
	x.flushed = true
	out := &x.ctx.Response.Header
	out.DisableNormalizing() // the gateway's names are canonical already
	out.SetCanonical(hdrRequestID, s2bytes(x.view.RequestID))
	if x.rl.Taken() {
		// A name the answer does not hold yet (the upstream sent no
		// RateLimit field: the common case) is set, which skips fasthttp's
		// copy and check of the name that adding makes; otherwise the
		// field is added beside the upstream's.
		set := !holdsRateLimit(out)
		b, ends := x.rl.Append(x.rlBuf[:0])
		x.rlBuf = b
		start := 0
		for i, name := range answer.RateLimitNames {
			if set {
				out.SetCanonical(s2bytes(name), b[start:ends[i]])
			} else {
				out.AddBytesKV(s2bytes(name), b[start:ends[i]])
			}
			start = ends[i]
		}
	}
	if len(x.header) == 0 {
		return
	}
	for k, vs := range x.header {
		switch k {
		case "Content-Length":
			if len(vs) > 0 {
				if n, err := strconv.Atoi(vs[0]); err == nil {
					out.SetContentLength(n)
				}
			}
			continue
		case "Connection", api.HeaderRequestID:
			continue
		}
		for _, v := range vs {
			out.Add(k, v)
		}
	}
}

var hdrRequestID = []byte(api.HeaderRequestID)

// s2bytes is the bytes of s without a copy, for a fasthttp call that copies
// them.
func s2bytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// holdsRateLimit reports whether the answer already holds a field of one
// of the RateLimit names (answer.RateLimitNames).
func holdsRateLimit(out *fasthttp.ResponseHeader) bool {
	for k := range out.All() {
		// Most of the answer's names start with neither R nor X: one test
		// each.
		if len(k) == 0 || k[0] != 'R' && k[0] != 'X' {
			continue
		}
		for _, name := range answer.RateLimitNames {
			if string(k) == name {
				return true
			}
		}
	}
	return false
}

// TakeRateLimit takes the admitting limit's RateLimit fields for the
// answer; flush writes them with the rest.
func (x *fastExchange) TakeRateLimit(f limit.Fields) { x.rl = f }

func (x *fastExchange) Write(b []byte) (int, error) {
	if x.status == 0 {
		x.WriteHeader(http.StatusOK)
	}
	return x.ctx.Write(b)
}

func (x *fastExchange) Status() int { return x.status }

// Routed applies the route's body timeout to the client's connection before
// any rule answers (the engine reads a body only as it is forwarded).
func (x *fastExchange) Routed(u *proxy.Upstream) {
	u.GuardBodyConn(x.ctx.Conn(), proxy.FastHasBody(&x.ctx.Request.Header))
}

// fastRequest is what the forward of x's planned request needs beside the
// fasthttp context: the gateway's request id and trace context, the
// connection's TLS, the matched path, and x as the stack's side of a body
// streamed afterwards (TakeRelease) and of the request's header.
func (x *fastExchange) fastRequest() proxy.FastRequest {
	fr := proxy.FastRequest{RequestID: x.view.RequestID, TLS: x.tls, NoUpgrade: x.noUpgrade, Release: x, Header: x, Path: x.plan.m.Path}
	if t := x.view.Trace; t.Replaces() {
		fr.Traceparent, fr.KeepTracestate = t.Parent, t.Child
	}
	return fr
}

// forwardFast makes the planned forward through the fasthttp upstream
// client (off the loop: it may block) and finishes it, or, when the answer's
// body is streamed afterwards, has the body's end finish it (fastEnd).
func (x *fastExchange) forwardFast() {
	u := x.plan.rt.upstream
	out := u.ForwardFast(x, x.ctx, x.fastRequest(), x.plan.m)
	x.relay = out.Relay
	x.answered(out)
}

// answered finishes the planned forward once its answer is in the engine's
// response: the gateway's fields join the answer (a 502/504 the forward
// wrote went through WriteHeader, which flushed them), and the plan
// finishes now, or with the body streamed afterwards (fastEnd).
func (x *fastExchange) answered(out proxy.Outcome) {
	if x.status == 0 {
		x.flush()
		x.status = out.Status
	}
	if e := x.end; e != nil {
		e.out = out
		return
	}
	x.plan.finish(out, nil)
}

// TakeRelease is the forward's (proxy.FastRequest.Release), for a body
// streamed after the forward returned: a fastEnd takes the plan over and
// finishes it once the body is written.
func (x *fastExchange) TakeRelease() func(end error) {
	e := fastEnds.Get().(*fastEnd)
	e.plan = x.plan
	x.plan = Plan{}
	x.end = e
	return e.fn
}

// WriteProblemFast answers ctx's request with answer.WriteProblemID (the one
// problem writer), for the fasthttp engine's answers before a snapshot
// serves the request (strict parsing, loops, no rules yet). The request's own
// X-Request-Id is kept when valid.
func WriteProblemFast(ctx *fasthttp.RequestCtx, status int, title, detail string) {
	x := fastExchanges.Get().(*fastExchange)
	x.ctx = ctx
	id := b2s(ctx.Request.Header.Peek(api.HeaderRequestID))
	if !answer.ValidRequestID(id) {
		id = answer.NewRequestID()
	}
	x.view.RequestID = id
	answer.WriteProblemID(x, nil, id, status, title, detail)
	x.reset()
	fastExchanges.Put(x)
}

// MinBodyTimeout is the shortest bodyTimeout of the snapshot's routes
// (api.DefaultBodyTimeout for none): what an engine that reads some of a
// body before the route is known bounds that read by.
func (s *Snapshot) MinBodyTimeout() time.Duration {
	d := api.DefaultBodyTimeout
	for _, rt := range s.routes {
		if b := rt.upstream.BodyTimeout(); b > 0 && b < d {
			d = b
		}
	}
	return d
}

// MaxWriteTimeout is the longest writeTimeout of the snapshot's routes
// (api.DefaultWriteTimeout for none): how long an engine lets a connection
// shared by several routes' answers (an HTTP/2 session) take nothing before
// it ends it, no route's answer cut sooner than its own bound.
func (s *Snapshot) MaxWriteTimeout() time.Duration {
	if s.maxWrite <= 0 {
		return api.DefaultWriteTimeout
	}
	return s.maxWrite
}

// RequestHeader is the request's header as ForwardFast's net/http paths
// send it and its own answers read it (proxy.FastRequest.Header): the
// view's, with the gateway's X-Request-Id.
func (x *fastExchange) RequestHeader() http.Header {
	h := x.view.Header()
	h[api.HeaderRequestID] = x.id[:]
	return h
}

// BuildHeader is the view's header (reqview.HeaderSource), built once: the
// request's field lines (fillHeader), carrying the traceparent the gateway
// forwards in place of the client's, if any (reqview.Trace.Carry).
func (x *fastExchange) BuildHeader() http.Header {
	if !x.built {
		x.fillHeader(x.ctx.Request.Header.RawHeaders())
		x.view.Trace.Carry(x.reqH)
	}
	return x.reqH
}

// fillHeader puts the field lines of raw (the request's raw header block,
// which strictFast accepted) in x.reqH, as fasthttp's AllInOrder reads
// them: names canonicalized in place (as the raw head forwarded upstream
// carries them: see proxy's appendClientFields), values trimmed of spaces
// and tabs, each line one value in the order received. Keys and values
// point into raw. x.reqH is empty (reset), and marked built.
func (x *fastExchange) fillHeader(raw []byte) {
	x.built = true // for reset
	// Lengths of the names seen so far (all past 63 share a bit): a name
	// of a length not seen yet is new to the map, which needs no lookup.
	var seen uint64
	for len(raw) > 0 {
		name, value, rest, _ := proxy.NextRawField(raw)
		raw = rest
		if len(name) == 0 {
			continue
		}
		proxy.CanonicalizeKey(name)
		key := b2s(name)
		x.vals = append(x.vals, b2s(value))
		bit := uint64(1) << min(len(name), 63)
		if seen&bit != 0 {
			if prev, ok := x.reqH[key]; ok {
				x.reqH[key] = append(prev, x.vals[len(x.vals)-1])
				continue
			}
		}
		seen |= bit
		x.reqH[key] = x.vals[len(x.vals)-1 : len(x.vals) : len(x.vals)]
	}
}
