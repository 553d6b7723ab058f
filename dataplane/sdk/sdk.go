// Package sdk is Sluice's in-service SDK: a Go service guards its own calls
// — a handler, a database query, a queue publish, a gRPC method — with the
// same signed rules, the same compiled limiters, breakers and degrade plans
// as the gateways, so that one rule set, one review and one audit govern both
// (the service, component and method layers beneath the gateway's).
//
// A Guard follows a kind: service rule document (api.KindService) from a
// rules file or from etcd exactly as a gateway does (package source: signed
// values checked against TrustKeys, canaries by Labels, an optional state
// dir to boot from while etcd is unreachable), compiles each version off the
// call path with package snapshot (CompileService: limit.Compile,
// breaker.Compile, degrade.Compile, state carried across swaps) and swaps it
// in atomically, keeping the last good one when a new one is refused.
//
//	g, err := sdk.New(ctx, sdk.Config{Namespace: "orders-svc", NodeID: "orders-7f9c",
//	        Etcd: []string{"127.0.0.1:2379"}, TrustKeys: "/etc/sluice/trust.pem"})
//	defer g.Close()
//	err = g.Do(ctx, "orders.Create", sdk.Keys{"user": uid}, func(ctx context.Context) error { ... })
//	var rej *sdk.Rejected // errors.As: Rule, Status, RetryAfter
//
// Do runs the gateway's order: degrade → limits → breaker → fn → record.
// Rules name resources (`resources: [orders.Create]`) beside routes, and key
// on sdk:NAME parts, the values passed in Keys. Packages sdk/sluicehttp and
// sdk/sluicegrpc guard HTTP handlers and gRPC methods.
//
// With Etcd, the instance is a node of the fleet like a gateway: it
// registers with kind sdk (Config.Service, NodeID, Build), follows its
// operator override (drain: every guarded call refused with 503; forced
// degrade levels), and writes node reports every ReportInterval with the
// gateways' reporter (package report): the guarded calls (each Do, each
// request the HTTP middleware guards; a call no rule names is not
// counted), refusals, latency, 2xx/5xx classes and each rule's counts,
// bound to the registration's lease. The control plane checks them against
// the registration and the published version as a gateway's, so live
// traffic, events and canary analysis cover services too.
//
// Until the first rule set is applied, and for a resource no rule names, Do
// runs fn unguarded: the SDK never makes a service fail because its rules
// are not there yet.
package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/internal/group"
	"github.com/sluicegw/sluice/dataplane/limit"
	redislimit "github.com/sluicegw/sluice/dataplane/limit/redis"
	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/dataplane/registry"
	"github.com/sluicegw/sluice/dataplane/report"
	"github.com/sluicegw/sluice/dataplane/reqview"
	"github.com/sluicegw/sluice/dataplane/snapshot"
	"github.com/sluicegw/sluice/dataplane/source"
)

