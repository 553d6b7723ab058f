package sluice

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Actor is who makes a request, as the audit log and the review rules see it.
// The HTTP layer puts it in the request's context; services read it with
// ActorFromContext.
type Actor struct {
	// User is the authenticated user; nil for an anonymous request.
	User *User
	// Role is the effective role: the user's, or the lesser of an API
	// token's and its owner's.
	Role Role
	// TokenID is the API token that authenticated the request, if any.
	TokenID int64
	// RequestID and ClientAddr are recorded with every audit event.
	RequestID  string
	ClientAddr string
}

// Name returns the actor's user name, or "anonymous".
func (a Actor) Name() string {
	if a.User == nil {
		return "anonymous"
	}
	return a.User.Username
}

type actorKey struct{}

// NewContextWithActor returns a copy of ctx carrying a.
func NewContextWithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFromContext returns the actor in ctx, or the zero (anonymous) Actor.
func ActorFromContext(ctx context.Context) Actor {
	a, _ := ctx.Value(actorKey{}).(Actor)
	return a
}

// traceContext writes and reads W3C traceparent values.
var traceContext propagation.TraceContext

// Traceparent returns the W3C traceparent of ctx's span, "" when ctx
// carries none (tracing off): what an operation queued for later records,
// so that the span it runs in then can link to the one that queued it
// (SpanLink).
func Traceparent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	traceContext.Inject(ctx, c)
	return c["traceparent"]
}

// SpanLink returns the link to the span whose traceparent Traceparent
// returned, and false for "" or a value that is not a valid traceparent.
func SpanLink(traceparent string) (trace.Link, bool) {
	if traceparent == "" {
		return trace.Link{}, false
	}
	sc := trace.SpanContextFromContext(traceContext.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent}))
	return trace.Link{SpanContext: sc}, sc.IsValid()
}
