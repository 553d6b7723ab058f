package proxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/answer"
)

// This file is the fasthttp side of Upstream: ForwardFast forwards a request
// the fasthttp engine parsed to an HTTP/1.1 target through a fasthttp
// HostClient (one keep-alive pool per origin, beside the origin's
// http.Transport), streaming both bodies. It keeps Forward's rules: the same
// target choice, X-Forwarded-*, Via, X-Request-Id and traceparent, the same
// hop-by-hop removal, only WebSocket may switch protocols, and the same
// Outcome meanings (502, 504, 408 for a stalled client body, 499 for a
// client gone). A chunked answer's trailers are relayed to an HTTP/1.1
// client, as ReverseProxy relays them (see forwardFast).

// fastClients holds the fasthttp pool of each origin (key *origin): made on
// first use, closed when the origin is released (Transport.release).
var fastClients sync.Map

// fastClient returns t's origin's fasthttp pool.
func (t *target) fastClient() *fastPool {
	if c, ok := fastClients.Load(t.origin); ok {
		return c.(*fastPool)
	}
	d := t.tr.dialer
	dial := func(addr string) (net.Conn, error) { return d.Dial("tcp", addr) }
	if t.scheme == "https" {
		dial = func(addr string) (net.Conn, error) {
			c, err := d.Dial("tcp", addr)
			if err != nil {
				return nil, err
			}
			return tlsClient(c, t), nil
		}
	}
	p := newFastPool(t.hostPort(), dial, t.tr.settings.IdleConnTimeout, 1<<14)
	c, _ := fastClients.LoadOrStore(t.origin, p)
	return c.(*fastPool)
}

// closeFast closes o's fasthttp pool's idle connections and forgets it.
func closeFast(o *origin) {
	if c, ok := fastClients.LoadAndDelete(o); ok {
		c.(*fastPool).close()
	}
}

// hostPort is the target's address with its port.
func (t *target) hostPort() string {
	if _, _, err := net.SplitHostPort(t.host); err == nil {
		return t.host
	}
	if t.scheme == "https" {
		return net.JoinHostPort(t.host, "443")
	}
	return net.JoinHostPort(t.host, "80")
}

// FastRequest is what ForwardFast needs of the request beside the fasthttp
// context: what the serving stack decided for it.
type FastRequest struct {
	// RequestID is the request's X-Request-Id (sent upstream and back).
	RequestID string
	// Traceparent, when not empty, is sent upstream in place of the
	// client's traceparent: a trace the gateway started (the client's
	// tracestate is dropped with it), or with KeepTracestate, the
	// traceparent of the gateway's span in the client's trace (its
	// tracestate goes on), so that the upstream's spans nest under it.
	Traceparent string
	// KeepTracestate keeps the client's tracestate beside Traceparent.
	KeepTracestate bool
	// TLS tells whether the client connection is TLS (X-Forwarded-Proto).
	TLS bool
	// NoUpgrade, when set, says the request has no Upgrade field (the
	// serving stack saw none): ForwardFast does not look for one.
	NoUpgrade bool
	// Release, when not nil, gives the function to call once the response
	// is written: ForwardFast takes it (TakeRelease, at most once) only when
	// the body is streamed after it returns, and calls it with how the body
	// ended: nil when whole, ErrClientStopped when the client stopped taking
	// it, else the error that cut it off (see Upstream.EndFast).
	Release Releaser
	// Header gives the request's header (net/http's form) to the paths
	// that read it: targets served through the net/http path (h2c,
	// https://), and the gateway's own answers (502, 504, 408), which read
	// Accept and gRPC's content type. It is asked only then. Path is the
	// matched path, for the net/http path.
	Header RequestHeader
	Path   string

	bal *balancer // set by ForwardFast: the balancer a streamed body reports to
	ti  int       // and the target it picked
}

// RequestHeader is the serving stack's side of FastRequest.Header.
type RequestHeader interface {
	// RequestHeader returns the request's header as it is forwarded on
	// net/http's path: canonical keys, the gateway's X-Request-Id and
	// trace context.
	RequestHeader() http.Header
}

// header is fr's request header, or nil without one.
func (fr *FastRequest) header() http.Header {
	if fr.Header == nil {
		return nil
	}
	return fr.Header.RequestHeader()
}

// LoopExchange is the serving stack's side of ForwardLoop (the event-loop
// engine's forward, Linux only).
type LoopExchange interface {
	// LoopDone is called on the loop, once, after ForwardLoop returned,
	// when the exchange has an answer in the client's response
	// (ctx.Response): a whole one, or one whose body is a stream
	// (ctx.Response.IsBodyStream) for the caller to write from a
	// goroutine; the exchange then ends when that body does
	// (FastRequest.Release).
	LoopDone(o Outcome)
}