// Config is what New needs. Give Namespace and one of RulesFile and Etcd.
type Config struct {
	// Namespace is the namespace whose kind: service rule set the service
	// runs.
	Namespace string
	// NodeID names this instance: its registration (kind: sdk) and its
	// operator override key, with Etcd; empty means the host name.
	NodeID string
	// Service names the service in its registration; empty means
	// Namespace.
	Service string
	// Build is the service's build string in its registration; empty
	// means "sdk".
	Build string
	// Address is the service's own traffic address, shown on the Nodes
	// page (host:port); empty means none.
	Address string
	// Labels are this instance's labels, which canary selectors match.
	Labels map[string]string
	// Etcd are the etcd endpoints to follow the control plane's published
	// rule set at; EtcdPrefix the key prefix (empty: api.DefaultEtcdPrefix).
	Etcd       []string
	EtcdPrefix string
	// TrustKeys are the PEM files (comma-separated) of the control plane's
	// signing keys, which every etcd value must be signed with; required
	// with Etcd unless InsecureAcceptUnsigned.
	TrustKeys string
	// InsecureAcceptUnsigned accepts unsigned etcd values: anyone who can
	// write to etcd then controls this service's rules. For development.
	InsecureAcceptUnsigned bool
	// ReportInterval is the time between two node reports (package
	// report, the gateways' reporter: calls, refusals, latency and each
	// rule's counts, which live traffic, events and canary analysis read),
	// with Etcd; zero means report.DefaultInterval, negative no reports.
	// Guarded calls count (a resource or route some rule names, and every
	// call while drained); calls that run unguarded do not.
	ReportInterval time.Duration
	// StateDir caches every applied version, to boot from when etcd cannot
	// be reached; empty means the service runs unguarded until etcd answers.
	StateDir string
	// RulesFile is a rule document to follow instead of etcd (reloaded when
	// it changes).
	RulesFile string
	// Redis is the Redis URL that scope: cluster limits share their
	// counters through; empty refuses rule sets that have any.
	Redis string
	// RedisPrefix starts every Redis key; empty means the store's default,
	// that of gateways that use the default. A cluster limit that names a
	// bucket (`bucket: NAME`) spends one budget per key with every gateway
	// and service limit naming that bucket with the same parameters, under
	// one prefix; without a bucket, a limit's budget is its own.
	RedisPrefix string
	// RedisTimeout is the deadline of every Redis call (a gateway's
	// --redis-timeout); past it the limit's onStoreError policy decides.
	// Zero means the store's default (20 ms).
	RedisTimeout time.Duration
	// TrustedProxies are the peers whose X-Forwarded-For the HTTP
	// middleware believes (as a gateway's --trusted-proxies).
	TrustedProxies []netip.Prefix
	// Logger receives the SDK's logs; nil means slog.Default().
	Logger *slog.Logger
	// Metrics receives the limits', breakers' and degrade plans' metrics;
	// nil means a registry of the SDK's own.
	Metrics *metrics.Metrics
	// Now is the clock in nanoseconds (tests inject one); nil means the
	// limit package's monotonic clock.
	Now func() int64
}

// Keys are the values a guarded call carries, which sdk:NAME key parts read
// (`key: [sdk:user]` reads Keys{"user": ...}). An absent or empty value is
// one "missing" key shared by every call without it.
type Keys map[string]string

// Rejected is the error Do returns when a rule refuses the call; fn did not
// run. Use errors.As to read it.
type Rejected struct {
	// Kind is what refused: "limit", "breaker", "degrade", or "override"
	// (a drain; Rule is RuleDrained).
	Kind string
	// Rule is the refusing rule's id.
	Rule string
	// Status is the HTTP status a gateway answers such a refusal with:
	// 429 for a limit (or its response.status), 503 for a breaker or a
	// degrade plan (or their fallback's).
	Status int
	// RetryAfter is when to try again, in whole seconds (at least one).
	RetryAfter time.Duration
}

// Error names the refusing rule and when to retry.
func (r *Rejected) Error() string {
	return fmt.Sprintf("sluice: %s %q refused the call; retry after %s", r.Kind, r.Rule, r.RetryAfter)
}

// RuleDrained is the Rule of the refusal (Kind "override", status 503)
// of every guarded call while the instance is drained (Drain, or an
// operator's drain override).
const RuleDrained = "drained"

// Guard guards a service's calls with its rule set. Create it with New and
// Close it when done. It is safe for concurrent use.
type Guard struct {
	cfg  Config
	log  *slog.Logger
	opts snapshot.Options
	cur  atomic.Pointer[snapshot.Service]
	// quotaUsage is the Redis store's (redislimit.Store.QuotaUsage), nil
	// without Config.Redis.
	quotaUsage func(ns string, rs *api.RuleSet) []api.QuotaUsage

	applyMu sync.Mutex // serialises apply
	statMu  sync.Mutex
	lastErr string

	src atomic.Pointer[source.Etcd] // with Config.Etcd
	reg atomic.Pointer[registry.Registrar]
	rep atomic.Pointer[report.Reporter]
	// ok, failed count the guarded calls that ran, by outcome, in
	// sluice_requests_total{route=""} (the reports' 2xx and 5xx classes).
	ok, failed prometheus.Counter
	started    time.Time

	ovMu     sync.Mutex
	override api.Override // the operator override in force
	group    *group.Group
	closers  []func() error
	closed   sync.Once
	drained  atomic.Bool
}

