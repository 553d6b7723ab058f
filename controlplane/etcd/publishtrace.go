package etcd

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	sluice "github.com/sluicegw/sluice/controlplane"
)

// The publisher's spans (Settings.Tracer): one per outbox operation
// (spanPublish), each a trace of its own (the operation runs after the API
// request that queued it has been answered) linked to the span that queued
// it (sluice.Publication.Traceparent: the API request's
// sluice.change.publish), with a child for the signing of each value
// (spanSign) and one for each etcd write (spanWrite).
const (
	spanPublish = "sluice.publish"
	spanSign    = "sluice.publish.sign"
	spanWrite   = "etcd.write"
)

var noopTracer = noop.NewTracerProvider().Tracer("")

func (p *Publisher) tracer() trace.Tracer {
	if p.s.Tracer == nil {
		return noopTracer
	}
	return p.s.Tracer
}

// startPublish starts the span of one outbox operation on v.
func (p *Publisher) startPublish(ctx context.Context, v *sluice.Version, pub *sluice.Publication) (context.Context, trace.Span) {
	kind := string(pub.Kind)
	if kind == "" {
		kind = string(sluice.PublishRuleSet)
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attribute.String("sluice.namespace", v.Namespace), attribute.Int64("sluice.version", v.Number),
		attribute.String("sluice.publish.kind", kind), attribute.Int("sluice.publish.attempt", pub.Attempts+1))}
	if l, ok := sluice.SpanLink(pub.Traceparent); ok {
		opts = append(opts, trace.WithLinks(l))
	}
	return p.tracer().Start(ctx, spanPublish, opts...)
}

// endPublish ends the operation's span with its outcome: published (with
// the etcd revision), retry or failed.
func endPublish(span trace.Span, out sluice.PublishOutcome) {
	result := "published"
	switch {
	case out.Err != nil && out.Final:
		result = "failed"
	case out.Err != nil:
		result = "retry"
	}
	span.SetAttributes(attribute.String("sluice.publish.result", result), attribute.Int64("etcd.revision", out.Revision))
	if out.Err != nil {
		span.SetStatus(codes.Error, out.Err.Error())
	}
	span.End()
}

// spanned runs fn in a child span name of ctx's span with attrs, marking
// the span failed when fn fails.
func (p *Publisher) spanned(ctx context.Context, name string, fn func(ctx context.Context) error, attrs ...attribute.KeyValue) error {
	ctx, span := p.tracer().Start(ctx, name, trace.WithAttributes(attrs...))
	defer span.End()
	err := fn(ctx)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}
