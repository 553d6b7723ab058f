package proxy

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// deepCopy is h with its names and values copied: the strings of a
// FastRequest's header point into buffers of the serving stack's that are
// reused once ForwardFast has returned, and the bridged Forward's goroutine
// may read its request (its error handler) until the body ends.
func deepCopy(h http.Header) http.Header {
	c := make(http.Header, len(h))
	for k, vs := range h {
		cv := make([]string, len(vs))
		for i, v := range vs {
			cv[i] = strings.Clone(v)
		}
		c[strings.Clone(k)] = cv
	}
	return c
}

// forwardBridged forwards a request the fasthttp engine parsed through the
// net/http path (Forward, with its transports), for targets fasthttp's
// client does not serve (h2c, and https:// with the route's upstream.tls).
// Forward runs on a goroutine of its own writing into a pipe: forwardBridged
// waits for the response header, puts it in ctx.Response and lets the
// engine stream the pipe to the client, so neither body is buffered whole.
// The client's body is read by Forward's transport only until the response
// is written (bridgeBody), after which the engine owns the connection again.
//
// The trailers Forward writes (ReverseProxy's: the names the Trailer field
// declares, set in the header map after the body, and undeclared ones under
// http.TrailerPrefix) go to an HTTP/1.1 client as net/http's server sends
// them: the answer goes out chunked, with the Trailer field (less
// X-Request-Id, the gateway's header field), and bridgeReader adds the
// fields to its trailer section when the pipe ends, for fasthttp to write
// after the last chunk. An answer that declares trailers goes out chunked
// even when the upstream gave its length (HTTP/2 carries both, HTTP/1.1
// cannot); one that declares none keeps its Content-Length, and then any
// undeclared trailers are dropped, as net/http's server drops them. A field
// fasthttp refuses in a trailer (its isBadTrailer list, wider than
// net/http's) is left out, declared or not. An HTTP/1.0 client gets neither
// the Trailer field nor trailers.
func (u *Upstream) forwardBridged(ctx *fasthttp.RequestCtx, fr FastRequest, m Match, start time.Time) Outcome {
	in := &ctx.Request.Header
	r := &http.Request{
		Method:     string(in.Method()),
		URL:        &url.URL{Path: fr.Path, RawQuery: string(ctx.URI().QueryString())},
		Proto:      "HTTP/1.1",
		ProtoMajor: 1, ProtoMinor: 1,
		Header:        deepCopy(fr.header()),
		Host:          string(in.Host()),
		RemoteAddr:    ctx.RemoteAddr().String(),
		RequestURI:    string(in.RequestURI()),
		ContentLength: FastContentLength(in),
		Body:          http.NoBody,
	}
	if !in.IsHTTP11() {
		r.Proto, r.ProtoMinor = "HTTP/1.0", 0
	}
	if ctx.IsTLS() {
		r.TLS = &tls.ConnectionState{}
	}
	if r.ContentLength < 0 {
		r.ContentLength = -1
	}
	body := &bridgeBody{}
	if r.ContentLength != 0 {
		if bs := ctx.RequestBodyStream(); bs != nil {
			// Read on the transport's goroutine: the client's read
			// deadline is renewed as the body moves (bodyTimeout), and
			// never past the route's deadline, as on the engine's own
			// path (fastReqBody), so that a slow but moving upload is not
			// cut and a stalled one is answered 408, or 504 when the
			// route's timeout comes first.
			body.r = &fastReqBody{r: bs, conn: ctx.Conn(), timeout: u.bodyTimeout, due: start.Add(u.timeout)}
		} else {
			body.r = bytesReader(in, ctx.Request.Body())
		}
		r.Body = body
	}
	pr, pw := io.Pipe()
	bw := &bridgeWriter{h: http.Header{}, pw: pw, header: make(chan struct{})}
	done := make(chan Outcome, 1)
	go func() {
		o := u.Forward(bw, r, m)
		bw.signal()
		if o.Aborted {
			_ = pw.CloseWithError(ErrAborted)
		} else {
			_ = pw.Close()
		}
		done <- o
	}()
	<-bw.header
	out := &ctx.Response
	status := bw.status
	if status == 0 {
		status = http.StatusOK
	}
	out.SetStatusCode(status)
	if (status == http.StatusRequestTimeout || status == http.StatusGatewayTimeout) && r.Body != http.NoBody {
		// The client's body stalled, or the route's deadline ended its
		// reading: wait for the transport's read in progress to end (it
		// fails at once, past its deadline) and stop it, before the engine
		// reads the body stream's state; the connection ends after the
		// answer, its body half read.
		body.Close()
		ctx.SetConnectionClose()
	}
	// The header as WriteHeader saw it, which Forward no longer changes
	// (it writes the trailers in a map of their own), or, when nothing was
	// written, the one map, which Forward, returned, no longer changes.
	head := bw.head
	if head == nil {
		head = bw.h
	}
	// Trailers go to an HTTP/1.1 client only, on a body it gets chunked.
	trailers := in.IsHTTP11() && bw.head != nil && !in.IsHead()
	for k, vs := range head {
		if k == "Content-Length" || k == "Connection" || k == "Transfer-Encoding" || k == "Trailer" && !trailers {
			continue
		}
		for _, v := range vs {
			out.Header.Add(k, v)
		}
	}
	declared := trailers && len(out.Header.PeekTrailerKeys()) > 0
	if declared {
		undeclareID(&out.Header)
	}
	cl := -1
	if v := head.Get("Content-Length"); v != "" && !declared {
		if n, err := parseLength(v); err == nil {
			cl = n
		}
	}
	var release func(error)
	if fr.Release != nil {
		release = fr.Release.TakeRelease()
	}
	br := &bridgeReader{PipeReader: pr, done: done, body: body, release: release,
		cw: clientWrites{conn: ctx.Conn(), timeout: u.writeTimeout}}
	if trailers && cl < 0 {
		br.w, br.trailer = bw, &out.Header
	}
	out.SetBodyStream(br, cl)
	if in.IsHead() {
		out.SkipBody = true
	}
	return Outcome{Status: status, Duration: time.Since(start)}
}

