package proxy

import (
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"slices"
	"strings"

	"github.com/sluicegw/sluice/api"
)

// This file is Forward's exchange for every request but a protocol switch
// (WebSocket, which httputil.ReverseProxy still serves when one reaches
// Forward): HTTP/2 streams (TLS h2, h2c, gRPC), and the HTTP/1.1 requests
// that reach Forward (the fasthttp engine's, bridged to h2c and https://
// targets). The request goes
// straight through the target's client (target.rt: the origin's fastPool
// for cleartext HTTP/1.1 targets, its x/net/http2 Transport for h2 and h2c
// ones, which multiplexes streams over a few connections, else its
// http.Transport) and the answer is written to the client, without
// ReverseProxy: no request clone, one header map built in one pass. The
// rules are ReverseProxy's: hop-by-hop fields removed both ways (and those
// the Connection field lists), Te kept as "trailers" when it asks for
// them, Forwarded and the client's X-Forwarded-Host/Proto dropped,
// X-Forwarded-For appended to, no default User-Agent added, unparsable
// query parameters dropped, the upstream's X-Request-Id dropped, a switch
// of protocols nobody asked for refused (502), trailers relayed (declared
// and not), and interim answers (1xx) from h2, h2c and https:// targets
// relayed to HTTP/1.1 clients (fastPool skips them; to an HTTP/2 client
// they are not relayed, which spares every stream a client trace).
//
// Flushes are batched: an answer of known length is written through the
// client's buffer and goes out as it fills and at the end (where the
// HTTP/2 server sends the last data, END_STREAM and any trailers
// together); an answer of unknown length (gRPC, a chunked stream) or an
// event stream (SSE) is flushed when the next read from the upstream may
// wait (from a pooled HTTP/1.1 connection, when its reader holds no
// whole next part: fastBody.ready; from an h2 or h2c target, which cannot
// tell, and to an HTTP/1.1 client, after each part), but not after the
// part that ends it, so that a streamed message reaches the client as it
// arrives, a burst of chunks goes out in one flush, and a one-message gRPC
// answer costs no flush of its own.

// relay sends out, the request Forward prepared from the client's in
// (context, path, body), to t, and writes the answer to rec. It reports
// whether the answer was cut off after its header went out (aborted); a
// failure before that is answered by u.errorHandler.
func (t *target) relay(u *Upstream, rec *recorder, in, out *http.Request) (aborted bool) {
	out.Header = t.outHeader(in)
	out.URL.Scheme, out.URL.Host = t.scheme, t.host
	out.URL.RawQuery = cleanQuery(out.URL.RawQuery)
	out.Host = "" // the target's; the client's is in X-Forwarded-Host
	out.Close = false
	if out.ContentLength == 0 {
		out.Body = nil // no body, whatever the client's framing said
	}
	if out.Body != nil {
		defer out.Body.Close()
	}
	if in.ProtoMajor == 1 && !t.fast {
		out = out.WithContext(httptrace.WithClientTrace(out.Context(), rec.interimTrace()))
	}
	res, err := t.rt.RoundTrip(out)
	if err != nil {
		u.errorHandler(rec, in, err)
		return false
	}
	if res.StatusCode == http.StatusSwitchingProtocols {
		// Only a requested WebSocket may switch (ReverseProxy's, in
		// Forward); the transports do not pool such a connection.
		_ = res.Body.Close()
		u.errorHandler(rec, in, errFastSwitch)
		return false
	}
	delete(res.Header, api.HeaderRequestID) // the client gets the gateway's, once
	removeHop(res.Header)
	dst := rec.Header()
	for k, vv := range res.Header {
		if prior, ok := dst[k]; ok {
			dst[k] = append(prior, vv...)
		} else {
			dst[k] = vv
		}
	}
	announced := len(res.Trailer)
	if announced > 0 {
		names := make([]string, 0, announced)
		for k := range res.Trailer {
			names = append(names, k)
		}
		dst["Trailer"] = append(dst["Trailer"], strings.Join(names, ", "))
	}
	rec.WriteHeader(res.StatusCode)

	var flusher http.Flusher
	var pooled *fastBody // the answer's body from the fastPool: it tells when a Read would wait
	if res.ContentLength < 0 || isEventStream(res.Header) {
		flusher = findFlusher(rec.w)
		if in.ProtoMajor == 2 {
			// (An HTTP/1.1 client's answer is flushed after every
			// part, as ReverseProxy flushed it: net/http's server would
			// give an answer it never flushed a Content-Length, and the
			// upstream chose chunked.)
			pooled, _ = res.Body.(*fastBody)
		}
	}
	buf := t.tr.buffers.Get()
	defer t.tr.buffers.Put(buf)
	for {
		n, rerr := res.Body.Read(buf)
		if n > 0 {
			if _, werr := rec.Write(buf[:n]); werr != nil {
				_ = res.Body.Close()
				return true
			}
			if flusher != nil && rerr == nil && (pooled == nil || !pooled.ready()) {
				flusher.Flush() // the next Read may wait: what came goes out now
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			u.log.Debug("upstream body failed", "route", u.routeID, "target", t.url, "err", rerr)
			_ = res.Body.Close()
			return true
		}
	}
	_ = res.Body.Close() // fills res.Trailer
	if len(res.Trailer) > 0 && in.ProtoMajor == 1 {
		// net/http's HTTP/1.1 server sends the answer chunked, with
		// trailers, only once it is flushed; HTTP/2 needs no such push.
		if f := findFlusher(rec.w); f != nil {
			f.Flush()
		}
	}
	dst = rec.Header() // the writer's map after its header went out (a bridge's is a new one)
	if len(res.Trailer) == announced {
		for k, vv := range res.Trailer {
			dst[k] = append(dst[k], vv...)
		}
		return false
	}
	for k, vv := range res.Trailer {
		k = http.TrailerPrefix + k
		dst[k] = append(dst[k], vv...)
	}
	return false
}

// interimTrace is the client trace that relays an upstream's interim
// answers (1xx but 101) to the client, as ReverseProxy does: each goes out
// with its own header fields, and the header map is cleared after it (the
// final answer's X-Request-Id is set again by WriteHeader).
func (rec *recorder) interimTrace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{Got1xxResponse: func(code int, header textproto.MIMEHeader) error {
		h := rec.Header()
		for k, vv := range header {
			h[k] = append(h[k], vv...)
		}
		rec.WriteHeader(code)
		clear(h)
		return nil
	}}
}

