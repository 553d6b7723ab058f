package snapshot

import (
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/answer"
	"github.com/sluicegw/sluice/dataplane/breaker"
	"github.com/sluicegw/sluice/dataplane/proxy"
	"github.com/sluicegw/sluice/dataplane/reqview"
)

// Exchange is one request's response side as a serving stack hands it to
// the request path (Decide); the request itself is its reqview.View. The
// path decides on the view alone and writes only through the Exchange (the
// gateway's own answers), and returns what it decided: an answer written,
// or a forward to make (Plan), which the stack makes its own way and then
// reports (Plan.Finish). The path never calls the stack back to forward,
// so each stack (net/http's ServeHTTP, the event loop's ServeLoop, the
// engine's off-loop ServeFast) drives the same decision with no decision
// written twice. Methods are called from the request's goroutine only.
type Exchange interface {
	// ResponseWriter receives the answers the gateway writes itself (400,
	// 404, 429, 503) and the headers rules set on a forwarded answer
	// (RateLimit, X-Request-Id).
	http.ResponseWriter
	// Routed is called once the route is known, before any rule reads the
	// view: the stack applies the route's body timeout and its
	// protocol-switch policy (proxy.FilterUpgrade) to the request.
	Routed(u *proxy.Upstream)
	// Status is the status of the answer written through the
	// ResponseWriter so far (200 for a body without WriteHeader), 0 for
	// none: what the gateway's own answers are recorded as.
	Status() int
}

// ServeHTTP serves one request from net/http: it builds the request's view
// (request id, trace context, client address; see package reqview) and runs
// Serve on it. It writes every answer itself (404, 400, 429, 503, 502/504
// or the upstream's response).
func (s *Snapshot) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v := reqview.FromRequest(r)
	v.RequestID = answer.EnsureRequestID(w, r)
	v.Trace = reqview.EnsureTrace(r.Header) // forwarded upstream with the request
	v.ClientIP, v.TrustedPeer = s.clientIP(r)
	x := exchanges.Get().(*httpExchange)
	x.ResponseWriter, x.r = w, r
	var aborted bool
	if p := s.Decide(x, &v); p != nil {
		out := p.Upstream().Forward(w, r, p.Match())
		p.Finish(out, nil)
		aborted = out.Aborted
	}
	*x = httpExchange{}
	exchanges.Put(x)
	if aborted {
		// The upstream's body was cut off after its header went out: abort the
		// client's response too rather than let it look complete.
		panic(http.ErrAbortHandler)
	}
}

// httpExchange is the net/http Exchange.
type httpExchange struct {
	http.ResponseWriter
	r      *http.Request
	status int
}

func (x *httpExchange) WriteHeader(code int) {
	if x.status == 0 {
		x.status = code
	}
	x.ResponseWriter.WriteHeader(code)
}

func (x *httpExchange) Write(b []byte) (int, error) {
	if x.status == 0 {
		x.status = http.StatusOK
	}
	return x.ResponseWriter.Write(b)
}

func (x *httpExchange) Status() int { return x.status }

// RecordStatus records the HTTP status a gRPC answer (sent as 200) stands
// for: see answer.StatusRecorder.
func (x *httpExchange) RecordStatus(code int) { x.status = code }

var exchanges = sync.Pool{New: func() any { return new(httpExchange) }}

func (x *httpExchange) Routed(u *proxy.Upstream) {
	u.GuardBody(x.ResponseWriter, x.r) // the route's bodyTimeout, before any 429 or 503
	proxy.FilterUpgrade(x.r)           // only WebSocket may switch protocols
}

// Decide runs the request path on one request up to the forward: match →
// identity → key check → degrade → limits → breaker. v must carry the
// request's RequestID, Trace and ClientIP (the serving stack fills them);
// Decide sets its cleaned Path and RouteID. Every stage reads the request
// only through v and answers only through x. It returns nil when the
// gateway answered (x holds the answer, which is recorded, and nothing is
// held), or the Plan of the forward the path chose: the caller forwards
// (Plan.Upstream, on Plan.Match's path) and then reports the outcome with
// Plan.Finish, once, after the answer's body is written, which records it
// (breaker, degrade, metrics) and ends the limits' hold.
func (s *Snapshot) Decide(x Exchange, v *reqview.View) *Plan {
	p := plans.Get().(*Plan)
	if !s.decideAt(x, v, s.router.MatchView(v), s.now(), p) {
		plans.Put(p)
		return nil
	}
	return p
}

