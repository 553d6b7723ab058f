package proxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/valyala/fasthttp"
)

// This file is the client of Forward (httputil.ReverseProxy) for cleartext
// HTTP/1.1 targets: the origin's fastPool (fasthttp's request writer and
// response parser over a keep-alive pool of its own) in place of
// net/http's Transport, whose two goroutines per connection (readLoop,
// writeLoop) and channel handoffs cost most of an HTTP/2 request's
// forwarding. Only the client changes: Forward's rules (recorder, timeouts,
// X-Forwarded-*, Via, hop-by-hop, error answers, Outcome) are ReverseProxy's
// and Forward's as before.

// roundTripper is the client t's exchanges go through (relay.go, and
// ReverseProxy for HTTP/1 requests), chosen here once for all: the
// origin's fastPool (fastTransport) for cleartext HTTP/1.1 targets (scheme
// http, protocol http1), its x/net/http2 Transport for h2 and h2c targets
// (newH2Transport: streams multiplexed), and its http.Transport for the
// others (https with ALPN's choice), which fastPool does not speak.
func (t *target) roundTripper() http.RoundTripper {
	if t.origin.h2 != nil {
		return t.origin.h2
	}
	p := t.origin.rt.Protocols
	if t.scheme != "http" || p == nil || !p.HTTP1() || p.UnencryptedHTTP2() || p.HTTP2() {
		return t.origin.rt
	}
	return &fastTransport{t: t}
}

// fastTransport is an http.RoundTripper over t's origin's fastPool. A
// request that asks to switch protocols (Upgrade, as ReverseProxy leaves it
// for a WebSocket) goes through the origin's http.Transport instead:
// ReverseProxy needs the 101's body to be the connection, writable.
//
// RoundTrip streams the request body (its ContentLength, or chunked when
// unknown) before it reads the response, and the response body as the
// caller reads it (Close returns the connection to the pool when the body
// was read whole, and closes it otherwise). Interim 1xx answers are
// skipped. A chunked answer's trailers are reported as net/http's
// Transport reports them: the declared names are in the response's Trailer
// (nil values, the Trailer field out of Header) when RoundTrip returns, and
// the fields that arrive, declared or not, are set there when the body's
// Read reaches io.EOF (ReverseProxy relays them); a field fasthttp refuses
// in a trailer section (its isBadTrailer list) ends the body without that
// section, and a Trailer field declaring one fails the answer (fasthttp
// refuses its header). When the request's context ends before the
// response's header, RoundTrip returns ctx.Err() at once (after
// fastPool.DoContext's CancelGrace for a client gone once the request was
// sent), and while the body is read, Read does; the connection is closed
// either way, but for a short answer read within the grace. A timeout
// (the context's deadline, or the connection's) is a net.Error whose
// Timeout is true, as net/http reports it. Expect is not sent: the body
// goes upstream as it comes.
//
// It is safe for concurrent use.
type fastTransport struct {
	t *target
}

// errFastUnsupported is a request fastTransport cannot send.
var errFastUnsupported = errors.New("fast transport: only http:// requests")

func (f *fastTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(r.Header["Upgrade"]) > 0 {
		return f.t.origin.rt.RoundTrip(r)
	}
	if r.URL.Scheme != "http" {
		closeBody(r)
		return nil, errFastUnsupported
	}
	req := fasthttp.AcquireRequest()
	fillFastRequest(req, r)
	resp := fasthttp.AcquireResponse()
	err := f.t.fastClient().DoContext(r.Context(), req, resp)
	head := req.Header.IsHead()
	fasthttp.ReleaseRequest(req)
	if err != nil {
		fasthttp.ReleaseResponse(resp)
		closeBody(r) // as net/http's Transport does, whatever happened
		return nil, netHTTPErr(err)
	}
	return newFastResponse(r, resp, head), nil
}

// closeBody closes r's body, when it has one.
func closeBody(r *http.Request) {
	if r.Body != nil {
		_ = r.Body.Close()
	}
}

