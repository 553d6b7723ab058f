package snapshot

import (
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicegw/sluice/dataplane/proxy"
	"github.com/sluicegw/sluice/dataplane/reqview"
)

// Span attributes of a request's span, beside OpenTelemetry's HTTP ones
// (http.request.method, url.path, http.response.status_code).
const (
	// AttrRoute is the matched route's id.
	AttrRoute = "sluice.route"
	// AttrUpstream is the route's upstream targets (a list).
	AttrUpstream = "sluice.upstream"
	// AttrDecisionPrefix starts the attribute of each rule that decided
	// on the request (sluice.decision.<rule id>): admit, reject, shadow,
	// exempt, shed or refuse (reqview's Decision constants).
	AttrDecisionPrefix = "sluice.decision."
)

// reqSpan is the span of one sampled request (see package tracing), from
// decide to the request's end (finish), which may come long after the
// decision (a forward, a body the engine streams). It is allocated only for a sampled
// request: every other request carries a nil *reqSpan.
type reqSpan struct {
	span      trace.Span
	wallStart int64 // Unix nanoseconds
	start     int64 // the request path's clock (Snapshot.now)
	decisions reqview.Decisions
}

// beginSpan starts the span of the request v, matched to route (nil for
// none), at start (the request path's clock), when the request is sampled;
// it returns nil, having allocated nothing, otherwise, and a trace the
// gateway started goes upstream unsampled (reqview.Trace.Unsample). A
// sampled request in the client's trace goes upstream with the span's
// traceparent (reqview.Trace.SetParentID); one the gateway started already
// goes with its span's id. The
// view of a sampled request collects the rules' decisions (v.Decisions)
// for the span.
func (s *Snapshot) beginSpan(v *reqview.View, route *proxy.Route, start int64) *reqSpan {
	tp := s.tracer
	if !tp.Sampled(v.Trace.Parent, v.Trace.Started) {
		v.Trace.Unsample() // a trace started here and not recorded: -00 upstream
		return nil
	}
	wall := s.wall()
	name := strings.Clone(v.Method) // the view's strings may point into the engine's buffers
	attrs := []attribute.KeyValue{
		attribute.String("http.request.method", name),
		attribute.String("url.path", strings.Clone(v.Path)),
	}
	if route != nil {
		name += " " + route.ID
		attrs = append(attrs, attribute.String(AttrRoute, route.ID))
	}
	span := tp.StartRequest(v.Trace.Parent, v.Trace.Started, name, time.Unix(0, wall), attrs...)
	if span == nil {
		return nil
	}
	if !v.Trace.Started {
		// The upstream's spans nest under this one: it is the parent the
		// request goes with (the client's tracestate kept), in every
		// forward path (proxy.FastRequest.Traceparent, or the header).
		v.Trace.SetParentID(span.SpanContext().SpanID())
		if h := v.BuiltHeader(); h != nil {
			v.Trace.Carry(h)
		}
	}
	sp := &reqSpan{span: span, wallStart: wall, start: start}
	v.Decisions = &sp.decisions
	return sp
}

// end ends the span at end (the request path's clock) with the request's
// status, its route's upstream and the rules' decisions. A nil sp does
// nothing.
func (sp *reqSpan) end(rt *route, end int64, status int) {
	if sp == nil {
		return
	}
	ds := sp.decisions.All()
	attrs := make([]attribute.KeyValue, 0, 2+len(ds))
	attrs = append(attrs, attribute.Int("http.response.status_code", status))
	if rt != nil {
		attrs = append(attrs, attribute.StringSlice(AttrUpstream, rt.upstream.Targets()))
	}
	for _, d := range ds {
		attrs = append(attrs, attribute.String(AttrDecisionPrefix+d.Rule, d.Outcome))
	}
	sp.span.SetAttributes(attrs...)
	if status >= 500 {
		sp.span.SetStatus(codes.Error, "")
	}
	sp.span.End(trace.WithTimestamp(time.Unix(0, sp.wallStart+(end-sp.start))))
}
