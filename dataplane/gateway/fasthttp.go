package gateway

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/proxy"
	"github.com/sluicegw/sluice/dataplane/snapshot"
)

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// fastError answers a request the engine could not parse: 431 for a header
// over the bound, 408 for one that did not arrive in time, else 400; the
// engine closes the connection after it.
func fastError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	switch {
	case errors.As(err, &small):
		headerTooLarge(ctx)
	case errors.As(err, &ne) && ne.Timeout():
		snapshot.WriteProblemFast(ctx, http.StatusRequestTimeout, "Request timeout", "the request header did not arrive in time")
	case strings.Contains(err.Error(), "transfer-encoding") && !strings.Contains(err.Error(), "conflict"):
		snapshot.WriteProblemFast(ctx, http.StatusNotImplemented, "Not implemented",
			"only the chunked transfer coding is implemented, once")
	case strings.Contains(err.Error(), "unsupported http version") && strings.Contains(err.Error(), `"HTTP/2`):
		snapshot.WriteProblemFast(ctx, http.StatusHTTPVersionNotSupported, "HTTP version not supported",
			"the request's HTTP version is not HTTP/1.0 or HTTP/1.1")
	default:
		snapshot.WriteProblemFast(ctx, http.StatusBadRequest, "Bad request", "the request could not be parsed")
	}
}

// headerTooLarge answers a request whose header is over the bound (431).
func headerTooLarge(ctx *fasthttp.RequestCtx) {
	snapshot.WriteProblemFast(ctx, http.StatusRequestHeaderFieldsTooLarge, "Request header too large",
		"the request header exceeds the gateway's limit")
}

// serveFast is ServeHTTP for the fasthttp engine, given what strictFast
// found of the request (and the ids it gathered).
func (n *Node) serveFast(ctx *fasthttp.RequestCtx, status int, why string, seen fieldsSeen, ids *snapshot.RequestIDs) (relay func(net.Conn)) {
	if s := n.fastPrelude(ctx, status, why, seen); s != nil {
		return s.ServeFast(ctx, ctx.IsTLS(), seen&seenUpgrade == 0, ids)
	}
	return nil
}

// fastPrelude is what the fasthttp engines do with a request before the
// snapshot serves it: refuse what strictFast refused (status, why), and a
// request that loops, and answer 503 while no rules are applied; it
// returns the snapshot to serve the request with, or nil when it answered.
func (n *Node) fastPrelude(ctx *fasthttp.RequestCtx, status int, why string, seen fieldsSeen) *snapshot.Snapshot {
	if status != 0 {
		ctx.SetConnectionClose()
		snapshot.WriteProblemFast(ctx, status, http.StatusText(status), why)
		n.metrics.Requests.WithLabelValues("", fmt.Sprint(status)).Inc()
		n.metrics.Served.Count(status)
		return nil
	}
	if seen&seenVia != 0 && n.loopingFast(ctx) {
		ctx.SetConnectionClose()
		snapshot.WriteProblemFast(ctx, proxy.StatusLoopDetected, "Loop detected",
			"the request already went through this gateway, or through too many proxies (Via); check the route's targets")
		n.metrics.Requests.WithLabelValues("", "508").Inc()
		n.metrics.Served.Count(http.StatusLoopDetected)
		return nil
	}
	// Bound a body until the route's bound applies. (A streamed response
	// clears its write deadline when done: see proxy.ForwardFast.)
	proxy.GuardBodyConn(ctx.Conn(), proxy.FastHasBody(&ctx.Request.Header), api.DefaultBodyTimeout)
	s := n.current.Load()
	if s == nil {
		snapshot.WriteProblemFast(ctx, http.StatusServiceUnavailable, "No rules", "the gateway has no rule set applied yet")
	}
	return s
}

// loopingFast reports whether the request's Via fields show it went through
// this gateway already, or through too many proxies (Transport.LoopingVia).
func (n *Node) loopingFast(ctx *fasthttp.RequestCtx) bool {
	vias := ctx.Request.Header.PeekAll("Via")
	vs := make([]string, len(vias))
	for i, v := range vias {
		vs[i] = string(v)
	}
	return n.cfg.Snapshot.Transport.LoopingVia(vs)
}

// fieldsSeen tells which fields strictFast saw in a request's header: what
// the request path would otherwise look up (fasthttp's lookups normalize the
// name asked for each time).
type fieldsSeen uint8

const (
	seenUpgrade fieldsSeen = 1 << iota // an Upgrade field
	seenVia                            // a Via field
)