// New starts a Guard: it applies the rules file (an invalid one is an
// error naming its field paths), or follows etcd (the published rule set,
// or the state dir's copy while etcd cannot be reached; with neither it
// starts with no rules and takes the first version when it lands), and
// starts the goroutines that keep following. ctx bounds only the start;
// Close stops everything New started.
func New(ctx context.Context, cfg Config) (_ *Guard, err error) {
	if cfg.Namespace == "" {
		return nil, errors.New("sdk: Config.Namespace is required")
	}
	if (cfg.RulesFile == "") == (len(cfg.Etcd) == 0) {
		return nil, errors.New("sdk: give one of Config.RulesFile and Config.Etcd")
	}
	if len(cfg.Etcd) > 0 && cfg.TrustKeys == "" && !cfg.InsecureAcceptUnsigned {
		return nil, errors.New("sdk: Config.Etcd needs Config.TrustKeys (or InsecureAcceptUnsigned, for development)")
	}
	if cfg.TrustKeys != "" && cfg.InsecureAcceptUnsigned {
		return nil, errors.New("sdk: Config.TrustKeys and InsecureAcceptUnsigned are exclusive")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	if cfg.NodeID == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("sdk: Config.NodeID is empty and the host name unknown: %w", err)
		}
		cfg.NodeID = h
	}
	if cfg.Service == "" {
		cfg.Service = cfg.Namespace
	}
	if cfg.Build == "" {
		cfg.Build = "sdk"
	}
	g := &Guard{cfg: cfg, log: cfg.Logger, group: group.New(group.Settings{Logger: cfg.Logger}), started: time.Now(),
		ok: cfg.Metrics.Requests.WithLabelValues("", "200"), failed: cfg.Metrics.Requests.WithLabelValues("", "500")}
	g.opts = snapshot.Options{Metrics: cfg.Metrics, Logger: cfg.Logger, TrustedProxies: cfg.TrustedProxies, Now: cfg.Now}
	defer func() {
		if err != nil {
			g.Close()
		}
	}()
	if cfg.Redis != "" {
		st, err := redislimit.New(ctx, redislimit.Settings{URL: cfg.Redis, Prefix: cfg.RedisPrefix, Timeout: cfg.RedisTimeout, Metrics: cfg.Metrics,
			Logger: cfg.Logger, Clock: cfg.Now})
		if err != nil {
			return nil, fmt.Errorf("sdk: redis: %w", err)
		}
		g.closers = append(g.closers, st.Close)
		g.opts.Cluster = st.Cluster
		g.quotaUsage = st.QuotaUsage
	}
	if cfg.RulesFile != "" {
		f := &source.File{Path: cfg.RulesFile, Logger: cfg.Logger}
		first, err := f.Load()
		if err != nil {
			return nil, fmt.Errorf("sdk: %w", err)
		}
		if err := g.apply(ctx, first); err != nil {
			return nil, fmt.Errorf("sdk: rules file %s is invalid:\n%w", cfg.RulesFile, err)
		}
		g.group.Go(context.Background(), "rules-file", func(ctx context.Context) error { return f.Watch(ctx, g.apply) })
		return g, nil
	}
	return g, g.followEtcd(ctx)
}

