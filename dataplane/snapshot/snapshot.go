// Package snapshot compiles a rule set into an immutable runtime Snapshot —
// router, upstreams, limiters, breakers and degrade controllers — and serves
// requests through it. A Snapshot is built off the hot path, swapped in with
// an atomic pointer by its owner (package gateway), and read once per request.
//
// Compile takes a rule set that api.Validated checked and normalized (the one
// validation and the one Normalize of an apply; the limit, breaker and degrade
// compilers trust what it made and check nothing again), and the previous
// snapshot so that state survives a swap: a limit, breaker or degrade rule
// whose normalized rule did not change keeps its state object as it is; a
// changed limit carries its fill over scaled to the new capacity; a changed
// breaker starts closed and a changed degrade plan at level 0 (unless an
// operator override holds it). Every component carries its state with one
// mechanism (package dataplane/internal/carry), and a compile that fails
// releases everything it took: upstream connection pools, cluster limiters,
// sweepers. Upstream connections are pooled in one transport shared by every
// snapshot, so keep-alive connections survive swaps.
//
// The request path is: clean the path and match a route → the route's
// identity (verify the caller's JWT: 401 for a bad token, claims into the
// view; identity.go) → refuse ambiguous key parts (classify.KeyCheck, 400) →
// degrade → limits → breaker → proxy → record the outcome (see package
// degrade for why).
//
// # Why the path is written out by hand
//
// The path is one function (ServeHTTP), not a chain of middlewares each
// built once as New(ctx, next, cfg, name) as Traefik composes them. Such a
// chain fits stages that decide on the request alone; three of these do
// not: the breaker needs the outcome of the forward (its status, whether it
// failed, its duration, whether the client went away) to count it, degrade
// needs whether it succeeded, and a limit admits with a done function that
// gives a concurrency slot back after it. In a chain each would wrap the
// next one and read the outcome back from a response recorder of its own;
// here Forward returns one proxy.Outcome and each stage is handed what it
// needs of it, so the outcome is read once and judged once (IsFailure).
// The stages also share what was read of the request once: its view
// (package reqview: the matched route and cleaned path, the checked key
// parts, read for degrade and limits alike, the client address, request id
// and trace context), which Serve takes from whichever serving stack built
// it (ServeHTTP for net/http; see Exchange); and the Snapshot itself, which the
// gateway loads once per request, is the compiled chain: every check ran in
// Compile, and serving only decides.
package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/accesslog"
	"github.com/sluicegw/sluice/dataplane/breaker"
	"github.com/sluicegw/sluice/dataplane/degrade"
	"github.com/sluicegw/sluice/dataplane/limit"
	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/dataplane/preview"
	"github.com/sluicegw/sluice/dataplane/proxy"
	"github.com/sluicegw/sluice/dataplane/reqview/classify"
	"github.com/sluicegw/sluice/dataplane/tracing"
)

// Options are the node's settings for compiling snapshots. Metrics and Logger
// are required (the gateway fills them); the rest have working zero values.
type Options struct {
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// TrustedProxies are the peers whose X-Forwarded-For is believed.
	TrustedProxies []netip.Prefix
	// MaxKeysPerLimit caps the keys of each node-scope limit (0: the limit
	// package's default).
	MaxKeysPerLimit int
	// Cluster returns the builder of scope: cluster limiters for a
	// namespace (the Redis store's Cluster method); nil refuses rule sets
	// that have any.
	Cluster func(namespace string) func(api.Limit) (limit.Limiter, error)
	// Transport is the upstream transport shared by all snapshots; nil
	// means proxy.SharedTransport().
	Transport *proxy.Transport
	// EncodedSlashes is what to do with %2F in request paths (the
	// gateway's --encoded-slashes); the zero value refuses them.
	EncodedSlashes proxy.SlashPolicy
	// Now is the request-path clock in nanoseconds; nil means limit.Now.
	Now func() int64
	// Wall is the wall clock in Unix nanoseconds that tokens' exp and nbf
	// are judged by; nil means time.Now.
	Wall func() int64
	// JWKSClient fetches identities' JWKS URLs; nil means a client with a
	// 5s timeout.
	JWKSClient *http.Client
	// AccessLog records every request served (the gateway's
	// --access-log); nil logs none.
	AccessLog *accesslog.Log
	// Preview holds the node's running preview (package preview), shared
	// by every snapshot so that it outlives swaps; nil, or a nil value,
	// previews nothing. Each request is observed by it after the live
	// decision, until the preview's end.
	Preview *atomic.Pointer[preview.Preview]
	// Tracer records a span per sampled request (the gateway's
	// --otlp-endpoint; see package tracing and trace.go); nil records none.
	Tracer *tracing.Provider
}

// Meta describes where a snapshot's rules came from.
type Meta struct {
	Version   int64
	Checksum  string
	Source    string
	AppliedAt time.Time
}