// Releaser is the serving stack's side of a response whose body is
// written after ForwardFast returned (FastRequest.Release).
type Releaser interface {
	TakeRelease() func(end error)
}

// hopHeaders are removed from forwarded requests and responses (RFC 9110
// §7.6.1), as httputil.ReverseProxy does, with Expect on requests: the
// engine answered a client's "Expect: 100-continue" itself, and the body is
// sent upstream as it comes. (Expect is never in a response.) Trailer is
// not hop-by-hop (RFC 9110 §6.6.2), but it goes with a framing the gateway
// may change: a response keeps it only when its trailers are relayed
// (scrubFastResponse).
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Expect"}

// ForwardFast is Forward for the fasthttp engine: it sends ctx's request to
// the next target on m.Path and puts the answer in ctx.Response, whose body
// the engine then streams from the upstream as the client takes it. w is the
// exchange's writer, for the gateway's own answers (502, 504, 408). The
// route's timeout bounds the whole exchange (one deadline on the upstream
// connection, body included, and the latest the client's body is waited
// for: a body that stalls when it passes is answered 504); the client's
// body is bounded by bodyTimeout (408) and the client's reading by
// writeTimeout, both progress timeouts on the client's connection.
//
// A response cut off mid-body (the upstream failed or its deadline passed)
// closes the client's connection without completing the response; that
// happens after ForwardFast returned, so the Outcome reports the status the
// client got.
//
// A chunked answer goes to an HTTP/1.1 client chunked, with its trailers:
// the upstream's Trailer field (less X-Request-Id, the gateway's header
// field), and the trailer fields that arrive, declared or not, written
// after the body. A field fasthttp refuses in a trailer section (its
// isBadTrailer list) ends the body without that section, and one the
// Trailer field declares fails the answer (502). An HTTP/1.0 client, and an
// answer with Content-Length, get no trailers and no Trailer field.
func (u *Upstream) ForwardFast(w http.ResponseWriter, ctx *fasthttp.RequestCtx, fr FastRequest, m Match) Outcome {
	start := time.Now()
	// Every target of a route speaks its protocol (upstream.protocol).
	// Only cleartext HTTP/1.1 targets go through fasthttp's client: h2c
	// targets need the HTTP/2 transport, and https:// ones the route's
	// upstream.tls (CA, server name) and ALPN (h2 or http/1.1), which are
	// net/http's transports (transport_h2.go). Those go through net/http's
	// path, bridged (Forward picks the target and reports its outcome to
	// the balancer).
	if t0 := u.targets[0]; fr.Header != nil && (t0.scheme != "http" ||
		(t0.origin.rt.Protocols != nil && t0.origin.rt.Protocols.UnencryptedHTTP2())) {
		return u.forwardBridged(ctx, fr, m, start)
	}
	// The balancer picks the target (least outstanding, healthy) and hears
	// how it went, as on net/http's path (Forward): when the exchange ends,
	// which for a body streamed after ForwardFast returned is when that body
	// ends (fastRespBody.Close), so that the target counts as outstanding
	// meanwhile, as Forward's does.
	ti := u.balance.pick()
	fr.bal, fr.ti = u.balance, ti
	o := u.forwardFast(w, ctx, fr, m, u.targets[ti], start)
	if !o.streamed {
		u.balance.done(ti, o.Err != nil || o.Status >= 500, o.ClientGone)
	}
	return o
}

