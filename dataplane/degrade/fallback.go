package degrade

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicegw/sluice/dataplane/answer"
	"github.com/sluicegw/sluice/dataplane/reqview"
)

type fallback struct {
	status     int
	retryAfter time.Duration // 0: see RetryAfter
	html       []byte
	json       []byte
}

// Body kinds chosen by negotiate.
type bodyKind uint8

const (
	bodyNone bodyKind = iota
	bodyHTML
	bodyJSON
)

// negotiate picks the fallback body for an Accept header value.
//
// Each media range of Accept gets its q (1 when absent). The HTML fallback
// matches "text/html" and "text/*" only: a bare "*/*" is not a request for
// HTML, so curl and API clients never receive a page. The JSON fallback
// matches "application/json", "application/*" and "*/*"; a missing or empty
// Accept counts as "*/*". Each kind takes the q of its most specific matching
// range. Among the configured kinds with q > 0 the highest q wins; on equal q
// the more specific match, then the range listed first. Nothing left means no
// body (the bare status and Retry-After).
//
// So a browser ("text/html,...,*/*;q=0.8") gets HTML, "application/json" or
// "*/*" gets JSON, and "text/plain" or "image/png" gets no body.
func negotiate(accept string, hasHTML, hasJSON bool) bodyKind {
	if strings.TrimSpace(accept) == "" {
		accept = "*/*"
	}
	type match struct {
		q    float64
		spec int // -1: no match
		pos  int
	}
	html, js := match{spec: -1}, match{spec: -1}
	pos := 0
	for rest := accept; rest != ""; pos++ {
		var part string
		part, rest, _ = strings.Cut(rest, ",")
		media, params, _ := strings.Cut(part, ";")
		media = strings.ToLower(strings.TrimSpace(media))
		q := 1.0
		for params != "" {
			var p string
			p, params, _ = strings.Cut(params, ";")
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f >= 0 && f <= 1 {
					q = f
				}
			}
		}
		consider := func(m *match, spec int) {
			if spec > m.spec {
				*m = match{q: q, spec: spec, pos: pos}
			}
		}
		switch media {
		case "text/html":
			consider(&html, 2)
		case "text/*":
			consider(&html, 1)
		case "application/json":
			consider(&js, 2)
		case "application/*":
			consider(&js, 1)
		case "*/*":
			consider(&js, 0)
		}
	}
	okHTML := hasHTML && html.spec >= 0 && html.q > 0
	okJSON := hasJSON && js.spec >= 0 && js.q > 0
	switch {
	case okHTML && okJSON:
		if html.q != js.q {
			if html.q > js.q {
				return bodyHTML
			}
			return bodyJSON
		}
		if html.spec != js.spec {
			if html.spec > js.spec {
				return bodyHTML
			}
			return bodyJSON
		}
		if html.pos <= js.pos {
			return bodyHTML
		}
		return bodyJSON
	case okHTML:
		return bodyHTML
	case okJSON:
		return bodyJSON
	}
	return bodyNone
}

// RetryAfter returns the Retry-After a shed request receives at now: the
// rule's fallback retryAfter when set; otherwise the time left of an active
// override; otherwise, in auto mode, the shortest time before the level may
// step down (window × effective recoverAfter); in manual mode one window.
// It is rounded up to whole seconds, at least one.
func (c *Controller) RetryAfter(now int64) time.Duration {
	d := c.fb.retryAfter
	if d <= 0 {
		switch o := c.ov.Load(); {
		case o != 0 && now < int64(o>>2):
			d = time.Duration(int64(o>>2) - now)
		case c.auto:
			d = time.Duration(c.windowNs * c.ra.Load())
		default:
			d = time.Duration(c.windowNs)
		}
	}
	return max(time.Second, (d+time.Second-1)/time.Second*time.Second)
}

// WriteFallback answers a request Admit shed: the rule's fallback status (503
// by default), Retry-After (see RetryAfter), Vary: Accept, and the body the
// request's Accept header chooses (see negotiate in the source: HTML for
// browsers, JSON for API clients, otherwise none). A gRPC request
// (answer.IsGRPC) gets grpc-status 14 UNAVAILABLE naming the rule instead.
func (c *Controller) WriteFallback(w http.ResponseWriter, r *http.Request, now int64) {
	v := reqview.FromRequest(r)
	c.WriteFallbackView(w, &v, now)
}

// WriteFallbackView is WriteFallback for the request view v (its Accept
// header and method), for any serving stack.
func (c *Controller) WriteFallbackView(w http.ResponseWriter, v *reqview.View, now int64) {
	h := w.Header()
	answer.SetRetryAfter(h, int64(c.RetryAfter(now)/time.Second))
	h.Set("Cache-Control", "no-store")
	if answer.IsGRPC(v.Header()) { // grpc-status 14 UNAVAILABLE naming the rule
		answer.WriteGRPCStatus(w, v.Header(), c.fb.status, answer.GRPCUnavailable, "degrade "+strconv.Quote(c.rule)+" shed the request")
		return
	}
	h.Set("Vary", "Accept")
	var body []byte
	switch negotiate(v.Header().Get("Accept"), len(c.fb.html) > 0, len(c.fb.json) > 0) {
	case bodyHTML:
		body = c.fb.html
		h.Set("Content-Type", "text/html; charset=utf-8")
	case bodyJSON:
		body = c.fb.json
		h.Set("Content-Type", "application/json")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(c.fb.status)
	if len(body) > 0 && v.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}
