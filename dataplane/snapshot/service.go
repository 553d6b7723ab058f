package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/answer"
	"github.com/sluicegw/sluice/dataplane/breaker"
	"github.com/sluicegw/sluice/dataplane/degrade"
	"github.com/sluicegw/sluice/dataplane/limit"
	"github.com/sluicegw/sluice/dataplane/proxy"
	"github.com/sluicegw/sluice/dataplane/reqview"
	"github.com/sluicegw/sluice/dataplane/reqview/classify"
)

// Service is one compiled kind: service rule set (api.KindService), for the
// in-service SDK (package dataplane/sdk): the same limit, breaker and degrade
// sets a gateway's Snapshot compiles, carried across swaps by the same
// mechanism, over the service's own routes (matched by a proxy.Router
// without upstreams) and its resources (the names a service guards calls
// under). It is immutable and safe for concurrent use.
//
// The limit, breaker and degrade compilers know routes only: a resource is
// handed to them as a route whose id is "@" and the resource's name (route
// ids never hold "@", so the two never meet), and every rule of a service
// document names what it applies to (api validates that), so that no rule
// falls to "every route".
type Service struct {
	Meta
	// Rules is the normalized rule set the service was compiled from.
	Rules *api.RuleSet

	router    *proxy.Router
	routes    map[string]*Guarded
	resources map[string]*Guarded
	limits    *limit.Set
	breakers  *breaker.Set
	degrades  *degrade.Set
	classes   *classify.Classes
	trusted   []netip.Prefix
	now       func() int64
}

// Guarded is what guards one route or resource of a Service: its limits,
// the check of their key parts, its breaker and its degrade plan (each nil
// when none applies).
type Guarded struct {
	id      string // route id, or resource name
	route   bool   // a route (the middleware's), not a resource
	limits  *limit.Chain
	keys    *classify.KeyCheck
	breaker *breaker.Breaker
	degrade *degrade.Controller
}

// ID is the route id or resource name.
func (g *Guarded) ID() string { return g.id }

// resourceRoute is the route id a resource is compiled under.
func resourceRoute(name string) string { return "@" + name }

// errGatewayDocument refuses a gateway's rule set in the SDK.
var errGatewayDocument = errors.New("this rule set is for a gateway; the in-service SDK runs kind: service documents (routes without upstream, rules naming resources)")

