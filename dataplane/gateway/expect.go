package gateway

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http/httputil"

	"github.com/valyala/fasthttp"

	"github.com/sluicegw/sluice/dataplane/proxy"
)

// continueLine is the interim answer that tells a client waiting on
// "Expect: 100-continue" to send its body.
const continueLine = "HTTP/1.1 100 Continue\r\n\r\n"

// expectFast is the fasthttp engine's ExpectHandler, for a request with
// "Expect: 100-continue" and a body (the event-loop engine hands such
// requests to it): fasthttp would answer 100 Continue before the handler
// runs, so before any limit decides, and a client refused with 429 would
// have been told to send its body first. Instead the request is served
// here, before fasthttp reads any of the body, with a body that says 100
// Continue to the client when it is first read (continueBody), as
// net/http's server does: a request the limits refuse is answered without
// a 100, and the body is read only by a forward. The engine then writes the
// answer (expectFast returns its status, which fasthttp keeps) and closes
// the connection, since the body may be unread (a client that sent it
// without waiting). An Upgrade request is left to fasthttp (100 first).
func (n *Node) expectFast(ctx *fasthttp.RequestCtx) int {
	h := &ctx.Request.Header
	cl := proxy.FastContentLength(h)
	tc, ok := ctx.Conn().(trackedConn)
	if cl == 0 || len(h.Peek("Upgrade")) > 0 || !ok {
		return fasthttp.StatusContinue
	}
	ahead, ok := bodyAhead(tc.lastRead(), h.RawHeaders())
	if !ok {
		return fasthttp.StatusContinue // the header's end not found: fasthttp's way
	}
	ctx.Request.SetBodyStream(&continueBody{c: ctx.Conn(), n: cl, ahead: ahead}, int(cl))
	n.handleFast(ctx)
	ctx.SetConnectionClose()
	if ctx.Hijacked() {
		return fasthttp.StatusContinue // not reached: no Upgrade
	}
	return ctx.Response.StatusCode()
}

// bodyAhead returns a copy of what follows the request's header in last,
// the engine's last read of the connection, which ended the header (rawFields,
// the header's fields as received): bytes of the body a client sent without
// waiting for 100 Continue, which the engine's reader holds. It reports
// false when the header's end is not found there.
func bodyAhead(last, rawFields []byte) ([]byte, bool) {
	tail := bytes.TrimRight(rawFields, "\r\n")
	if len(tail) == 0 {
		return nil, false
	}
	tail = tail[max(0, len(tail)-32):]
	for off := 0; ; {
		i := bytes.Index(last[off:], tail)
		if i < 0 {
			return nil, false
		}
		rest := last[off+i+len(tail):]
		for _, end := range []string{"\r\n\r\n", "\n\r\n", "\r\n\n", "\n\n"} {
			if bytes.HasPrefix(rest, []byte(end)) {
				return bytes.Clone(rest[len(end):]), true
			}
		}
		off += i + 1
	}
}

// continueBody is the body of a request that waits for 100 Continue: its
// first Read writes the 100 to the client, then it reads the body: what
// the engine read of it ahead, then the connection (n bytes in all, or
// chunked when n is -1).
type continueBody struct {
	c     net.Conn
	n     int64
	ahead []byte
	r     io.Reader
	ok    bool // the 100 is sent
}

func (b *continueBody) Read(p []byte) (int, error) {
	if !b.ok {
		b.ok = true
		if _, err := io.WriteString(b.c, continueLine); err != nil {
			return 0, err
		}
		src := io.MultiReader(bytes.NewReader(b.ahead), b.c)
		if b.n < 0 {
			b.r = httputil.NewChunkedReader(bufio.NewReader(src))
		} else {
			b.r = io.LimitReader(src, b.n)
		}
	}
	n, err := b.r.Read(p)
	if err == io.EOF && b.n > 0 {
		if lr := b.r.(*io.LimitedReader); lr.N > 0 {
			err = io.ErrUnexpectedEOF
		}
	}
	return n, err
}