// forwardFast is ForwardFast to target t of an HTTP/1.1 route.
func (u *Upstream) forwardFast(w http.ResponseWriter, ctx *fasthttp.RequestCtx, fr FastRequest, m Match, t *target, start time.Time) Outcome {
	in := &ctx.Request
	upgrade := !fr.NoUpgrade && len(in.Header.Peek("Upgrade")) > 0
	if upgrade && isWebSocket(&in.Header) {
		return u.forwardUpgradeFast(w, ctx, fr, t, m, start)
	}
	var body *fastReqBody
	// The upstream's answer is read straight into the client's response
	// (doInto): its header parsed once, in place, then cleaned of what must
	// not pass (scrubFastResponse).
	out := &ctx.Response
	clientClose := out.ConnectionClose()
	var s *fastStream
	var err error
	if !upgrade && !FastHasBody(&in.Header) {
		// No body: the head is written in one pass over the client's raw
		// header (appendFastHead).
		hb := fastHeads.Get().(*fastHead)
		hb.b = u.appendFastHead(hb.b[:0], ctx, fr, t, m)
		s, err = t.fastClient().doInto(fastOut{head: hb.b, header: &in.Header, isHead: in.Header.IsHead()}, out, start, start.Add(u.timeout))
		fastHeads.Put(hb)
	} else {
		req := fasthttp.AcquireRequest()
		defer fasthttp.ReleaseRequest(req)
		u.buildFastRequest(req, ctx, fr, t, m)
		if upgrade {
			// A protocol switch was asked and removed: an upstream that
			// switches anyway must not leave a tunnel in the pool.
			req.SetConnectionClose()
		}
		if FastHasBody(&in.Header) {
			cl := in.Header.ContentLength()
			if bs := ctx.RequestBodyStream(); bs != nil {
				body = &fastReqBody{r: bs, conn: ctx.Conn(), timeout: u.bodyTimeout, due: start.Add(u.timeout)}
				req.SetBodyStream(body, cl)
			} else {
				req.SetBodyRaw(in.Body())
			}
		}
		s, err = t.fastClient().doInto(fastOut{req: req, isHead: req.Header.IsHead()}, out, start, start.Add(u.timeout))
	}
	o := Outcome{}
	if err != nil {
		resetFastResponse(out, clientClose)
		o.Err = err
		if body != nil {
			// The client's body may be half read: the connection cannot
			// carry another request.
			ctx.SetConnectionClose()
		}
		switch {
		case body != nil && body.timedOut:
			w.Header().Set("Connection", "close")
			answer.WriteProblemID(w, fr.header(), fr.RequestID, http.StatusRequestTimeout, "Request timeout", u.bodyDetail)
			o.ClientGone, o.Status, o.Err = true, http.StatusRequestTimeout, nil
		case body != nil && body.failed:
			// The client's body broke its framing (a bad chunk) or ended
			// early: refused, and the connection closed after the answer.
			w.Header().Set("Connection", "close")
			answer.WriteProblemID(w, fr.header(), fr.RequestID, http.StatusBadRequest, "Bad request", "the request body is malformed or incomplete")
			o.ClientGone, o.Status, o.Err = true, http.StatusBadRequest, nil
		case errors.Is(err, fasthttp.ErrTimeout) || isTimeout(err):
			answer.WriteProblemID(w, fr.header(), fr.RequestID, http.StatusGatewayTimeout, "Gateway timeout", u.timeoutDetail)
			o.Status, o.Timeout = http.StatusGatewayTimeout, true
		default:
			answer.WriteProblemID(w, fr.header(), fr.RequestID, http.StatusBadGateway, "Bad gateway", "the upstream could not be reached")
			o.Status = http.StatusBadGateway
		}
		o.Duration = time.Since(start)
		u.log.Debug("upstream exchange failed", "route", u.routeID, "target", t.url, "status", o.Status,
			"timeout", o.Timeout, "err", err)
		return o
	}
	if s == nil {
		// A whole answer: the engine writes it after the handler, bounded
		// by the route's writeTimeout (a streamed one, by fastRespBody as
		// it goes), not by the engine's default.
		_ = ctx.SetWriteDeadline(time.Now().Add(u.writeTimeout))
	}
	return u.relayFast(w, ctx, fr, s, clientClose, start)
}

// relayFast finishes an exchange whose answer's header the upstream client
// read into the client's response (ctx.Response): s is its body's stream,
// nil when it has none or it was read into the response already. The
// answer is cleaned of what must not pass (scrubFastResponse) and, with a
// body to stream, given a body stream the engine writes from (fastRespBody:
// it ends the exchange, FastRequest.Release, when the body ends). A switch of
// protocols nobody asked for is answered 502 instead (the upstream client
// does not pool such a connection).
func (u *Upstream) relayFast(w http.ResponseWriter, ctx *fasthttp.RequestCtx, fr FastRequest, s *fastStream, clientClose bool, start time.Time) Outcome {
	in, out := &ctx.Request, &ctx.Response
	status := out.StatusCode()
	if status == http.StatusSwitchingProtocols || status < 200 && status != 0 {
		// Only a requested WebSocket may switch (forwardUpgradeFast). (The
		// pool closed the connection, and a 1xx has no body: s is nil.)
		resetFastResponse(out, true)
		ctx.SetConnectionClose()
		answer.WriteProblemID(w, fr.header(), fr.RequestID, http.StatusBadGateway, "Bad gateway", "the upstream switched protocols unasked")
		return Outcome{Status: http.StatusBadGateway, Err: errFastSwitch, Duration: time.Since(start)}
	}
	// A chunked answer's trailers go to an HTTP/1.1 client, which gets it
	// chunked too: its Trailer field stays, and the fields come after the
	// body (fastRespBody.Read). (An HTTP/1.0 client gets neither.)
	trailers := s != nil && s.cl == -1 && in.Header.IsHTTP11()
	scrubFastResponse(out, clientClose, trailers)
	if trailers && len(out.Header.PeekTrailerKeys()) > 0 {
		undeclareID(&out.Header)
	}
	if s == nil {
		// No body (HEAD, 204, 304, or an empty one), or a small one doInto
		// read into the response: a HEAD's answer keeps the upstream's
		// Content-Length.
		out.SkipBody = in.Header.IsHead()
		return Outcome{Status: status, Duration: time.Since(start)}
	}
	cl := s.cl
	if cl < -1 {
		cl = -1
	}
	rb := fastRespBodies.Get().(*fastRespBody)
	rb.s, rb.cl, rb.w = s, cl, clientWrites{conn: ctx.Conn(), timeout: u.writeTimeout}
	rb.bal, rb.ti, rb.status = fr.bal, fr.ti, status
	if trailers {
		rb.trailer = &out.Header
	}
	if fr.Release != nil {
		rb.release = fr.Release.TakeRelease()
	}
	out.SetBodyStream(rb, cl)
	return Outcome{Status: status, Duration: time.Since(start), streamed: fr.bal != nil}
}