// Snapshot is one compiled, immutable rule set. It is safe for concurrent
// use; its limiters, breakers and controllers carry mutable state, which is
// what a later snapshot may inherit.
type Snapshot struct {
	Meta
	// Rules is the normalized rule set the snapshot was compiled from.
	Rules *api.RuleSet

	router   *proxy.Router
	routes   map[string]*route
	maxWrite time.Duration // the longest writeTimeout of the routes (MaxWriteTimeout)
	limits   *limit.Set
	breakers *breaker.Set
	degrades *degrade.Set
	trusted  []netip.Prefix
	now      func() int64
	metrics  *metrics.Metrics
	classes  *classify.Classes // priority classes (issue 15); never nil
	// identities are the compiled identities by id (issue 28); nil when
	// the rule set has none.
	identities map[string]*identityRule
	wall       func() int64
	access     *accesslog.Recorder // nil: no access log
	preview    *atomic.Pointer[preview.Preview]
	tracer     *tracing.Provider // nil: no spans
}

// route is everything the request path needs for one route, resolved at
// compile time so that a request does no map lookups beyond matching.
type route struct {
	id       string
	upstream *proxy.Upstream
	limits   *limit.Chain
	keys     *classify.KeyCheck // refuses requests whose key parts are ambiguous
	breaker  *breaker.Breaker
	degrade  *degrade.Controller
	identity *identityRule // verifies the caller's token; nil: none
	duration prometheus.Observer
	codes    codeCounters
	// loopCapable: an event loop may serve the route (Snapshot.ServeLoop):
	// its targets are cleartext HTTP/1.1. loopWaits: its limits may wait
	// (a store, a leaky bucket's delay), so the loop has the decision run
	// off its goroutine (loopwait.go).
	loopCapable, loopWaits bool
}

// Compile builds a snapshot of v, carrying over the state of unchanged rules
// from prev (which may be nil). It does not change prev, which keeps serving
// until the caller swaps; after the swap the caller calls prev.Retire(next).
// On error nothing is retained: a deferred discard releases what the
// snapshot took so far.
func Compile(ctx context.Context, v *api.Valid, meta Meta, prev *Snapshot, opts Options) (_ *Snapshot, err error) {
	norm := v.Rules()
	if norm.IsService() {
		return nil, errServiceDocument
	}
	if opts.Now == nil {
		opts.Now = limit.Now
	}
	if opts.Wall == nil {
		opts.Wall = func() int64 { return time.Now().UnixNano() }
	}
	if opts.Transport == nil {
		opts.Transport = proxy.SharedTransport()
	}
	s := &Snapshot{Meta: meta, Rules: norm, routes: make(map[string]*route, len(norm.Routes)),
		trusted: opts.TrustedProxies, now: opts.Now, metrics: opts.Metrics, wall: opts.Wall,
		access: opts.AccessLog.For(norm), preview: opts.Preview, tracer: opts.Tracer}
	defer func() {
		if err != nil {
			s.discard(prev)
		}
	}()
	if s.router, err = proxy.NewRouterWith(norm.Routes, opts.Transport, proxy.RouterSettings{EncodedSlashes: opts.EncodedSlashes, Metrics: opts.Metrics}); err != nil {
		return nil, fmt.Errorf("routes: %w", err)
	}
	s.classes = classify.NewClasses(norm.Classes)
	s.compileIdentities(norm, prev, opts)
	var prevLimits *limit.Set
	var prevBreakers *breaker.Set
	var prevDegrades *degrade.Set
	if prev != nil {
		prevLimits, prevBreakers, prevDegrades = prev.limits, prev.breakers, prev.degrades
	}
	var cluster func(api.Limit) (limit.Limiter, error)
	if opts.Cluster != nil {
		cluster = opts.Cluster(norm.Namespace)
	}
	if s.limits, err = limit.Compile(norm.Limits, prevLimits, limit.Options{
		Metrics: opts.Metrics, Logger: opts.Logger, MaxKeys: opts.MaxKeysPerLimit, Cluster: cluster, Now: opts.Now,
		Classes: s.classes,
	}); err != nil {
		return nil, fmt.Errorf("limits: %w", err)
	}
	routeIDs := make([]string, len(norm.Routes))
	for i, r := range norm.Routes {
		routeIDs[i] = r.ID
	}
	if s.breakers, err = breaker.Compile(norm.Breakers, routeIDs, prevBreakers, breaker.Options{
		Metrics: opts.Metrics, Logger: opts.Logger, Now: opts.Now,
	}); err != nil {
		return nil, fmt.Errorf("breakers: %w", err)
	}
	if s.degrades, err = degrade.Compile(norm.Degrades, routeIDs, prevDegrades, degrade.Options{
		Metrics: opts.Metrics, Logger: opts.Logger, Now: opts.Now, Classes: s.classes.IDs(),
	}); err != nil {
		return nil, fmt.Errorf("degrades: %w", err)
	}
	for _, r := range norm.Routes {
		s.routes[r.ID] = &route{
			id:       r.ID,
			upstream: s.router.Upstream(r.ID),
			limits:   s.limits.Chain(r.ID),
			keys:     routeKeyCheck(norm, r.ID),
			breaker:  s.breakers.ForRoute(r.ID),
			degrade:  s.degrades.ForRoute(r.ID),
			identity: s.identityFor(norm, r.ID),
			duration: opts.Metrics.RequestDuration.WithLabelValues(r.ID),
			codes:    newCodeCounters(opts.Metrics.Requests, r.ID),
		}
		rt := s.routes[r.ID]
		rt.loopCapable, rt.loopWaits = rt.upstream.LoopCapable(), rt.limits.MayWait()
		s.maxWrite = max(s.maxWrite, rt.upstream.WriteTimeout())
	}
	return s, nil
}