// followEtcd applies the published rule set (or the state dir's) and starts
// the etcd source.
func (g *Guard) followEtcd(ctx context.Context) error {
	cfg := g.cfg
	var verifier *api.Verifier
	if cfg.TrustKeys != "" {
		var files []string
		for _, f := range strings.Split(cfg.TrustKeys, ",") {
			if f = strings.TrimSpace(f); f != "" {
				files = append(files, f)
			}
		}
		v, err := api.ReadVerifier(files...)
		if err != nil {
			return fmt.Errorf("sdk: TrustKeys: %w", err)
		}
		verifier = v
	} else {
		g.log.Warn("sdk: accepting UNSIGNED etcd values (InsecureAcceptUnsigned): anyone who can write to etcd controls this service's rules")
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: cfg.Etcd, DialTimeout: 3 * time.Second,
		DialKeepAliveTime: 10 * time.Second, DialKeepAliveTimeout: 3 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("sdk: etcd: %w", err)
	}
	g.closers = append(g.closers, c.Close)
	src := &source.Etcd{Client: c, Namespace: cfg.Namespace, Keys: api.Keys{Prefix: cfg.EtcdPrefix}, Labels: cfg.Labels,
		StateDir: cfg.StateDir, Logger: g.log, Verifier: verifier}
	g.src.Store(src)
	if err := src.Start(ctx, g.apply); err != nil {
		if !errors.Is(err, source.ErrNoState) {
			return fmt.Errorf("sdk: %w", err)
		}
		g.log.Warn("sdk: no rule set yet: calls run unguarded until the first version arrives", "namespace", cfg.Namespace, "err", err)
	}
	g.group.Go(context.Background(), "etcd-source", func(ctx context.Context) error { return src.Run(ctx, g.apply) })
	// One fleet with the gateways: the instance registers as a node of
	// kind sdk and follows its operator override key (drain, forced
	// degrade levels), through the gateways' own registry package.
	ovr := &registry.Overrides{Client: c, Keys: src.Keys, Namespace: cfg.Namespace, NodeID: cfg.NodeID, Logger: g.log,
		OnChange: g.applyOverride, Verifier: verifier}
	reg := &registry.Registrar{Client: c, Keys: src.Keys, Namespace: cfg.Namespace, NodeID: cfg.NodeID, Logger: g.log,
		NodeStatus: func() api.NodeStatus {
			st := g.NodeStatus()
			st.SignatureRejections += ovr.Status().SignatureRejections
			st.AcceptsUnsigned = verifier == nil
			return st
		}}
	g.reg.Store(reg)
	g.group.Go(context.Background(), "registration", reg.Run)
	if cfg.ReportInterval >= 0 {
		// The gateways' reporter: one api.Report per interval, bound to
		// the registration's lease, which the control plane checks
		// against the registration (kind sdk) before it counts it.
		rep, err := report.New(report.Settings{Client: c, Keys: src.Keys, Namespace: cfg.Namespace, NodeID: cfg.NodeID,
			Interval: cfg.ReportInterval, Lease: func() int64 { return reg.Status().LeaseID }, Metrics: cfg.Metrics,
			State: g.ReportState, Logger: g.log})
		if err != nil {
			return fmt.Errorf("sdk: %w", err)
		}
		g.rep.Store(rep)
		g.group.Go(context.Background(), "report", func(ctx context.Context) error { rep.Run(ctx); return nil })
	}
	g.group.Go(context.Background(), "overrides", ovr.Run)
	return nil
}

// applyOverride takes up an operator override for this instance: drain
// (every guarded call refused with 503) and forced degrade levels.
func (g *Guard) applyOverride(ov api.Override) {
	g.ovMu.Lock()
	defer g.ovMu.Unlock()
	old := g.override
	g.override = ov
	g.drained.Store(ov.Drain)
	if s := g.cur.Load(); s != nil {
		s.Degrades().ApplyOperatorOverride(old, ov, g.log)
	}
	g.log.Info("sdk: operator override applied", "drain", ov.Drain, "degradeLevels", ov.DegradeLevels, "by", ov.By, "reason", ov.Reason)
}

// ReportState is what the instance runs, for its node reports: the applied
// version, its rules and the last apply error.
func (g *Guard) ReportState() report.State {
	var st report.State
	if s := g.cur.Load(); s != nil {
		st.Version, st.Rules = s.Version, s.Rules
		if g.quotaUsage != nil && s.Rules != nil {
			st.Quotas = g.quotaUsage(s.Rules.Namespace, s.Rules)
		}
	}
	g.statMu.Lock()
	st.LastApplyError = g.lastErr
	g.statMu.Unlock()
	return st
}

// Reporter is the instance's node reporter (nil with a rules file or a
// negative ReportInterval).
func (g *Guard) Reporter() *report.Reporter { return g.rep.Load() }

// Record counts one guarded call for the node's reports (the totals,
// latency and status classes that live traffic and canary analysis read):
// answered with status after d, or, with d < 0, refused before it ran. Do
// and the HTTP middleware call it; an adapter of its own that uses
// Service().Enter directly should too.
func (g *Guard) Record(status int, d time.Duration) {
	m := g.cfg.Metrics
	if d < 0 {
		m.Served.Count(status)
	} else {
		m.Served.Record(status, d.Seconds())
	}
	switch {
	case status == http.StatusOK:
		g.ok.Inc()
	case status == http.StatusInternalServerError:
		g.failed.Inc()
	default:
		m.Requests.WithLabelValues("", strconv.Itoa(status)).Inc()
	}
}