// Shared read-only header values (an append copies them: capacity 1).
var (
	valTrailers = []string{"trailers"}
	valHTTP     = []string{"http"}
	valHTTPS    = []string{"https"}
	valEmpty    = []string{""}
)

// outHeader is in's header as it goes to t: in one pass, less the
// hop-by-hop fields (and those Connection lists), Forwarded and the
// client's X-Forwarded-*; then X-Forwarded-For (the client's list and the
// peer), X-Forwarded-Host, X-Forwarded-Proto and Via (RFC 9110 §7.6.3,
// appended to any the request came with: it lets this node, and others,
// recognise a request that loops). The values are in's (shared, not
// copied: neither side changes them).
func (t *target) outHeader(in *http.Request) http.Header {
	src := in.Header
	h := make(http.Header, len(src)+4)
	for k, vv := range src {
		switch k {
		case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
			"Trailer", "Transfer-Encoding", "Upgrade",
			"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto":
			continue
		case "Te":
			if hasToken(vv, "trailers") {
				h["Te"] = valTrailers
			}
			continue
		}
		h[k] = vv
	}
	if c := src["Connection"]; len(c) > 0 {
		dropListed(h, c)
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = valEmpty // no Go default in the client's place
	}
	vals := make([]string, 2) // X-Forwarded-Host's and -For's, in one allocation
	vals[0] = in.Host
	h["X-Forwarded-Host"] = vals[0:1:1]
	if ip, _, err := net.SplitHostPort(in.RemoteAddr); err == nil {
		if prior := src["X-Forwarded-For"]; len(prior) > 0 {
			ip = strings.Join(prior, ", ") + ", " + ip
		}
		vals[1] = ip
		h["X-Forwarded-For"] = vals[1:2:2]
	}
	if in.TLS != nil {
		h["X-Forwarded-Proto"] = valHTTPS
	} else {
		h["X-Forwarded-Proto"] = valHTTP
	}
	if prior := src["Via"]; len(prior) > 0 {
		h["Via"] = append(slices.Clip(prior), t.tr.viaValue(in.ProtoMajor, in.ProtoMinor))
	} else {
		h["Via"] = t.tr.viaHeader(in.ProtoMajor, in.ProtoMinor)
	}
	return h
}

// removeHop deletes h's hop-by-hop fields (RFC 9110 §7.6.1, the list
// ReverseProxy removes) and those its Connection field lists.
func removeHop(h http.Header) {
	if c := h["Connection"]; len(c) > 0 {
		dropListed(h, c)
	}
	for _, k := range [...]string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"} {
		delete(h, k)
	}
}

// dropListed deletes from h the fields the Connection values conn name.
func dropListed(h http.Header, conn []string) {
	for _, v := range conn {
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				delete(h, http.CanonicalHeaderKey(f))
			}
		}
	}
}

// hasToken reports whether the comma-separated values vv hold token, in
// any case.
func hasToken(vv []string, token string) bool {
	for _, v := range vv {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), token) {
				return true
			}
		}
	}
	return false
}

// isEventStream reports whether an answer with header h is an event
// stream (text/event-stream, SSE), whose parts must reach the client as
// they come even when its length is known.
func isEventStream(h http.Header) bool {
	v := h["Content-Type"]
	if len(v) == 0 {
		return false
	}
	const es = "text/event-stream"
	ct := strings.TrimLeft(v[0], " \t")
	if len(ct) < len(es) || !strings.EqualFold(ct[:len(es)], es) {
		return false
	}
	return len(ct) == len(es) || ct[len(es)] == ';' || ct[len(es)] == ' ' || ct[len(es)] == '\t'

}

// findFlusher is w's Flusher, through Unwrap, or nil.
func findFlusher(w http.ResponseWriter) http.Flusher {
	for {
		switch f := w.(type) {
		case http.Flusher:
			return f
		case interface{ Unwrap() http.ResponseWriter }:
			w = f.Unwrap()
		default:
			return nil
		}
	}
}

// cleanQuery is the query s less what url.ParseQuery cannot read (a
// semicolon, a bad escape), re-encoded then, as ReverseProxy forwards it;
// a clean query is kept as it is.
func cleanQuery(s string) string {
	for i := 0; i < len(s); {
		switch s[i] {
		case ';':
			return reencodeQuery(s)
		case '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return reencodeQuery(s)
			}
			i += 3
		default:
			i++
		}
	}
	return s
}

func reencodeQuery(s string) string {
	v, _ := url.ParseQuery(s)
	return v.Encode()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