// CompileService builds the Service of v, which must be a kind: service
// document, carrying the state of unchanged rules over from prev (nil for
// none), as Compile does for a gateway. opts' Metrics and Logger are
// required; Now, TrustedProxies and MaxKeysPerLimit apply, and Cluster for
// scope: cluster limits. On error nothing is retained. After swapping it in,
// call prev.Retire(next).
func CompileService(ctx context.Context, v *api.Valid, meta Meta, prev *Service, opts Options) (_ *Service, err error) {
	norm := v.Rules()
	if !norm.IsService() {
		return nil, errGatewayDocument
	}
	if opts.Now == nil {
		opts.Now = limit.Now
	}
	s := &Service{Meta: meta, Rules: norm, routes: make(map[string]*Guarded, len(norm.Routes)),
		resources: map[string]*Guarded{}, trusted: opts.TrustedProxies, now: opts.Now}
	defer func() {
		if err != nil {
			s.discard(prev)
		}
	}()
	if s.router, err = proxy.NewMatcher(norm.Routes, proxy.RouterSettings{EncodedSlashes: opts.EncodedSlashes}); err != nil {
		return nil, fmt.Errorf("routes: %w", err)
	}
	s.classes = classify.NewClasses(norm.Classes)
	// The compilers' view: resources as routes.
	rs := norm.Clone()
	var ids []string
	for _, r := range rs.Routes {
		ids = append(ids, r.ID)
	}
	seen := map[string]bool{}
	addResources := func(routes, resources []string) []string {
		for _, r := range resources {
			routes = append(routes, resourceRoute(r))
			if !seen[r] {
				seen[r] = true
				ids = append(ids, resourceRoute(r))
			}
		}
		return routes
	}
	for i := range rs.Limits {
		rs.Limits[i].Routes, rs.Limits[i].Resources = addResources(rs.Limits[i].Routes, rs.Limits[i].Resources), nil
	}
	for i := range rs.Breakers {
		rs.Breakers[i].Routes, rs.Breakers[i].Resources = addResources(rs.Breakers[i].Routes, rs.Breakers[i].Resources), nil
	}
	for i := range rs.Degrades {
		rs.Degrades[i].Routes, rs.Degrades[i].Resources = addResources(rs.Degrades[i].Routes, rs.Degrades[i].Resources), nil
	}
	var pl *limit.Set
	var pb *breaker.Set
	var pd *degrade.Set
	if prev != nil {
		pl, pb, pd = prev.limits, prev.breakers, prev.degrades
	}
	var cluster func(api.Limit) (limit.Limiter, error)
	if opts.Cluster != nil {
		cluster = opts.Cluster(norm.Namespace)
	}
	if s.limits, err = limit.Compile(rs.Limits, pl, limit.Options{Metrics: opts.Metrics, Logger: opts.Logger,
		MaxKeys: opts.MaxKeysPerLimit, Cluster: cluster, Now: opts.Now, Classes: s.classes}); err != nil {
		return nil, fmt.Errorf("limits: %w", err)
	}
	if s.breakers, err = breaker.Compile(rs.Breakers, ids, pb, breaker.Options{Metrics: opts.Metrics, Logger: opts.Logger, Now: opts.Now}); err != nil {
		return nil, fmt.Errorf("breakers: %w", err)
	}
	if s.degrades, err = degrade.Compile(rs.Degrades, ids, pd, degrade.Options{Metrics: opts.Metrics, Logger: opts.Logger,
		Now: opts.Now, Classes: s.classes.IDs()}); err != nil {
		return nil, fmt.Errorf("degrades: %w", err)
	}
	for _, id := range ids {
		g := &Guarded{id: id, route: id[0] != '@', limits: s.limits.Chain(id), keys: routeKeyCheck(rs, id),
			breaker: s.breakers.ForRoute(id), degrade: s.degrades.ForRoute(id)}
		if g.limits == nil && g.breaker == nil && g.degrade == nil && !g.route {
			continue
		}
		if g.route {
			s.routes[id] = g
		} else {
			g.id = id[1:]
			s.resources[g.id] = g
		}
	}
	return s, nil
}

