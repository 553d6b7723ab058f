package http

import (
	"context"
	"strconv"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// traceContext reads and writes W3C traceparent and tracestate.
var traceContext propagation.TraceContext

// trace is the middleware that records a span per admin API request
// (Settings.Tracer; sluice-admin's --otlp-endpoint): a server span named
// for the method and the matched route, the child of the caller's
// traceparent when it sent one, with the request id, route and status.
// Handlers that trace further (the database, etcd) find it in the
// request's context.
func (srv *Server) trace(c *gin.Context) {
	r := c.Request
	ctx := traceContext.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := srv.s.Tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", methodLabel(r.Method)), attribute.String("url.path", r.URL.Path)))
	defer span.End()
	c.Request = r.WithContext(ctx)
	c.Next()
	route := c.FullPath()
	if route != "" {
		span.SetName(methodLabel(r.Method) + " " + route)
		span.SetAttributes(attribute.String("http.route", route))
	}
	status := c.Writer.Status()
	span.SetAttributes(attribute.Int("http.response.status_code", status), attribute.String("sluice.request_id", c.GetString(ctxRequestID)))
	if status >= 500 {
		span.SetStatus(codes.Error, strconv.Itoa(status))
	}
}

// Spans of the requests that queue a publication, children of the
// request's span: the outbox row records the span (sluice.Traceparent), and
// the publisher's span, which writes etcd later, links to it.
const (
	spanChangePublish = "sluice.change.publish"
	spanRollback      = "sluice.version.rollback"
	spanCanaryPromote = "sluice.canary.promote"
	spanCanaryAbort   = "sluice.canary.abort"
)

// span starts a child span name of ctx's (the request's) with the
// namespace ns and attrs, when tracing is on; end ends it, failed when err
// is not nil.
func (srv *Server) span(ctx context.Context, name, ns string, attrs ...attribute.KeyValue) (_ context.Context, end func(err error)) {
	if srv.s.Tracer == nil {
		return ctx, func(error) {}
	}
	ctx, span := srv.s.Tracer.Start(ctx, name, trace.WithAttributes(append(attrs, attribute.String("sluice.namespace", ns))...))
	return ctx, func(err error) {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