// resetFastResponse empties the client's response of what doInto read into
// it, for the gateway to answer instead; close tells whether the client's
// connection is to close after the answer (as it was set before doInto, or
// from now on).
func resetFastResponse(out *fasthttp.Response, close bool) {
	out.ResetBody()
	out.Header.Reset()
	out.Header.SetNoDefaultContentType(true) // the engine's setting (the gateway sets its own)
	out.SkipBody = false
	if close {
		out.SetConnectionClose()
	}
}

// scrubFastResponse cleans the upstream's answer doInto read into the
// client's response: hop-by-hop fields and the names its Connection lists go
// (RFC 9110 §7.6.1), with the upstream's X-Request-Id (the gateway sets the
// client's, once) and its protocol version and reason phrase (the client's
// status line is the gateway's: HTTP/1.1 and the status's standard
// phrase); the upstream's Connection: close is its own connection's, not
// the client's (clientClose is whether the client's was to close). Its Date
// is replaced by the engine's, and Content-Length and Transfer-Encoding
// follow the body the engine writes. Trailer, which is not hop-by-hop (RFC
// 9110 §6.6.2) but declares fields the body's end brings, stays when
// trailers tells that they are relayed (the answer goes out chunked with
// them).
func scrubFastResponse(out *fasthttp.Response, clientClose, trailers bool) {
	h := &out.Header
	if h.ConnectionClose() {
		h.ResetConnectionClose()
	}
	// The names were normalized as the answer was parsed, and the
	// gateway's are canonical: none needs normalizing again.
	h.DisableNormalizing()
	var (
		del    [8][]byte // to delete
		listed [8][]byte // the tokens of Connection that name other fields
		nd, nl int
	)
	for k, v := range h.All() {
		if !isHopOrID(k) || trailers && string(k) == "Trailer" {
			continue
		}
		if nd < len(del) {
			del[nd] = k
			nd++
		}
		if string(k) != "Connection" || EqualFoldASCII(v, "keep-alive") {
			continue // the common Connection: nothing more to delete
		}
		for len(v) > 0 && nl < len(listed) {
			var tok []byte
			tok, v, _ = bytes.Cut(v, []byte{','})
			// "close", "keep-alive" (a hop-by-hop field itself): nothing
			// more to delete for them.
			if tok = bytes.TrimSpace(tok); len(tok) > 0 && !bytes.EqualFold(tok, strClose) && !isHopName(tok) {
				listed[nl] = tok
				nl++
			}
		}
	}
	if nl > 0 {
		// Rare: Connection names fields of the answer's own; they are
		// found by name (any case) before anything is deleted.
		for k := range h.All() {
			if nd < len(del) && listedIn(k, listed[:nl]) {
				del[nd] = k
				nd++
			}
		}
	}
	for _, k := range del[:nd] {
		h.DelBytes(k)
	}
	if len(h.Protocol()) > 0 && string(h.Protocol()) != "HTTP/1.1" || len(h.StatusMessage()) > 0 {
		h.SetProtocol(nil)
		h.SetStatusMessage(nil)
	}
	if clientClose {
		h.SetConnectionClose()
	}
}

var strClose = []byte("close")

// undeclareID takes X-Request-Id out of the trailer names h declares (the
// upstream's Trailer field): the gateway sets the client's in the header,
// after ForwardFast, and fasthttp would put a declared name's value in the
// trailer section instead.
func undeclareID(h *fasthttp.ResponseHeader) {
	names := h.PeekTrailerKeys()
	i := slices.IndexFunc(names, func(k []byte) bool { return string(k) == api.HeaderRequestID })
	if i < 0 {
		return
	}
	var list []byte
	for j, k := range names {
		if j != i {
			if len(list) > 0 {
				list = append(list, ", "...)
			}
			list = append(list, k...)
		}
	}
	if len(list) == 0 {
		h.Del("Trailer")
		return
	}
	_ = h.SetTrailerBytes(list) // names fasthttp accepted already
}