// fillFastRequest puts r in req: method, request URI, Host, every header
// field (all values, in order) but those the framing sets, and the body as
// a stream.
func fillFastRequest(req *fasthttp.Request, r *http.Request) {
	h := &req.Header
	h.DisableNormalizing() // net/http's keys are canonical already
	h.SetMethod(r.Method)
	h.SetRequestURI(r.URL.RequestURI())
	if r.Host != "" {
		h.SetHost(r.Host)
	} else {
		h.SetHost(r.URL.Host)
	}
	for k, vs := range r.Header {
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding", "Trailer", "Connection", "Expect":
			continue // the framing's, or the hop's (ReverseProxy removed most)
		}
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	if r.Close {
		h.SetConnectionClose()
	}
	if r.Body != nil && r.Body != http.NoBody {
		cl := int(r.ContentLength)
		if cl <= 0 {
			cl = -1 // unknown (0 with a body is unknown too, as for net/http's clients): chunked
		}
		req.SetBodyStream(r.Body, cl)
	}
}

// newFastResponse is resp (the answer to r) as an http.Response, which
// takes resp over: its body closes resp's stream and releases resp.
func newFastResponse(r *http.Request, resp *fasthttp.Response, head bool) *http.Response {
	status := resp.StatusCode()
	out := &http.Response{
		Status:     statusLine(status),
		StatusCode: status,
		ProtoMajor: 1,
		Header:     fastHeader(&resp.Header),
		Close:      resp.ConnectionClose(),
		Request:    r,
	}
	if resp.Header.IsHTTP11() {
		out.Proto, out.ProtoMinor = "HTTP/1.1", 1
	} else {
		out.Proto, out.ProtoMinor = "HTTP/1.0", 0
	}
	cl := resp.Header.ContentLength()
	if cl < 0 {
		cl = -1
	}
	bs := resp.BodyStream()
	switch {
	case bs != nil:
		out.ContentLength = int64(cl)
		b := fastBodies.Get().(*fastBody)
		b.r, b.resp = bs, resp
		if s, ok := bs.(*fastStream); cl == -1 && ok {
			// A chunked body may end with trailers: the declared names
			// are the response's Trailer now (as net/http's Transport
			// gives them, the Trailer field out of Header), and the
			// fields come at the body's end (fastBody.Read).
			b.s, b.out = s, out
			if names := resp.Header.PeekTrailerKeys(); len(names) > 0 {
				out.Trailer = make(http.Header, len(names))
				for _, k := range names {
					out.Trailer[fastHeaderKey(k)] = nil
				}
				delete(out.Header, "Trailer")
			}
		}
		out.Body = b
		return out
	case head:
		out.ContentLength = int64(cl) // what a GET would have had
	case status == http.StatusNoContent || status == http.StatusNotModified || status < 200:
	default:
		out.ContentLength = 0
	}
	out.Body = http.NoBody
	fasthttp.ReleaseResponse(resp)
	return out
}

