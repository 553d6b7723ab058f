package proxy

import (
	"bytes"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/sluicegw/sluice/api"
)

// appendFastHead appends the head of the request ctx carries as it goes to
// target t, for a request without a body (the common GET): the request line
// with the forwarded path and query, Host, the client's header lines as they
// arrived (names as spelled, or canonical once the fasthttp engine's request
// view has canonicalized them in place; values without surrounding spaces
// and tabs), less the hop-by-hop fields, the names Connection lists and the
// fields the gateway sets itself, then those: X-Forwarded-For (the client's
// values, then the peer), X-Forwarded-Host, X-Forwarded-Proto, Via,
// X-Request-Id and, when the gateway replaces the client's, Traceparent
// (the client's Tracestate dropped with it for a trace the gateway started:
// see FastRequest.Traceparent). It is buildFastRequest's result,
// serialized, written in one pass over the raw header (two when a
// Connection line comes late: see appendClientFields) instead of copying a
// parsed header and editing it.
//
// The raw header is what the engine parsed and strictFast accepted (names
// are tokens, no obs-fold, no control characters in values), so each line
// is forwarded as it was read. On the fasthttp engine bodies and protocol
// switches go through buildFastRequest, whose framing fasthttp writes; the
// event-loop engine sends a body of known length it read whole right after
// this head, whose Content-Length line (one, digits only: strictFast) is
// the client's.
func (u *Upstream) appendFastHead(dst []byte, ctx *fasthttp.RequestCtx, fr FastRequest, t *target, m Match) []byte {
	in := &ctx.Request.Header
	dst = append(dst, in.Method()...)
	dst = append(dst, ' ')
	dst = append(dst, u.forwardPath(t, m.Path)...)
	if q := ctx.URI().QueryString(); len(q) > 0 {
		dst = append(append(dst, '?'), q...)
	}
	dst = append(dst, " HTTP/1.1\r\nHost: "...)
	dst = append(dst, t.host...)
	dst = append(dst, "\r\n"...)

	// One pass, mostly: the names Connection lists are hop-by-hop too, and
	// Connection may come after them; only when it lists one that could
	// have been forwarded already is the pass made again, with every
	// listed name known.
	raw, tm := in.RawHeaders(), fr.traceMode()
	var l connListed
	var xb [256]byte // the client's X-Forwarded-For values: most fit, on the stack
	mark := len(dst)
	dst, x, late := appendClientFields(dst, xb[:0], raw, &l, tm, true)
	if late {
		dst, x, _ = appendClientFields(dst[:mark], x[:0], raw, &l, tm, false)
	}
	dst = append(dst, "X-Forwarded-For: "...)
	if len(x) > 0 {
		dst = append(append(dst, x...), ", "...)
	}
	dst = appendPeerIP(dst, ctx)
	dst = append(dst, "\r\nX-Forwarded-Host: "...)
	dst = append(dst, in.Host()...)
	if fr.TLS {
		dst = append(dst, "\r\nX-Forwarded-Proto: https\r\nVia: "...)
	} else {
		dst = append(dst, "\r\nX-Forwarded-Proto: http\r\nVia: "...)
	}
	minor := 1
	if !in.IsHTTP11() {
		minor = 0
	}
	dst = append(dst, t.tr.viaValue(1, minor)...)
	dst = append(dst, "\r\n"+api.HeaderRequestID+": "...)
	dst = append(dst, fr.RequestID...)
	if tm != traceKept {
		dst = append(dst, "\r\nTraceparent: "...)
		dst = append(dst, fr.Traceparent...)
	}
	return append(dst, "\r\n\r\n"...)
}

// connListed holds the names the client's Connection lines list, the
// first eight.
type connListed struct {
	names [8][]byte
	n     int
}

