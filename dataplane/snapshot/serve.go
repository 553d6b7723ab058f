package snapshot

import (
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/breaker"
	"github.com/sluicegw/sluice/dataplane/limit"
	"github.com/sluicegw/sluice/dataplane/proxy"
)

// ServeHTTP serves one request: match → key check → degrade → limits →
// breaker → proxy → record. It writes every answer itself (404, 400, 429,
// 503, 502/504 or the upstream's response).
func (s *Snapshot) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := s.now()
	reqID := proxy.EnsureRequestID(w, r)
	m := s.router.Match(r)
	if m.Invalid != "" {
		proxy.WriteProblem(w, r, http.StatusBadRequest, "Bad request", m.Invalid)
		s.metrics.Requests.WithLabelValues("", "400").Inc()
		s.metrics.Served.Count(http.StatusBadRequest)
		return
	}
	if m.Route == nil {
		proxy.WriteNoRoute(w, r)
		s.metrics.Requests.WithLabelValues("", "404").Inc()
		s.metrics.Served.Count(http.StatusNotFound)
		return
	}
	rt := s.routes[m.Route.ID]
	rt.upstream.GuardBody(w, r) // the route's bodyTimeout, before any 429 or 503
	// A request whose key parts could be read two ways is refused before
	// anything decides on them, so nothing is consumed for it.
	var kv limit.KeyValues // the checked key parts, read once for degrade and limits
	if err := rt.keys.Read(r, &kv); err != nil {
		proxy.WriteProblem(w, r, http.StatusBadRequest, "Ambiguous request", err.Error())
		s.finish(rt, start, s.now(), http.StatusBadRequest)
		return
	}
	proxy.FilterUpgrade(r) // only WebSocket may switch protocols
	client := s.clientIP(r)
	class := s.classes.Classify(r, rt.id) // priority class: degrade's shedOrder, limits' reserve

	// Degrade first: shed traffic costs no limit tokens and never reaches a
	// failing upstream.
	if d := rt.degrade; d != nil {
		if shed, _ := d.AdmitClass(d.KeyHashValues(r, &kv, client, rt.id), class, start); shed {
			sw := &statusWriter{ResponseWriter: w}
			d.WriteFallback(sw, r, start)
			s.finish(rt, start, s.now(), sw.status)
			return
		}
	}
	if c := rt.limits; c != nil {
		sw := &statusWriter{ResponseWriter: w}
		done, ok := c.AdmitValues(sw, r, limit.RequestInfo{RouteID: rt.id, ClientIP: client, RequestID: reqID, Class: class}, &kv)
		if !ok {
			if sw.status == 0 {
				sw.status = statusClientClosed // gone while waiting in a leaky bucket
			}
			s.finish(rt, start, s.now(), sw.status)
			return
		}
		defer done()
	}
	var ticket breaker.Ticket
	if b := rt.breaker; b != nil {
		t, err := b.Allow(start)
		if err != nil {
			sw := &statusWriter{ResponseWriter: w}
			b.WriteFallback(sw, r, start)
			s.finish(rt, start, s.now(), sw.status)
			return
		}
		ticket = t
	}
	out := rt.upstream.Forward(w, r, m)
	end := s.now()
	failed := rt.breaker.IsFailure(out.Status, out.Err != nil) // a nil breaker counts 5xx
	if b := rt.breaker; b != nil && out.ClientGone {
		b.Release(ticket) // no outcome: neither a success nor a failure
	} else if b != nil {
		dur := time.Duration(end - start)
		if out.Upgraded {
			dur = 0 // a WebSocket's duration is its whole life, not a slow call
		}
		b.Done(ticket, end, failed, dur)
	}
	if d := rt.degrade; d != nil && !out.ClientGone {
		d.Record(end, !failed)
	}
	s.finish(rt, start, end, out.Status)
	if out.Aborted {
		// The upstream's body was cut off after its header went out: abort the
		// client's response too rather than let it look complete.
		panic(http.ErrAbortHandler)
	}
}

// finish records one answered request: its route's series, and the node's
// totals (metrics.Served).
func (s *Snapshot) finish(rt *route, start, end int64, status int) {
	secs := float64(end-start) / 1e9
	rt.codes.inc(status)
	rt.duration.Observe(secs)
	s.metrics.Served.Record(status, secs)
}

// clientIP is the address limits and degrade key on: the peer, or the
// X-Forwarded-For client when the peer is a trusted proxy.
func (s *Snapshot) clientIP(r *http.Request) netip.Addr {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	var a netip.Addr
	if err == nil {
		a = peer.Addr()
	} else if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		a, _ = netip.ParseAddr(host)
	}
	if len(s.trusted) == 0 {
		return a.Unmap()
	}
	return api.ClientIP(a, r.Header.Values("X-Forwarded-For"), s.trusted)
}

// statusClientClosed is the status recorded (never sent) for a client that
// went away before an answer, as nginx does.
const statusClientClosed = proxy.StatusClientClosed

// statusWriter remembers the status of an answer the gateway writes itself
// (fallbacks and rejections), for sluice_requests_total.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (sw *statusWriter) WriteHeader(code int) {
	if sw.status == 0 {
		sw.status = code
	}
	sw.ResponseWriter.WriteHeader(code)
}

func (sw *statusWriter) Write(b []byte) (int, error) {
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	return sw.ResponseWriter.Write(b)
}