// NodeStatus is the instance's registration value (kind sdk).
func (g *Guard) NodeStatus() api.NodeStatus {
	st := g.Status()
	ns := api.NodeStatus{NodeID: g.cfg.NodeID, Namespace: g.cfg.Namespace, Kind: api.NodeKindSDK, Service: g.cfg.Service,
		Address: g.cfg.Address, Labels: g.cfg.Labels, Build: g.cfg.Build, StartedAt: g.started,
		Version: st.Version, Checksum: st.Checksum, Source: st.Source, LastApplyError: st.LastApplyError,
		SignatureRejections: st.SignatureRejections, Draining: g.drained.Load()}
	if s := g.cur.Load(); s != nil {
		ns.AppliedAt = s.AppliedAt
	}
	return ns
}

// apply decodes, validates and compiles one document and swaps it in; on
// any error the applied rules stay and the error is logged and returned.
func (g *Guard) apply(ctx context.Context, u source.Update) error {
	g.applyMu.Lock()
	defer g.applyMu.Unlock()
	err := g.compile(ctx, u)
	g.statMu.Lock()
	defer g.statMu.Unlock()
	if err != nil {
		g.lastErr = err.Error()
		g.log.Error("sdk: rule set refused; keeping the last good one", "source", u.Source, "version", u.Version, "err", err)
		return err
	}
	g.lastErr = ""
	return nil
}

func (g *Guard) compile(ctx context.Context, u source.Update) error {
	if u.Err != nil {
		return u.Err
	}
	rs, err := api.Decode(u.Data)
	if err != nil {
		return err
	}
	if rs.Namespace != g.cfg.Namespace {
		return fmt.Errorf("namespace: %q is not this service's namespace %q", rs.Namespace, g.cfg.Namespace)
	}
	v, err := api.Validated(rs)
	if err != nil {
		return err
	}
	prev := g.cur.Load()
	meta := snapshot.Meta{Version: u.Version, Checksum: v.Checksum(), Source: u.Source, AppliedAt: time.Now()}
	if prev != nil && prev.Checksum == meta.Checksum {
		same := *prev
		same.Meta = meta
		g.cur.Store(&same)
		return nil
	}
	next, err := snapshot.CompileService(ctx, v, meta, prev, g.opts)
	if err != nil {
		return fmt.Errorf("compiling rule set: %w", err)
	}
	g.cur.Store(next)
	if prev != nil {
		prev.Retire(next)
	}
	g.ovMu.Lock()
	if len(g.override.DegradeLevels) > 0 {
		next.Degrades().ApplyOperatorOverride(api.Override{}, g.override, g.log)
	}
	g.ovMu.Unlock()
	g.log.Info("sdk: rule set applied", "source", meta.Source, "version", meta.Version, "checksum", meta.Checksum)
	return nil
}

// Close stops every goroutine New started, waits for them, and releases
// the rules' state, the etcd client and the Redis store. Calls guarded
// after Close run unguarded. Safe to call more than once.
func (g *Guard) Close() error {
	var err error
	g.closed.Do(func() {
		err = g.group.Stop()
		if s := g.cur.Swap(nil); s != nil {
			s.Retire(nil)
		}
		for i := len(g.closers) - 1; i >= 0; i-- {
			err = errors.Join(err, g.closers[i]())
		}
	})
	return err
}

// Status is what the Guard runs.
type Status struct {
	// Version, Checksum and Source are the applied rule set's (zero before
	// the first).
	Version  int64
	Checksum string
	Source   string
	// LastApplyError is why the last version was refused, if it was.
	LastApplyError string
	// Etcd is the etcd source's state (connected, booted from the state
	// dir, ...); nil with a rules file.
	Etcd *source.EtcdStatus
	// SignatureRejections counts the etcd values refused for their
	// signature (a forged or unsigned rule set, canary or state file).
	SignatureRejections int64
}

// Status reports the applied version and the last apply error.
func (g *Guard) Status() Status {
	var st Status
	if s := g.cur.Load(); s != nil {
		st.Version, st.Checksum, st.Source = s.Version, s.Checksum, s.Source
	}
	if src := g.src.Load(); src != nil {
		es := src.Status()
		st.Etcd, st.SignatureRejections = &es, src.SignatureRejections()
	}
	g.statMu.Lock()
	st.LastApplyError = g.lastErr
	g.statMu.Unlock()
	return st
}

