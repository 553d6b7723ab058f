// Package sluicegrpc guards a gRPC server's methods with the service's
// Sluice rule set (package dataplane/sdk): the unary and stream server
// interceptors run every call through Guard.Do with the method's full name
// (/package.Service/Method) as the resource, so that rules name methods in
// `resources: [/shop.Orders/Create]`. A refused call never reaches the
// handler and fails with codes.ResourceExhausted (a limit) or
// codes.Unavailable (a breaker, a degrade plan, a drain), its message naming
// the rule and when to retry. A handler's error is a failure for the
// method's breaker and degrade plan unless its code says the caller was at
// fault (InvalidArgument, NotFound, AlreadyExists, PermissionDenied,
// Unauthenticated, FailedPrecondition, OutOfRange, Canceled); a panic is a
// failure and goes on to the server (or its recovery interceptor).
//
// This is the only package of the SDK that imports google.golang.org/grpc's
// server API.
package sluicegrpc

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicegw/sluice/dataplane/sdk"
)

// Option configures an interceptor.
type Option func(*options)

type options struct {
	keys func(ctx context.Context, fullMethod string) sdk.Keys
}

// WithKeys sets the keys each call carries (what sdk:NAME key parts read),
// typically from the call's metadata or the authenticated peer; without it
// calls carry none.
func WithKeys(f func(ctx context.Context, fullMethod string) sdk.Keys) Option {
	return func(o *options) { o.keys = f }
}

func build(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// UnaryServerInterceptor guards unary calls with g.
func UnaryServerInterceptor(g *sdk.Guard, opts ...Option) grpc.UnaryServerInterceptor {
	o := build(opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		var resp any
		var herr error
		ran := false
		err := g.Do(ctx, info.FullMethod, o.keysOf(ctx, info.FullMethod), func(ctx context.Context) error {
			ran = true
			resp, herr = handler(ctx, req)
			return failure(herr)
		})
		if !ran {
			return nil, statusOf(err)
		}
		return resp, herr
	}
}

// StreamServerInterceptor guards streaming calls with g: the whole stream
// is one guarded call (a concurrency limit holds its slot until the stream
// ends).
func StreamServerInterceptor(g *sdk.Guard, opts ...Option) grpc.StreamServerInterceptor {
	o := build(opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		var herr error
		ran := false
		ctx := ss.Context()
		err := g.Do(ctx, info.FullMethod, o.keysOf(ctx, info.FullMethod), func(context.Context) error {
			ran = true
			herr = handler(srv, ss)
			return failure(herr)
		})
		if !ran {
			return statusOf(err)
		}
		return herr
	}
}

func (o *options) keysOf(ctx context.Context, method string) sdk.Keys {
	if o.keys == nil {
		return nil
	}
	return o.keys(ctx, method)
}

// failure is err when it counts against the method (a server-side failure),
// nil when the caller was at fault.
func failure(err error) error {
	if err == nil {
		return nil
	}
	switch status.Code(err) {
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.PermissionDenied, codes.Unauthenticated,
		codes.FailedPrecondition, codes.OutOfRange, codes.Canceled:
		return nil
	}
	return err
}

// statusOf is the gRPC status of Do's error when fn did not run: a refusal
// (RESOURCE_EXHAUSTED for a limit, UNAVAILABLE otherwise, naming the rule),
// or any other error as it is.
func statusOf(err error) error {
	var rej *sdk.Rejected
	if !errors.As(err, &rej) {
		return err
	}
	code := codes.Unavailable
	if rej.Kind == "limit" {
		code = codes.ResourceExhausted
	}
	return status.Error(code, fmt.Sprintf("%s %q refused the call; retry after %d s", rej.Kind, rej.Rule, int64(rej.RetryAfter.Seconds())))
}
