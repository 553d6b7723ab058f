// Package answer writes the answers the gateway gives itself, rather than
// an upstream: the one problem+json writer (WriteProblem, WriteProblemID,
// WriteNoRoute), the gRPC status answer a gRPC client gets instead
// (IsGRPC, WriteGRPCStatus, GRPCCodeFor), the request id every answer
// carries (EnsureRequestID, NewRequestID, AppendRequestID), and the
// RateLimit, RateLimit-Policy and Retry-After fields (RateLimitPolicy,
// SetRetryAfter).
//
// It sits below the policies (limit, breaker, degrade, admin) and below
// proxy, which forwards: a policy writes its refusal through this package
// and never imports proxy. It imports nothing of the data plane but api.
//
// Every body and message carries only fixed phrases and the names of
// rules, never an internal error's text.
package answer