// isHopName reports whether tok names a hop-by-hop field (hopHeaders), in
// any case.
func isHopName(tok []byte) bool {
	if len(tok) < 2 || len(tok) > len("Proxy-Authorization") {
		return false
	}
	for _, h := range hopHeaders {
		if EqualFoldASCII(tok, h) {
			return true
		}
	}
	return false
}

// isHopOrID reports whether a response's field name (as fasthttp
// normalized it) is hop-by-hop (hopHeaders) or X-Request-Id: the fields
// scrubFastResponse always removes.
func isHopOrID(k []byte) bool {
	switch len(k) {
	case 2:
		return string(k) == "Te"
	case 7:
		return string(k) == "Trailer" || string(k) == "Upgrade"
	case 10:
		return string(k) == "Connection" || string(k) == "Keep-Alive"
	case 12:
		return string(k) == api.HeaderRequestID
	case 16:
		return string(k) == "Proxy-Connection"
	case 17:
		return string(k) == "Transfer-Encoding"
	case 18:
		return string(k) == "Proxy-Authenticate"
	case 19:
		return string(k) == "Proxy-Authorization"
	case 6:
		return string(k) == "Expect"
	}
	return false
}

// smallBody is the largest response body of known length ForwardFast reads
// before answering (doInto), to send it with the header in one write.
const smallBody = 16 << 10

var (
	errFastSwitch = errors.New("the upstream switched protocols unasked")
)

// errRouteDeadline fails a read of the client's body that the route's
// deadline (its timeout) ended: a timeout (net.Error), but not the client's
// stall (os.ErrDeadlineExceeded, which bodyTimeout answers 408).
type errRouteDeadline struct{}

func (errRouteDeadline) Error() string {
	return "the route's timeout passed while the request body was read"
}
func (errRouteDeadline) Timeout() bool   { return true }
func (errRouteDeadline) Temporary() bool { return false }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded)
}

// buildFastRequest fills req with ctx's request as it goes to t: the
// client's header less hop-by-hop fields, the forwarded path and query, the
// target's Host, X-Forwarded-For/Host/Proto, Via, X-Request-Id and the
// trace context.
func (u *Upstream) buildFastRequest(req *fasthttp.Request, ctx *fasthttp.RequestCtx, fr FastRequest, t *target, m Match) {
	in := &ctx.Request.Header
	in.CopyTo(&req.Header)
	h := &req.Header
	// One pass finds the client's fields that go no further (hop-by-hop,
	// and those the gateway sets: see gatewaySets, shared with
	// appendFastHead), and only those present are deleted, every line of
	// each (a second X-Forwarded-For or X-Request-Id line must not survive
	// beside the gateway's).
	tm := fr.traceMode()
	var gone [16][]byte
	n, xffSent, conn := 0, false, false
	for k := range in.All() {
		switch gatewaySets(k, tm) {
		case setXFF:
			xffSent = true
		case setKeep:
			continue
		}
		if string(k) == "Connection" {
			conn = true
		}
		if string(k) != "Host" && n < len(gone) {
			gone[n] = k
			n++
		} else if n == len(gone) {
			n++ // more than gone holds: every such name is deleted below
		}
	}
	if n > len(gone) {
		for _, k := range gatewayNames {
			h.Del(k)
		}
		if tm != traceKept {
			h.Del("Traceparent")
		}
		if tm == traceStarted {
			h.Del("Tracestate")
		}
		n = 0
	}
	for _, k := range gone[:n] {
		h.DelBytes(k)
	}
	if conn {
		// Names listed in Connection are hop-by-hop too.
		for _, c := range in.PeekAll("Connection") {
			for len(c) > 0 {
				var tok []byte
				tok, c, _ = bytes.Cut(c, []byte{','})
				if tok = bytes.TrimSpace(tok); len(tok) > 0 {
					h.DelBytes(tok)
				}
			}
		}
	}
	h.ResetConnectionClose() // a client's "Connection: close" is its own
	// Every name set below is in canonical form already.
	h.DisableNormalizing()

	buf := fastURIs.Get().(*fastURI)
	b := append(buf.b[:0], u.forwardPath(t, m.Path)...)
	if q := ctx.URI().QueryString(); len(q) > 0 {
		b = append(append(b, '?'), q...)
	}
	h.SetRequestURIBytes(b)
	buf.b = b
	fastURIs.Put(buf)
	h.SetHost(t.host)
	if t.scheme == "https" {
		req.URI().SetScheme("https")
	}

	// X-Forwarded-For: what the client sent, then the peer.
	xff := fastURIs.Get().(*fastURI)
	x := xff.b[:0]
	if xffSent {
		for i, v := range in.PeekAll("X-Forwarded-For") {
			if i > 0 {
				x = append(x, ", "...)
			}
			x = append(x, v...)
		}
		if len(x) > 0 {
			x = append(x, ", "...)
		}
	}
	x = appendPeerIP(x, ctx)
	h.SetBytesV("X-Forwarded-For", x)
	xff.b = x
	fastURIs.Put(xff)
	h.SetBytesV("X-Forwarded-Host", in.Host())
	if fr.TLS {
		h.Set("X-Forwarded-Proto", "https")
	} else {
		h.Set("X-Forwarded-Proto", "http")
	}
	minor := 1
	if !in.IsHTTP11() {
		minor = 0
	}
	h.Add("Via", t.tr.viaValue(1, minor))
	h.Set(api.HeaderRequestID, fr.RequestID)
	if tm != traceKept {
		h.Set("Traceparent", fr.Traceparent) // the client's is gone (and its Tracestate, for a trace started here)
	}
}