// discard releases what s, which failed to compile, took that prev does
// not hold.
func (s *Service) discard(prev *Service) {
	var pl *limit.Set
	var pb *breaker.Set
	var pd *degrade.Set
	if prev != nil {
		pl, pb, pd = prev.limits, prev.breakers, prev.degrades
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
}

// Retire releases what next did not carry over (next nil: everything, on
// Close). Call it once, after next is swapped in.
func (s *Service) Retire(next *Service) {
	var nl *limit.Set
	var nb *breaker.Set
	var nd *degrade.Set
	if next != nil {
		nl, nb, nd = next.limits, next.breakers, next.degrades
	}
	s.limits.Retire(nl)
	s.breakers.Retire(nb)
	s.degrades.Retire(nd)
	s.router.CloseIdle()
}

// Resource returns what guards the resource name, or nil when no rule names
// it. It does not allocate.
func (s *Service) Resource(name string) *Guarded { return s.resources[name] }

// Match matches a request view on the service's routes (as a gateway
// matches: the same router), sets v.Path and v.RouteID, and returns what
// guards the route, or nil when no route matches or the request is one the
// router refuses (an encoded slash, an unknown method): such a request is
// the service's own to answer, unguarded.
func (s *Service) Match(v *reqview.View) *Guarded {
	m := s.router.MatchView(v)
	if m.Invalid != "" || m.Route == nil {
		return nil
	}
	v.Path, v.RouteID = m.Path, m.Route.ID
	return s.routes[m.Route.ID]
}

// ClientIP is the address limits key on for r: the peer, or the
// X-Forwarded-For client when the peer is a trusted proxy (api.ClientIP, as
// the gateway reads it); and whether the peer is one.
func (s *Service) ClientIP(r *http.Request) (netip.Addr, bool) {
	return clientIP(r, s.trusted)
}

// Degrades returns the service's degrade controllers (operator overrides).
func (s *Service) Degrades() *degrade.Set { return s.degrades }

// Breakers returns the service's breakers.
func (s *Service) Breakers() *breaker.Set { return s.breakers }

// Now is the service's clock, in nanoseconds.
func (s *Service) Now() int64 { return s.now() }

// Pass is an admitted call or request, to End once its work is done.
type Pass struct {
	g      *Guarded
	ticket breaker.Ticket
	start  int64
	done   func()
	lat    reqview.Latencies // the limit variants that let it through (View.Latencies)
}

// Enter decides on one guarded call or request before its work, in the
// gateway's order: key check (400 for an ambiguous request) → degrade →
// limits → breaker. v carries the call's keys (v.Keys) and, for a request,
// what the middleware read of it. A refusal is written through w — as the
// gateway writes it (429 or 503 with Retry-After, RateLimit headers,
// problem+json or the rule's body; a gRPC status to a gRPC request), or, when
// w is a limit.RefusalTaker, handed to it as data — and ok is false. On ok
// the caller must call End on the Pass, however the work ends.
func (s *Service) Enter(w http.ResponseWriter, g *Guarded, v *reqview.View) (p Pass, ok bool) {
	start := s.now()
	if err := g.keys.ReadView(v); err != nil {
		answer.WriteProblemID(w, v.Header(), v.RequestID, http.StatusBadRequest, "Ambiguous request", err.Error())
		return Pass{}, false
	}
	if g.route {
		v.Class = s.classes.Classify(v, g.id)
	}
	if d := g.degrade; d != nil {
		if shed, _ := d.AdmitView(v, start); shed {
			if t, ok := w.(limit.RefusalTaker); ok {
				t.TakeRefusal("degrade", d.Rule(), d.FallbackStatus(), d.RetryAfter(start))
			} else {
				d.WriteFallbackView(w, v, start)
			}
			return Pass{}, false
		}
	}
	p = Pass{g: g, start: start}
	if c := g.limits; c != nil {
		done, ok := c.AdmitView(w, v)
		if !ok {
			return Pass{}, false
		}
		p.done = done
		p.lat = v.Latencies
	}
	if b := g.breaker; b != nil {
		t, err := b.Allow(start)
		if err != nil {
			if p.done != nil {
				p.done()
			}
			s.limits.LogDecision(v, slog.LevelWarn, reqview.MsgBreaker, b.Rule(), "refuse")
			if rt, ok := w.(limit.RefusalTaker); ok {
				rt.TakeRefusal("breaker", b.Rule(), b.FallbackStatus(), b.RetryAfter(start))
			} else {
				b.WriteFallbackMethod(w, v.Method, v.Header(), start)
			}
			return Pass{}, false
		}
		p.ticket = t
	}
	return p, true
}

// Start is when the call entered (the Service's clock, nanoseconds).
func (p *Pass) Start() int64 { return p.start }

// End records how the admitted work went: failed (an error, a 5xx answer,
// a panic) and gone (the caller went away: no outcome) feed the breaker and
// the degrade plan as a gateway's forward does, its duration the breaker's
// slow calls, and the limits' concurrency slots (and adaptive limits' RTT)
// are released. Its duration, from Enter to now (what the caller records
// in the node's figures), goes to the histograms of the limit variants that
// let it through.
func (p *Pass) End(now int64, failed, gone bool) {
	g := p.g
	p.lat.Observe(float64(now-p.start) / 1e9)
	if b := g.breaker; b != nil {
		if gone {
			b.Release(p.ticket)
		} else {
			b.Done(p.ticket, now, failed, time.Duration(now-p.start))
		}
	}
	if d := g.degrade; d != nil && !gone {
		d.Record(now, !failed)
	}
	if p.done != nil {
		p.done()
	}
}

// Failed reports whether an HTTP answer of status counts as a failure for
// g's breaker (its failureStatuses, every 5xx by default).
func (g *Guarded) Failed(status int) bool { return g.breaker.IsFailure(status, false) }