// errServiceDocument refuses a kind: service rule set on a gateway.
var errServiceDocument = errors.New("kind: service: this rule set is for services running the in-service SDK (dataplane/sdk), not for a gateway; publish it to the service's namespace, or remove kind: service and give every route an upstream")

// routeKeyCheck returns the check of every key that applies to the route:
// its limits' (with their cookieDecoding) and its degrade plans'.
func routeKeyCheck(rs *api.RuleSet, routeID string) *classify.KeyCheck {
	var keys []classify.RuleKey
	for _, l := range rs.Limits {
		if api.Applies(l.Routes, routeID) {
			keys = append(keys, classify.RuleKey{Parts: l.Key, RawCookies: l.CookieDecoding == api.CookieRaw})
		}
	}
	for _, d := range rs.Degrades {
		if api.Applies(d.Routes, routeID) {
			keys = append(keys, classify.RuleKey{Parts: d.Key})
		}
	}
	return classify.NewKeyCheckOf(keys...)
}

// discard releases what s, which failed to compile, took that prev (the
// snapshot in service, or nil) does not hold: its upstreams' references to
// the shared connection pools, the limits' sweeper and new cluster limiters,
// the state of new breakers and degrade plans, and the metric series of routes
// and rules prev does not have. prev is left as it was.
func (s *Snapshot) discard(prev *Snapshot) {
	var pl *limit.Set
	var pb *breaker.Set
	var pd *degrade.Set
	if prev != nil {
		pl, pb, pd = prev.limits, prev.breakers, prev.degrades
	}
	if s.router != nil {
		s.router.CloseIdle()
	}
	if s.limits != nil {
		s.limits.Retire(pl)
	}
	if s.breakers != nil {
		s.breakers.Retire(pb)
	}
	if s.degrades != nil {
		s.degrades.Retire(pd)
	}
	s.retireIdentities(prev) // prev's own identities stay running
	if s.metrics != nil {
		var live metrics.Live // nothing in service before a first compile
		if prev != nil {
			live = prev.live()
		}
		s.metrics.Prune(live)
	}
}

// Retire releases what next did not carry over: limiters' sweepers, cluster
// limiters, idle upstream connections of removed targets. next may be nil
// (shutdown). Call it once, after next is swapped in.
func (s *Snapshot) Retire(next *Snapshot) {
	var nl *limit.Set
	var nb *breaker.Set
	var nd *degrade.Set
	if next != nil {
		nl, nb, nd = next.limits, next.breakers, next.degrades
	}
	s.limits.Retire(nl)
	s.breakers.Retire(nb)
	s.degrades.Retire(nd)
	s.retireIdentities(next)
	s.router.CloseIdle()
	if next != nil && s.metrics != nil {
		// Series of routes and rules next does not have would otherwise be
		// exported forever.
		s.metrics.Prune(next.live())
	}
}

// live names the snapshot's routes and rules, for metrics.Prune.
func (s *Snapshot) live() metrics.Live {
	var l metrics.Live
	for _, r := range s.Rules.Routes {
		l.Routes = append(l.Routes, r.ID)
	}
	for _, x := range s.Rules.Limits {
		l.Limits = append(l.Limits, x.ID)
	}
	for _, x := range s.Rules.Breakers {
		l.Breakers = append(l.Breakers, x.ID)
	}
	for _, x := range s.Rules.Degrades {
		l.Degrades = append(l.Degrades, x.ID)
	}
	s.identityIDs(&l)
	return l
}

// Breakers returns the snapshot's breakers, for the admin endpoint.
func (s *Snapshot) Breakers() *breaker.Set { return s.breakers }

// Targets returns the health of the upstream targets that have outlier
// detection or health checks (proxy.Router.Health).
func (s *Snapshot) Targets() []proxy.TargetHealth { return s.router.Health() }

// Adaptive returns the state of the adaptive limits (limit.Set.Adaptive).
func (s *Snapshot) Adaptive() []limit.AdaptiveRule { return s.limits.Adaptive() }

// Degrades returns the snapshot's degrade controllers, for the admin
// endpoint and operator overrides.
func (s *Snapshot) Degrades() *degrade.Set { return s.degrades }