// forwardPath is the path the target receives: path less the stripped
// prefix, behind the target's base path, escapes as matched.
func (u *Upstream) forwardPath(t *target, path string) string {
	p := path
	if u.strip != "" {
		if rest, ok := cutPrefix(p, u.strip); ok {
			if rest == "" || rest[0] != '/' {
				rest = "/" + rest
			}
			p = rest
		}
	}
	if t.base != "" {
		p = t.base + p
	}
	return p
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):], true
	}
	return s, false
}

// appendPeerIP appends the client connection's address, without its port.
func appendPeerIP(dst []byte, ctx *fasthttp.RequestCtx) []byte {
	switch ra := ctx.RemoteAddr().(type) {
	case *net.TCPAddr:
		return ra.AddrPort().Addr().Unmap().AppendTo(dst)
	default:
		host, _, err := net.SplitHostPort(ra.String())
		if err != nil {
			return dst
		}
		return append(dst, host...)
	}
}

// tlsClient starts TLS with t over c (for a WebSocket to an https target).
func tlsClient(c net.Conn, t *target) net.Conn {
	cfg := &tls.Config{}
	if s := t.tr.settings.TLSClientConfig; s != nil {
		cfg = s.Clone()
	}
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(t.host)
		if err != nil {
			host = t.host
		}
		cfg.ServerName = host
	}
	cfg.NextProtos = []string{"http/1.1"}
	return tls.Client(c, cfg)
}

type fastURI struct{ b []byte }

var fastURIs = sync.Pool{New: func() any { return &fastURI{b: make([]byte, 0, 256)} }}

// fastReqBody is the client's request body as the upstream client reads it:
// each read first renews the client connection's read deadline (at most
// every quarter of the timeout), so a body that stops arriving fails after
// timeout without progress (timedOut). The deadline is never later than
// due, the route's deadline for the whole exchange: a body that stalls when
// it passes fails then, as the route's timeout (a timeout error, not
// timedOut), since the upstream client sends the body before it reads the
// answer and would otherwise wait in this read. It is read on the
// request's goroutine.
type fastReqBody struct {
	r        io.Reader
	conn     net.Conn
	timeout  time.Duration
	due      time.Time // the route's deadline; zero for none
	last     time.Time
	timedOut bool
	failed   bool
}

func (b *fastReqBody) Read(p []byte) (int, error) {
	if b.timeout > 0 {
		if now := time.Now(); now.Sub(b.last) >= b.timeout/4 {
			d := now.Add(b.timeout)
			if !b.due.IsZero() && b.due.Before(d) {
				d = b.due
			}
			_ = b.conn.SetReadDeadline(d)
			b.last = now
		}
	}
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		switch {
		case isTimeout(err) && !b.due.IsZero() && !time.Now().Before(b.due):
			// The route's deadline passed: its 504, not the client's 408
			// (a timeout still, but not the client's read deadline, for
			// the bridged Forward's bodyReader).
			err = errRouteDeadline{}
		case isTimeout(err):
			b.timedOut = true
		default:
			b.failed = true
		}
	}
	return n, err
}

// fastRespBody is the upstream's response body as the engine writes it to
// the client: each read that brings bytes renews the client connection's
// write deadline (clientWrites), and Close (called by the
// engine when the response is done) returns the upstream connection to its
// pool, or closes it when the body was not read to its end, and reports how
// the body ended to release (FastRequest.Release).
type fastRespBody struct {
	s       *fastStream // the upstream's body (doInto's), closed with it
	cl      int         // its length, -1 for unknown
	w       clientWrites
	release func(end error) // FastRequest.Release, when taken
	bal     *balancer       // reported to when the body ends, when not nil,
	ti      int             // for this target,
	status  int             // of this status
	n       int             // bytes read
	eof     bool            // the body was read to its end
	err     error           // the upstream's read error, when it failed
	// trailer, when not nil, is the client's response header, whose
	// trailer section gets the upstream's trailer fields, declared or
	// not, when the body ends (the engine writes it after the body).
	trailer *fasthttp.ResponseHeader
}