// strictFast returns the status and reason to refuse an HTTP/1 request
// with, or 0: what net/http refuses (see strictTarget) and, since fasthttp
// is lenient where net/http is strict, the framing checks made here on the
// header as received: one Content-Length of digits only, a Transfer-Encoding
// of exactly "chunked" (501 otherwise), never both (RFC 9112 §6.3: the
// gateway refuses rather than normalizes), no obs-fold (§5.2), header names
// that are tokens, no NUL or bare CR, exactly one Host for HTTP/1.1. On a
// request it accepts, it also tells which of the fields the request path
// looks for it saw, and gathers the request's ids into ids
// (snapshot.RequestIDs.Field), so that serving it takes no second pass over
// the header.
func strictFast(h *fasthttp.RequestHeader, ids *snapshot.RequestIDs) (int, string, fieldsSeen) {
	var seen fieldsSeen
	// fasthttp reads any "HTTP/x.y"; net/http answers 505 to versions
	// other than 1.0 and 1.1 (and the request must not reach an upstream
	// under a version it was not parsed as).
	if p := h.Protocol(); string(p) != "HTTP/1.1" && string(p) != "HTTP/1.0" {
		return http.StatusHTTPVersionNotSupported, "the request's HTTP version is not HTTP/1.0 or HTTP/1.1", 0
	}
	uri := h.RequestURI()
	if bytes.IndexByte(uri, ' ') >= 0 {
		return http.StatusBadRequest, "the request target has a space", 0
	}
	if len(uri) == 0 || uri[0] != '/' { // origin-form passes: no strings to make
		if why := strictTargetOf(string(h.Method()), string(uri)); why != "" {
			return http.StatusBadRequest, why, 0
		}
	}
	hosts, cls, tes := 0, 0, 0
	for raw := h.RawHeaders(); len(raw) > 0; {
		name, value, rest, colon := proxy.NextRawField(raw)
		raw = rest
		if !colon || len(name) == 0 || !proxy.IsToken(name) {
			switch {
			case !colon && len(name) == 0: // a blank line
				continue
			case len(name) > 0 && (name[0] == ' ' || name[0] == '\t'):
				return http.StatusBadRequest, "obsolete line folding in the header", 0
			}
			return http.StatusBadRequest, "a header name is not a token", 0
		}
		// The line was cut at LF; a NUL or a CR left in it is refused (the
		// value is trimmed of spaces and tabs only: none is lost).
		if hasNULOrCR(value) {
			return http.StatusBadRequest, "a header value has a control character", 0
		}
		ids.Field(name, value)
		switch len(name) { // most names are none of these: one length test
		case 3:
			if proxy.EqualFoldASCII(name, "Via") {
				seen |= seenVia
			}
		case 4:
			if proxy.EqualFoldASCII(name, "Host") {
				hosts++
			}
		case 7:
			if proxy.EqualFoldASCII(name, "Upgrade") {
				seen |= seenUpgrade
			}
		case 14:
			if proxy.EqualFoldASCII(name, "Content-Length") {
				cls++
				if len(value) == 0 || !allDigits(value) {
					return http.StatusBadRequest, "the Content-Length is not a number", 0
				}
			}
		case 17:
			if proxy.EqualFoldASCII(name, "Transfer-Encoding") {
				tes++
				if !bytes.EqualFold(value, []byte("chunked")) {
					return http.StatusNotImplemented, "only the chunked transfer coding is implemented", 0
				}
			}
		}
	}
	switch {
	case cls > 1:
		return http.StatusBadRequest, "more than one Content-Length", 0
	case tes > 1:
		return http.StatusNotImplemented, "only the chunked transfer coding is implemented, once", 0
	case cls > 0 && tes > 0:
		return http.StatusBadRequest, "both Content-Length and Transfer-Encoding", 0
	case hosts > 1:
		return http.StatusBadRequest, "more than one Host", 0
	case hosts == 0 && h.IsHTTP11():
		return http.StatusBadRequest, "no Host", 0
	}
	return 0, "", seen
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// hasNULOrCR reports whether b holds a NUL or a CR: eight bytes at a time
// for a short b (most header values; the last eight overlap the others),
// bytes.IndexByte for a longer one.
func hasNULOrCR(b []byte) bool {
	n := len(b)
	switch {
	case n >= 64:
		return bytes.IndexByte(b, 0) >= 0 || bytes.IndexByte(b, '\r') >= 0
	case n >= 8:
		for i := 0; i < n-8; i += 8 {
			if nulOrCR(binary.LittleEndian.Uint64(b[i:])) {
				return true
			}
		}
		return nulOrCR(binary.LittleEndian.Uint64(b[n-8:]))
	}
	for _, c := range b {
		if c == 0 || c == '\r' {
			return true
		}
	}
	return false
}

// nulOrCR reports whether one of v's bytes is a NUL or a CR: a zero byte in
// v, or in v^crs.
func nulOrCR(v uint64) bool {
	const ones, highs, crs = 0x0101010101010101, 0x8080808080808080, 0x0d0d0d0d0d0d0d0d
	return (v-ones)&^v&highs != 0 || (v^crs-ones)&^(v^crs)&highs != 0
}