// Drain refuses (true) every guarded call with 503 (rule "drained"), as an
// operator's drain override does on a gateway, or serves again (false).
func (g *Guard) Drain(on bool) { g.drained.Store(on) }

// Drained reports whether an operator drain refuses every guarded call.
func (g *Guard) Drained() bool { return g.drained.Load() }

// Service returns the applied rules (nil before the first), for the HTTP
// and gRPC adapters.
func (g *Guard) Service() *snapshot.Service { return g.cur.Load() }

// Do runs fn guarded by the rules that name resource: degrade (a shed call
// is refused), limits (every limit must admit; one that refuses consumes
// nothing from the others), the breaker (open: refused), then fn, whose
// error and duration feed the breaker and the degrade plan (an error is a
// failure, unless ctx was cancelled: then the caller went away and nothing
// is recorded) and which releases concurrency and adaptive limits when it
// returns. A panic in fn is recorded as a failure and re-raised. A refusal
// is a *Rejected and fn does not run. With no rule set yet, or none naming
// resource, fn runs unguarded.
func (g *Guard) Do(ctx context.Context, resource string, keys Keys, fn func(ctx context.Context) error) error {
	s := g.cur.Load()
	if s == nil {
		return fn(ctx)
	}
	gd := s.Resource(resource)
	if gd == nil && !g.drained.Load() {
		return fn(ctx)
	}
	return g.do(ctx, s, gd, keys, fn)
}

// call is one guarded call's view and refusal taker, pooled so that an
// admitted call allocates nothing.
type call struct {
	v   reqview.View
	rec recorder
}

var calls = sync.Pool{New: func() any { return new(call) }}

func (g *Guard) do(ctx context.Context, s *snapshot.Service, gd *snapshot.Guarded, keys Keys, fn func(ctx context.Context) error) (err error) {
	if g.drained.Load() {
		g.Record(http.StatusServiceUnavailable, -1)
		return &Rejected{Kind: "override", Rule: RuleDrained, Status: http.StatusServiceUnavailable, RetryAfter: time.Second}
	}
	c := calls.Get().(*call)
	c.v = reqview.View{RouteID: gd.ID(), Keys: keys, Ctx: ctx}
	p, ok := s.Enter(&c.rec, gd, &c.v)
	if !ok {
		rej := c.rec.rejected()
		*c = call{}
		calls.Put(c)
		g.Record(rej.Status, -1)
		return rej
	}
	*c = call{}
	calls.Put(c)
	start := p.Start()
	finished := false
	defer func() {
		if !finished { // fn panicked: a failure, and the panic goes on
			now := s.Now()
			p.End(now, true, false)
			g.Record(http.StatusInternalServerError, time.Duration(now-start))
		}
	}()
	err = fn(ctx)
	finished = true
	now := s.Now()
	gone := err != nil && ctx.Err() != nil
	p.End(now, err != nil && !gone, gone)
	status := http.StatusOK
	if err != nil {
		status = http.StatusInternalServerError
	}
	g.Record(status, time.Duration(now-start))
	return err
}

// recorder takes a refusal as data (limit.RefusalTaker) and an admitted
// call's RateLimit fields (which nothing reads: a call has no response
// header). It is an http.ResponseWriter only to satisfy the deciding code's
// signature; nothing is written to it.
type recorder struct {
	kind, rule string
	status     int
	retry      time.Duration
	h          http.Header
}

func (r *recorder) TakeRefusal(kind, rule string, status int, retryAfter time.Duration) {
	r.kind, r.rule, r.status, r.retry = kind, rule, status, retryAfter
}

// TakeRateLimit takes an admitted call's RateLimit fields: dropped.
func (r *recorder) TakeRateLimit(limit.Fields) {}

func (r *recorder) Header() http.Header {
	if r.h == nil {
		r.h = http.Header{}
	}
	return r.h
}

func (r *recorder) Write(b []byte) (int, error) { return io.Discard.Write(b) }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

// rejected is the refusal recorded. Every refusal of a call comes as data
// (TakeRefusal): the only answer the deciding code writes instead, an
// ambiguous request's 400, needs header, query or cookie key parts, which
// rules naming resources cannot have (api refuses them).
func (r *recorder) rejected() *Rejected {
	return &Rejected{Kind: r.kind, Rule: r.rule, Status: r.status, RetryAfter: r.retry}
}