// clientWrites bounds the writes of an answer's body to the client by the
// route's writeTimeout: each read that brings bytes (progress) moves the
// connection's write deadline to now + timeout, at most every quarter of
// it, for the write that follows. The wait for the upstream's next bytes (a
// quiet event stream) is not the client's to bound, nor is the whole
// answer's length; a write that makes no progress for between 3/4 and all
// of timeout fails.
type clientWrites struct {
	conn    net.Conn
	timeout time.Duration
	last    time.Time
}

func (c *clientWrites) progress() {
	if c.timeout <= 0 {
		return
	}
	if now := time.Now(); now.Sub(c.last) >= c.timeout/4 {
		_ = c.conn.SetWriteDeadline(now.Add(c.timeout))
		c.last = now
	}
}

// end clears the deadline progress set: the connection's next request
// starts without this one's (the engine sets its own, WriteTimeout, per
// answer).
func (c *clientWrites) end() {
	if !c.last.IsZero() {
		_ = c.conn.SetWriteDeadline(time.Time{})
	}
}

var fastRespBodies = sync.Pool{New: func() any { return new(fastRespBody) }}

func (b *fastRespBody) Read(p []byte) (int, error) {
	n, err := b.s.Read(p)
	if n > 0 {
		b.w.progress()
	}
	b.n += n
	switch {
	case err == io.EOF:
		b.eof = true
		if b.trailer != nil {
			b.endTrailer()
		}
	case err != nil && b.err == nil:
		b.err = err
	}
	return n, err
}

// endTrailer adds the fields of the upstream's trailer section to the
// client's response's, once: each name is declared first (the header is
// out: declaring moves nothing, and an undeclared field is relayed as
// net/http's ReverseProxy relays one), so that its value goes to the
// trailer section.
func (b *fastRespBody) endTrailer() {
	h := b.trailer
	b.trailer = nil
	for raw := b.s.trailer(); len(raw) > 0; {
		var name, value []byte
		name, value, raw, _ = NextRawField(raw)
		if len(name) > 0 {
			addTrailerField(h, name, value)
		}
	}
}

// addTrailerField adds a trailer field to h, a client's response whose
// header is out (fasthttp is writing its body): the name is declared first
// (a name declared already, as the Trailer field declared it, is left as it
// is; declaring moves nothing now that the header is out), so that the value
// goes to the trailer section fasthttp writes after the last chunk. A name
// fasthttp refuses in a trailer (its isBadTrailer list) is left out.
func addTrailerField(h *fasthttp.ResponseHeader, name, value []byte) {
	if h.AddTrailerBytes(name) == nil {
		h.AddBytesKV(name, value)
	}
}

func (b *fastRespBody) Close() error {
	if b.s == nil {
		return nil
	}
	end := b.err
	if cl := b.cl; end == nil && !b.eof && (cl < 0 || b.n < cl) {
		// The engine stopped writing the body before its end: its write
		// to the client failed (gone, or writeTimeout).
		end = ErrClientStopped
	}
	err := b.s.Close()
	b.w.end()
	if b.bal != nil {
		// The exchange is over: a body the upstream cut off is a failure,
		// one the client stopped taking no fault of the target's.
		stopped := errors.Is(end, ErrClientStopped)
		b.bal.done(b.ti, b.status >= 500 || end != nil && !stopped, stopped)
	}
	if b.release != nil {
		b.release(end)
	}
	*b = fastRespBody{}
	fastRespBodies.Put(b)
	return err
}

// isWebSocket reports whether the request asks to switch to WebSocket (an
// Upgrade header listing it, any case).
func isWebSocket(h *fasthttp.RequestHeader) bool {
	for _, line := range h.PeekAll("Upgrade") {
		for len(line) > 0 {
			var tok []byte
			tok, line, _ = bytes.Cut(line, []byte{','})
			if bytes.EqualFold(bytes.TrimSpace(tok), []byte("websocket")) {
				return true
			}
		}
	}
	return false
}