func parseLength(s string) (int, error) {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' || n > 1<<40 {
			return 0, io.ErrUnexpectedEOF
		}
		n = n*10 + int(c-'0')
	}
	return n, nil
}

// bytesReader is the body fasthttp read whole already.
func bytesReader(_ *fasthttp.RequestHeader, b []byte) io.Reader {
	return &byteReader{b: b}
}

type byteReader struct{ b []byte }

func (r *byteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// bridgeWriter is the ResponseWriter Forward writes to: the header is handed
// over on the first WriteHeader or Write, the body through the pipe. From
// WriteHeader on, Header is a new map, which holds what is set after the
// header (trailers), while forwardBridged reads the header's (head): the
// two goroutines never share a map.
type bridgeWriter struct {
	h      http.Header
	head   http.Header // h as WriteHeader found it, once called
	status int
	pw     *io.PipeWriter
	header chan struct{}
	once   sync.Once
}

func (w *bridgeWriter) Header() http.Header { return w.h }

func (w *bridgeWriter) WriteHeader(code int) {
	if code < 200 || w.status != 0 {
		return // 1xx are not relayed by this bridge
	}
	w.status = code
	w.head, w.h = w.h, http.Header{}
	w.signal()
}

func (w *bridgeWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.pw.Write(b)
}

// Flush is a no-op: the pipe is unbuffered and the engine flushes each
// chunk it reads.
func (w *bridgeWriter) Flush() {}

func (w *bridgeWriter) signal() { w.once.Do(func() { close(w.header) }) }

// bridgeReader is the response body the engine streams; Close (when the
// response is written) waits for Forward, ends the client body's use by
// the transport and reports how Forward's body ended (FastRequest.Release).
type bridgeReader struct {
	*io.PipeReader
	done    chan Outcome
	body    *bridgeBody
	release func(end error)
	// w and trailer, when not nil: the writer whose trailers go, at the
	// pipe's io.EOF, to trailer, the client's response header (its
	// trailer section, which the engine writes after the body).
	w       *bridgeWriter
	trailer *fasthttp.ResponseHeader
	// cw bounds the engine's writes to the client by the route's
	// writeTimeout, renewed as the engine reads from the pipe (after the
	// engine set its own deadline for the answer's header).
	cw clientWrites
}

// Read reads the pipe; at its io.EOF, the trailers are added. The pipe
// ends with io.EOF only once Forward has returned (pw.Close, after
// Forward, on its goroutine), which happens before this Read returns: w.h
// holds the trailers' final values, and nothing writes it any more.
func (r *bridgeReader) Read(p []byte) (int, error) {
	n, err := r.PipeReader.Read(p)
	if n > 0 {
		r.cw.progress()
	}
	if err == io.EOF && r.trailer != nil {
		addBridgedTrailers(r.trailer, r.w.h)
		r.trailer = nil
	}
	return n, err
}

// addBridgedTrailers adds to out's trailer section the trailers a
// ResponseWriter's handler set in h after WriteHeader, by net/http's rule:
// a name out's Trailer field declares, and a name under http.TrailerPrefix
// (less the prefix); other names set after the header are not sent.
func addBridgedTrailers(out *fasthttp.ResponseHeader, h http.Header) {
	declared := out.PeekTrailerKeys()
	for k, vs := range h {
		name, undeclared := strings.CutPrefix(k, http.TrailerPrefix)
		if !undeclared && !slices.ContainsFunc(declared, func(d []byte) bool { return EqualFoldASCII(d, k) }) {
			continue
		}
		for _, v := range vs {
			addTrailerField(out, []byte(name), []byte(v))
		}
	}
}

func (r *bridgeReader) Close() error {
	_ = r.PipeReader.Close()
	r.cw.end()
	o := <-r.done
	r.body.Close()
	if r.release != nil {
		r.release(bridgedEnd(o))
	}
	return nil
}

// bridgedEnd is how the body of a bridged Forward ended, for Release: its
// outcome says whether the client stopped taking it or the upstream cut it
// off (net/http's path decided, as for its own clients).
func bridgedEnd(o Outcome) error {
	switch {
	case o.ClientGone:
		return ErrClientStopped
	case o.Aborted && o.Timeout:
		return os.ErrDeadlineExceeded
	case o.Aborted:
		return ErrAborted
	}
	return nil
}

// bridgeBody is the client's body as the net/http transport reads it, maybe
// from its own goroutine: once closed (the response is written, the engine
// takes the connection back) it reads nothing more.
type bridgeBody struct {
	mu     sync.Mutex
	r      io.Reader
	closed bool
}

func (b *bridgeBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.r == nil {
		return 0, io.EOF
	}
	return b.r.Read(p)
}

func (b *bridgeBody) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}