// decideAt is Decide on a request matched (m) at start, planning into p:
// the access log's line, the decision (decide), and the preview's look at
// it (observePreview). It reports whether it planned a forward.
func (s *Snapshot) decideAt(x Exchange, v *reqview.View, m proxy.Match, start int64, p *Plan) bool {
	if s.access != nil {
		s.access.Record(v, s.wall())
	}
	planned := s.decide(x, v, m, start, p)
	s.observePreview(v)
	return planned
}

var plans = sync.Pool{New: func() any { return new(Plan) }}

// Plan is a forward the request path decided on (Decide): where to (its
// route's upstream, on the matched path) and what its outcome is to
// record, with the limits' hold, which lasts until Finish.
type Plan struct {
	s      *Snapshot
	rt     *route
	m      proxy.Match
	sp     *reqSpan // nil unless the request is traced
	ticket breaker.Ticket
	start  int64
	lat    reqview.Latencies // the request's (View.Latencies), for finish
	done   func()            // the limits' release, nil for none
}

// Upstream is the upstream the request is forwarded to.
func (p *Plan) Upstream() *proxy.Upstream { return p.rt.upstream }

// Match is the request's match: the path it is forwarded on (Match.Path).
func (p *Plan) Match() proxy.Match { return p.m }

// Finish reports the forward's outcome, once its answer is written: end is
// how a body streamed after the forward returned ended (nil for whole, as
// for an answer written by the forward itself: see proxy.Upstream.EndFast).
// It records the outcome and ends the limits' hold; p is not to be used
// after.
func (p *Plan) Finish(out proxy.Outcome, end error) {
	p.finish(out, end)
	*p = Plan{}
	plans.Put(p)
}

// finish is Finish without freeing p (a Plan held in an exchange).
func (p *Plan) finish(out proxy.Outcome, end error) {
	if end != nil {
		out = p.rt.upstream.EndFast(out, end)
	}
	p.s.report(p.rt, p.sp, &p.lat, p.ticket, p.start, out)
	if p.done != nil {
		p.done()
	}
}

// observePreview has the node's running preview, if any, decide v in
// shadow, after the live decision. A preview of the rules this snapshot
// runs (its change was published) has nothing left to show and observes
// nothing.
func (s *Snapshot) observePreview(v *reqview.View) {
	if s.preview == nil {
		return
	}
	if p := s.preview.Load(); p != nil && p.Active(s.wall()) && p.Checksum() != s.Checksum {
		p.Observe(v)
	}
}

// decide is Decide once the request is matched (m), from start: it
// reports whether it planned a forward (in p), or answered.
func (s *Snapshot) decide(x Exchange, v *reqview.View, m proxy.Match, start int64, p *Plan) bool {
	v.Path = m.Path
	var sp *reqSpan // nil unless this request is traced
	if s.tracer != nil {
		sp = s.beginSpan(v, m.Route, start)
	}
	if m.Invalid != "" {
		answer.WriteProblemID(x, v.Header(), v.RequestID, http.StatusBadRequest, "Bad request", m.Invalid)
		s.metrics.Requests.WithLabelValues("", "400").Inc()
		s.metrics.Served.Count(http.StatusBadRequest)
		sp.end(nil, s.now(), http.StatusBadRequest)
		return false
	}
	if m.Route == nil {
		answer.WriteNoRouteID(x, v.Header(), v.RequestID)
		s.metrics.Requests.WithLabelValues("", "404").Inc()
		s.metrics.Served.Count(http.StatusNotFound)
		sp.end(nil, s.now(), http.StatusNotFound)
		return false
	}
	rt := s.routes[m.Route.ID]
	v.RouteID = rt.id
	x.Routed(rt.upstream)
	// The identity step first: a present but invalid token is answered
	// 401 before anything else reads the request, and never keyed as an
	// anonymous caller; a valid one's claims are what jwt: key parts,
	// tiers and classes read.
	if ir := rt.identity; ir != nil && !s.checkIdentity(x, v, ir, s.wall()) {
		v.Decisions.Add(ir.verifier.ID(), reqview.DecisionRefuse)
		s.finish(rt, sp, nil, start, s.now(), http.StatusUnauthorized)
		return false
	}
	// A request whose key parts could be read two ways is refused before
	// anything decides on them, so nothing is consumed for it; the values
	// checked are kept in v for degrade and limits.
	if err := rt.keys.ReadView(v); err != nil {
		answer.WriteProblemID(x, v.Header(), v.RequestID, http.StatusBadRequest, "Ambiguous request", err.Error())
		s.finish(rt, sp, nil, start, s.now(), http.StatusBadRequest)
		return false
	}
	v.Class = s.classes.Classify(v, rt.id) // priority class: degrade's shedOrder, limits' reserve

	// Degrade first: shed traffic costs no limit tokens and never reaches a
	// failing upstream.
	if d := rt.degrade; d != nil {
		if shed, _ := d.AdmitView(v, start); shed {
			v.Decisions.Add(d.Rule(), reqview.DecisionShed)
			d.WriteFallbackView(x, v, start)
			s.finish(rt, sp, nil, start, s.now(), x.Status())
			return false
		}
	}
	var done func()
	if c := rt.limits; c != nil {
		d, ok := c.AdmitView(x, v)
		if !ok {
			status := x.Status()
			if status == 0 {
				status = statusClientClosed // gone while waiting in a leaky bucket
			}
			s.finish(rt, sp, nil, start, s.now(), status)
			return false
		}
		done = d
	}
	var ticket breaker.Ticket
	if b := rt.breaker; b != nil {
		t, err := b.Allow(start)
		if err != nil {
			s.limits.LogDecision(v, slog.LevelWarn, reqview.MsgBreaker, b.Rule(), "refuse")
			v.Decisions.Add(b.Rule(), reqview.DecisionRefuse)
			b.WriteFallbackMethod(x, v.Method, v.Header(), start)
			s.finish(rt, sp, &v.Latencies, start, s.now(), x.Status())
			if done != nil {
				done()
			}
			return false
		}
		ticket = t
	}
	*p = Plan{s: s, rt: rt, m: m, sp: sp, ticket: ticket, start: start, lat: v.Latencies, done: done}
	return true
}