// appendClientFields is appendFastHead's pass over raw, the client's header
// lines: it appends those that go upstream to dst (as "name: value" lines)
// and the values of X-Forwarded-For to x, leaving out what gatewaySets
// drops and the names in l. With collect, it adds the names each Connection
// line lists to l as it meets them, and late reports that one was added
// after a line was forwarded and could have been that line's name (it is
// not a name gatewaySets drops or merges anyway: names are ASCII, fasthttp
// refuses others, so two names equal but for case are classified alike):
// the pass is then to be made again without collect.
func appendClientFields(dst, x, raw []byte, l *connListed, tm traceMode, collect bool) (_, _ []byte, late bool) {
	kept := false
	for len(raw) > 0 {
		name, value, rest, _ := NextRawField(raw)
		raw = rest
		if len(name) == 0 {
			continue
		}
		switch gatewaySets(name, tm) {
		case setXFF:
			if len(x) > 0 {
				x = append(x, ", "...)
			}
			x = append(x, value...)
			continue
		case setDrop:
			if collect && len(name) == len("Connection") && EqualFoldASCII(name, "Connection") {
				for len(value) > 0 && l.n < len(l.names) {
					var tok []byte
					tok, value, _ = bytes.Cut(value, []byte{','})
					if tok = bytes.TrimSpace(tok); len(tok) > 0 {
						l.names[l.n] = tok
						l.n++
						late = late || kept && gatewaySets(tok, tm) == setKeep
					}
				}
			}
			continue
		}
		if listedIn(name, l.names[:l.n]) {
			continue
		}
		kept = true
		CanonicalizeKey(name) // in place: forwarded as net/http's header map would send it
		dst = append(dst, name...)
		dst = append(dst, ": "...)
		dst = append(dst, value...)
		dst = append(dst, "\r\n"...)
	}
	return dst, x, late
}

// What appendFastHead does with a client's header line.
const (
	setKeep = iota // forwarded as it is (unless Connection lists it)
	setDrop        // hop-by-hop, or set by the gateway
	setXFF         // X-Forwarded-For: its values lead the gateway's
)

// gatewaySets classifies a client's header name: hop-by-hop fields
// (hopHeaders, Expect among them), Host and the fields the gateway sets are
// dropped, X-Forwarded-For is merged; tm tells what becomes of the client's
// Traceparent and Tracestate.
func gatewaySets(name []byte, tm traceMode) int {
	is := func(s string) bool { return EqualFoldASCII(name, s) }
	switch len(name) { // most names are none of these: one length test
	case 2:
		return drop(is("Te"))
	case 4:
		return drop(is("Host"))
	case 6:
		return drop(is("Expect"))
	case 7:
		return drop(is("Trailer") || is("Upgrade"))
	case 10:
		return drop(is("Connection") || is("Keep-Alive") || tm == traceStarted && is("Tracestate"))
	case 11:
		return drop(tm != traceKept && is("Traceparent"))
	case 12:
		return drop(is(api.HeaderRequestID))
	case 15:
		if is("X-Forwarded-For") {
			return setXFF
		}
	case 16:
		return drop(is("X-Forwarded-Host") || is("Proxy-Connection"))
	case 17:
		return drop(is("X-Forwarded-Proto") || is("Transfer-Encoding"))
	case 18:
		return drop(is("Proxy-Authenticate"))
	case 19:
		return drop(is("Proxy-Authorization"))
	}
	return setKeep
}

// traceMode is what becomes of a client's Traceparent and Tracestate
// lines (FastRequest.traceMode).
type traceMode uint8

const (
	traceKept    traceMode = iota // both go on as they came
	traceChild                    // Traceparent replaced, Tracestate kept
	traceStarted                  // both dropped, the gateway's Traceparent sent
)

// traceMode is fr's: see FastRequest.Traceparent.
func (fr *FastRequest) traceMode() traceMode {
	switch {
	case fr.Traceparent == "":
		return traceKept
	case fr.KeepTracestate:
		return traceChild
	}
	return traceStarted
}

func drop(b bool) int {
	if b {
		return setDrop
	}
	return setKeep
}

// gatewayNames are the names gatewaySets always drops or merges, but Host
// (Traceparent and Tracestate go too, as traceMode says).
var gatewayNames = append([]string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", api.HeaderRequestID},
	hopHeaders...)

func listedIn(name []byte, listed [][]byte) bool {
	for _, l := range listed {
		if bytes.EqualFold(name, l) {
			return true
		}
	}
	return false
}

type fastHead struct{ b []byte }

var fastHeads = sync.Pool{New: func() any { return &fastHead{b: make([]byte, 0, 1024)} }}
