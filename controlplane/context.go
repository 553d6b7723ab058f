package sluice

import "context"

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