// report records a forwarded request's outcome: breaker, degrade, and its
// route's series and lat (finish).
func (s *Snapshot) report(rt *route, sp *reqSpan, lat *reqview.Latencies, ticket breaker.Ticket, start int64, out proxy.Outcome) {
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
	if !out.ClientGone {
		s.recordPreview(rt.id, end, !failed)
	}
	s.finish(rt, sp, lat, start, end, out.Status)
}

// recordPreview feeds a forwarded request's upstream outcome to the running
// preview's degrade plans (preview.Preview.Record), under the same
// conditions as observePreview. Without a preview it costs one atomic load.
func (s *Snapshot) recordPreview(routeID string, end int64, success bool) {
	if s.preview == nil {
		return
	}
	if p := s.preview.Load(); p != nil && p.Active(s.wall()) && p.Checksum() != s.Checksum {
		p.Record(routeID, end, success)
	}
}

// finish records one answered request: its route's series, the node's
// totals (metrics.Served), the histograms of the limit variants that let it
// through (lat, nil before the limits decided), and its span, if it is
// traced (sp not nil).
func (s *Snapshot) finish(rt *route, sp *reqSpan, lat *reqview.Latencies, start, end int64, status int) {
	secs := float64(end-start) / 1e9
	rt.codes.inc(status)
	rt.duration.Observe(secs)
	if lat != nil {
		lat.Observe(secs)
	}
	s.metrics.Served.Record(status, secs)
	sp.end(rt, end, status)
}

// clientIP is the address limits and degrade key on: the peer, or the
// X-Forwarded-For client when the peer is a trusted proxy; and whether the
// peer is one (reqview.View.TrustedPeer).
func (s *Snapshot) clientIP(r *http.Request) (netip.Addr, bool) { return clientIP(r, s.trusted) }

// clientIP is the client address of r behind the trusted proxies (api.ClientIP)
// and whether r's peer is one of them.
func clientIP(r *http.Request, trusted []netip.Prefix) (netip.Addr, bool) {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	var a netip.Addr
	if err == nil {
		a = peer.Addr()
	} else if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		a, _ = netip.ParseAddr(host)
	}
	if len(trusted) == 0 {
		return a.Unmap(), false
	}
	return api.ClientIP(a, r.Header.Values("X-Forwarded-For"), trusted), trustedPeer(a, trusted)
}

// trustedPeer reports whether the connection's peer a is in the trusted
// proxies (as api.ClientIP judges it: IPv4-mapped addresses as IPv4, zones
// dropped).
func trustedPeer(a netip.Addr, trusted []netip.Prefix) bool {
	a = a.Unmap().WithZone("")
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// statusClientClosed is the status recorded (never sent) for a client that
// went away before an answer, as nginx does.
const statusClientClosed = proxy.StatusClientClosed
