package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"

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
// (RFC 7540 §3.2), for the engine to carry out (serveUpgraded).
type h2cUpgrade struct {
	req      *http.Request // served as stream 1
	settings []byte        // the client's HTTP2-Settings, decoded
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

// upgradeFast takes an h2c upgrade request, as x/net's h2c handler does,
// for a request whose framing strictFast accepted: its body is read whole,
// and the upgrade it returns is for the engine to carry out, answering 101
// and serving the connection as HTTP/2, the request as stream 1, through
// the node's one request path (serveUpgraded). An HTTP2-Settings that is
// missing, repeated or not base64url is answered 500, as there, and the
// upgrade is nil with handled set. Neither is set when the request is to
// be served as HTTP/1.1 instead: over TLS (h2c is cleartext only; TLS
// negotiates h2 by ALPN), or with a body over H2CBodyMax or of unknown
// length.
func (n *Node) upgradeFast(ctx *fasthttp.RequestCtx) (up *h2cUpgrade, handled bool) {
	h := &ctx.Request.Header
	if ctx.IsTLS() || !h2cFits(proxy.FastContentLength(h)) {
		return nil, false
	}
	settings, ok := h2cSettings(h)
	if !ok {
		snapshot.WriteProblemFast(ctx, http.StatusInternalServerError, "Internal server error",
			"the h2c upgrade needs exactly one HTTP2-Settings header in base64url")
		return nil, true
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
		return nil, true
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
			return nil, true
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.RemoteAddr = ctx.RemoteAddr().String()
	return &h2cUpgrade{req: r, settings: settings}, true
}

// h2cSettings decodes the request's one HTTP2-Settings header.
func h2cSettings(h *fasthttp.RequestHeader) ([]byte, bool) {
	vs := h.PeekAll("HTTP2-Settings")
	if len(vs) != 1 {
		return nil, false
	}
	s, err := base64.RawURLEncoding.DecodeString(string(vs[0]))
	return s, err == nil
}

// serveUpgraded answers an h2c upgrade with 101 and serves conn as HTTP/2,
// the upgrade request as stream 1, as x/net's h2c handler does, until the
// session ends.
func (d *dispatcher) serveUpgraded(up *h2cUpgrade, conn net.Conn) {
	if _, err := conn.Write([]byte(h2cSwitching)); err != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // the upgrade request's context ends with the session
	d.h2.ServeConn(d.guarded(conn), &http2.ServeConnOpts{Context: ctx, BaseConfig: d.h2base(), Handler: d.handler,
		UpgradeRequest: up.req.WithContext(ctx), Settings: up.settings})
}