// fastHeader converts h, every value of every field in order, with keys in
// canonical form. The values are substrings of one string and share one
// backing array (as net/textproto's reader does): three allocations and
// the map's.
func fastHeader(h *fasthttp.ResponseHeader) http.Header {
	n, size := 0, 0
	for _, v := range h.All() {
		n++
		size += len(v)
	}
	var sb strings.Builder
	sb.Grow(size)
	for _, v := range h.All() {
		sb.Write(v)
	}
	all := sb.String()
	hdr := make(http.Header, n)
	vals := make([]string, 0, n)
	off := 0
	for k, v := range h.All() {
		val := all[off : off+len(v)]
		off += len(v)
		key := fastHeaderKey(k)
		if key == "Connection" && val == "close" {
			continue // fasthttp's report of the framing
		}
		vals = append(vals, val)
		if prior, ok := hdr[key]; ok {
			hdr[key] = append(prior, val)
			continue
		}
		hdr[key] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	return hdr
}

// fastHeaderKey is k in canonical form, without allocating for common
// fields.
func fastHeaderKey(k []byte) string {
	switch string(k) {
	case "Content-Type":
		return "Content-Type"
	case "Content-Length":
		return "Content-Length"
	case "Content-Encoding":
		return "Content-Encoding"
	case "Date":
		return "Date"
	case "Server":
		return "Server"
	case "Set-Cookie":
		return "Set-Cookie"
	case "Cache-Control":
		return "Cache-Control"
	case "Last-Modified":
		return "Last-Modified"
	case "Etag":
		return "Etag"
	case "Accept-Ranges":
		return "Accept-Ranges"
	case "Vary":
		return "Vary"
	case "Connection":
		return "Connection"
	case "Keep-Alive":
		return "Keep-Alive"
	}
	return http.CanonicalHeaderKey(string(k))
}

// statusLine is http.Response.Status for code, without allocating for the
// most common ones.
func statusLine(code int) string {
	switch code {
	case http.StatusOK:
		return "200 OK"
	case http.StatusNoContent:
		return "204 No Content"
	case http.StatusNotModified:
		return "304 Not Modified"
	case http.StatusNotFound:
		return "404 Not Found"
	}
	return strconv.Itoa(code) + " " + http.StatusText(code)
}

// fastBody is a response body read from the pool: Close closes the
// stream (which returns or closes the connection) and releases the
// response. A chunked body's trailer fields go into its response's
// Trailer when Read reaches the end (net/http's rule). Reads and Close
// come from one goroutine at a time.
type fastBody struct {
	r    io.Reader
	resp *fasthttp.Response
	s    *fastStream    // r, for a chunked body (its trailer section)
	out  *http.Response // the response whose Trailer it fills, with s
}

var fastBodies = sync.Pool{New: func() any { return new(fastBody) }}

func (b *fastBody) Read(p []byte) (int, error) {
	if b.r == nil {
		return 0, http.ErrBodyReadAfterClose
	}
	n, err := b.r.Read(p)
	switch {
	case err == io.EOF:
		if b.out != nil {
			b.endTrailer()
		}
	case err != nil:
		err = netHTTPErr(err)
	}
	return n, err
}

// endTrailer puts the fields of the body's trailer section, declared or
// not, in its response's Trailer (keys canonical), once.
func (b *fastBody) endTrailer() {
	out := b.out
	b.out = nil
	for raw := b.s.trailer(); len(raw) > 0; {
		var name, value []byte
		name, value, raw, _ = NextRawField(raw)
		if len(name) == 0 {
			continue
		}
		if out.Trailer == nil {
			out.Trailer = make(http.Header)
		}
		k := fastHeaderKey(name)
		out.Trailer[k] = append(out.Trailer[k], string(value))
	}
}

// ready reports whether the body's next Read is sure not to wait for the
// upstream, from what its connection's reader holds already: some of a
// body read to the connection's end; for a chunked one, a whole chunk-size
// line and data after it (chunkReady). A body of known length, or one not
// read from a pooled stream, is never ready (the caller flushes what it
// wrote before such a Read).
func (b *fastBody) ready() bool {
	s, ok := b.r.(*fastStream)
	if !ok || s.br == nil || s.eof {
		return false
	}
	n := s.br.Buffered()
	switch {
	case n == 0:
		return false
	case s.cl == -1:
		buf, _ := s.br.Peek(n)
		return chunkReady(buf)
	}
	return s.cl < -1
}

// chunkReady reports whether buf, the buffered rest of a chunked body,
// holds a line's end with something after it: the next chunk's size line
// whole and some of its data (or, inside a chunk, data to read at once).
// It may say no where a Read would not wait (data without a line's end),
// which costs a flush, never yes where a Read waits for a size line.
func chunkReady(buf []byte) bool {
	i := bytes.IndexByte(buf, '\n')
	return i >= 0 && i < len(buf)-1
}

func (b *fastBody) Close() error {
	if b.resp == nil {
		return nil
	}
	_ = b.resp.CloseBodyStream()
	fasthttp.ReleaseResponse(b.resp)
	*b = fastBody{}
	fastBodies.Put(b)
	return nil
}

// netHTTPErr is err as net/http's client would classify it: a timeout is
// a net.Error whose Timeout is true (fasthttp's ErrTimeout is not a
// net.Error), anything else is itself.
func netHTTPErr(err error) error {
	if errors.Is(err, fasthttp.ErrTimeout) {
		return fastTimeoutError{err}
	}
	return err
}

// fastTimeoutError is a timeout as a net.Error.
type fastTimeoutError struct{ err error }

func (e fastTimeoutError) Error() string   { return "upstream timeout: " + e.err.Error() }
func (e fastTimeoutError) Unwrap() error   { return e.err }
func (e fastTimeoutError) Timeout() bool   { return true }
func (e fastTimeoutError) Temporary() bool { return true }