// forwardUpgradeFast forwards a WebSocket handshake over a connection of its
// own to t and, when the upstream switches (101), returns the relay that
// joins the two connections (Outcome.Relay), which the engine runs once it
// has written the 101. The route's timeout bounds the handshake only.
func (u *Upstream) forwardUpgradeFast(w http.ResponseWriter, ctx *fasthttp.RequestCtx, fr FastRequest, t *target, m Match, start time.Time) Outcome {
	fail := func(status int, err error) Outcome {
		if status == http.StatusGatewayTimeout {
			answer.WriteProblemID(w, fr.header(), fr.RequestID, status, "Gateway timeout", u.timeoutDetail)
		} else {
			answer.WriteProblemID(w, fr.header(), fr.RequestID, status, "Bad gateway", "the upstream could not be reached")
		}
		return Outcome{Status: status, Err: err, Timeout: status == http.StatusGatewayTimeout, Duration: time.Since(start)}
	}
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	u.buildFastRequest(req, ctx, fr, t, m)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	deadline := start.Add(u.timeout)
	var up net.Conn
	var err error
	if t.scheme == "https" {
		up, err = t.tr.dialer.Dial("tcp", t.hostPort())
		if err == nil {
			up = tlsClient(up, t)
		}
	} else {
		up, err = t.tr.dialer.Dial("tcp", t.hostPort())
	}
	if err != nil {
		return fail(http.StatusBadGateway, err)
	}
	_ = up.SetDeadline(deadline)
	bw := bufio.NewWriter(up)
	if err := req.Header.Write(bw); err == nil {
		err = bw.Flush()
	}
	br := bufio.NewReader(up)
	// The answer's header is read into the client's response, as
	// ForwardFast's are (scrubFastResponse).
	hdr := &ctx.Response.Header
	clientClose := hdr.ConnectionClose()
	if err == nil {
		err = hdr.Read(br)
	}
	if err != nil {
		resetFastResponse(&ctx.Response, clientClose)
		up.Close()
		if isTimeout(err) {
			return fail(http.StatusGatewayTimeout, err)
		}
		return fail(http.StatusBadGateway, err)
	}
	if status := hdr.StatusCode(); status != http.StatusSwitchingProtocols {
		// Refused: relay the answer (its body, if any, as a plain one).
		defer up.Close()
		cl := hdr.ContentLength()
		scrubFastResponse(&ctx.Response, true, false)
		if cl > 0 && cl <= 1<<20 {
			b := make([]byte, cl)
			if _, err := io.ReadFull(br, b); err == nil {
				ctx.Response.SetBodyRaw(b)
			}
		} else {
			hdr.SetContentLength(0)
		}
		return Outcome{Status: status, Duration: time.Since(start)}
	}
	_ = up.SetDeadline(time.Time{})
	// The 101 is written by the engine with the upstream's header; then
	// the connections are joined.
	scrubFastResponse(&ctx.Response, false, false)
	ctx.Response.Header.Set("Connection", "Upgrade")
	ctx.Response.Header.Set("Upgrade", "websocket")
	ctx.Response.SetStatusCode(http.StatusSwitchingProtocols)
	ctx.Response.SkipBody = true
	relay := func(c net.Conn) {
		_ = c.SetDeadline(time.Time{})
		done := make(chan struct{}, 2)
		go func() { _, _ = io.Copy(up, c); closeWrite(up); done <- struct{}{} }()
		go func() {
			if n := br.Buffered(); n > 0 {
				b, _ := br.Peek(n)
				_, _ = c.Write(b)
			}
			_, _ = io.Copy(c, up)
			closeWrite(c)
			done <- struct{}{}
		}()
		<-done
		<-done
		up.Close()
	}
	return Outcome{Status: http.StatusSwitchingProtocols, Upgraded: true, Relay: relay, Duration: time.Since(start)}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// FastContentLength is the body length of a request the fasthttp engine
// parsed, as net/http gives it: its Content-Length, -1 for chunked (unknown),
// and 0 for a request with neither header, which fasthttp reports as -2
// ("identity") but which for a request means no body (RFC 9112 §6.3).
func FastContentLength(h *fasthttp.RequestHeader) int64 {
	switch cl := h.ContentLength(); {
	case cl >= 0:
		return int64(cl)
	case cl == -1:
		return -1
	}
	return 0
}

// FastHasBody reports whether a request the fasthttp engine parsed has a
// body (FastContentLength not 0). "ContentLength() != 0" is not the test:
// it took every GET for a request with a body.
func FastHasBody(h *fasthttp.RequestHeader) bool { return FastContentLength(h) != 0 }

// GuardBodyConn is GuardBody for an engine that hands over the client's
// connection: it bounds the wait for a body (hasBody) by the route's
// bodyTimeout.
func (u *Upstream) GuardBodyConn(c net.Conn, hasBody bool) {
	GuardBodyConn(c, hasBody, u.bodyTimeout)
}

// GuardBodyConn is Upstream.GuardBodyConn with an explicit timeout, for
// requests no route matched.
func GuardBodyConn(c net.Conn, hasBody bool, timeout time.Duration) {
	if !hasBody || timeout <= 0 || c == nil {
		return
	}
	_ = c.SetReadDeadline(time.Now().Add(timeout))
}

// BodyTimeout returns the route's bound on a stalled client body.
func (u *Upstream) BodyTimeout() time.Duration { return u.bodyTimeout }
