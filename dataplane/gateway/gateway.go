// Package gateway runs one Sluice gateway node: it applies rule sets from a
// source (compiling each off the hot path and swapping it in atomically,
// keeping the last good one when a new one is refused), serves traffic through
// the current snapshot, and serves the node admin endpoint. It also owns the
// node's wiring: following a rules file (FollowFile) or the control plane
// through etcd (FollowEtcd), and running every long-lived goroutine under one
// owner (Run, on internal/group). cmd/sluice-gateway turns flags into a
// Config and clients and calls these; tests run Node in process.
//
// Request path: clean the path and match a route → degrade → limits → breaker
// → proxy → record the outcome. Why that order is written in package degrade.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/api/buildinfo"
	"github.com/sluicegw/sluice/dataplane/limit"
	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/dataplane/preview"
	"github.com/sluicegw/sluice/dataplane/proxy"
	"github.com/sluicegw/sluice/dataplane/snapshot"
	"github.com/sluicegw/sluice/dataplane/source"
)

// Config holds a node's settings. Zero fields take the documented defaults.
type Config struct {
	// Listen is the traffic address; default ":9000".
	Listen string
	// Admin is the node admin address; default "127.0.0.1:9901".
	Admin string
	// NodeID names the node in the Via header of forwarded requests, by
	// which it refuses requests that loop back to it (508); empty means the
	// host name. With Snapshot.Transport set, that Transport's own
	// Settings.NodeID applies instead.
	NodeID string
	// AdminToken is required from non-loopback admin clients.
	AdminToken string
	// AdminAllowedHosts are names the admin endpoint's Host header may carry
	// besides localhost, loopback addresses and Admin's host (see package
	// admin: other Hosts are refused, against DNS rebinding).
	AdminAllowedHosts []string
	// TrustedProxies are the peers whose X-Forwarded-For is believed.
	TrustedProxies []netip.Prefix
	// MaxKeysPerLimit caps the keys one limit tracks; 0 means the limit
	// package's default.
	MaxKeysPerLimit int
	// Pprof mounts net/http/pprof under /debug/pprof/ on the admin endpoint
	// (behind the same loopback-or-token guard).
	Pprof bool
	// ShutdownTimeout bounds the drain of in-flight requests on stop;
	// default 30s.
	ShutdownTimeout time.Duration
	// Logger receives the node's logs; nil means slog.Default().
	Logger *slog.Logger
	// Metrics receives the node's metrics; nil means a fresh registry.
	Metrics *metrics.Metrics
	// Stores report the health of shared stores and rule sources in /status (under "components"), by name
	// ("redis").
	Stores map[string]func() any
	// QuotaUsage, when set, returns what the quotas of namespace ns learnt
	// from the cluster store (redislimit.Store.QuotaUsage) for the rules rs
	// the node runs, for its reports.
	QuotaUsage func(ns string, rs *api.RuleSet) []api.QuotaUsage
	// EventLoops is the number of event loops serving HTTP/1.1 (cleartext,
	// and TLS with ALPN http/1.1 or none; HTTP/2 is x/net/http2's); 0 means
	// one per processor (GOMAXPROCS).
	EventLoops int
	// Snapshot carries options for compiling rule sets (cluster limiter
	// factory and so on); its Metrics and Logger are filled from the node's.
	Snapshot snapshot.Options
	// ListenTLS is the TLS traffic address; empty means no TLS listener.
	// It serves TLS 1.2+ with ALPN h2 and http/1.1 (see package tlsreload
	// and gateway/tls.go).
	ListenTLS string
	// TLSCertFile and TLSKeyFile are the PEM certificate chain and key of
	// ListenTLS, reloaded when they change (a bad new pair is refused and
	// the old one kept serving).
	TLSCertFile, TLSKeyFile string
	// TLSReloadInterval is how often the certificate files are checked for
	// a change; zero means tlsreload.DefaultInterval (1s).
	TLSReloadInterval time.Duration
	// TLSOCSPStaple staples the leaf's OCSP responses to handshakes
	// (tlsreload.Settings.Staple).
	TLSOCSPStaple bool
}

// Node is one gateway node. Create it with New; it is safe for concurrent use.
type Node struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics.Metrics

	current  atomic.Pointer[snapshot.Snapshot]
	preview  atomic.Pointer[preview.Preview] // the running preview (FollowEtcd); nil: none
	draining atomic.Bool
	drained  atomic.Bool // an operator override drains the node

	ovMu     sync.Mutex
	override api.Override
	stats    stats
	applyMu  sync.Mutex // serialises Apply: compiles happen one at a time

	statusMu       sync.Mutex
	lastApplyError string
	lastErrorAt    time.Time
	started        time.Time
}

// New returns a node with no rules applied yet: until the first Apply it
// answers 503 and its /readyz fails.
func New(cfg Config) *Node {
	if cfg.Listen == "" {
		cfg.Listen = ":9000"
	}
	if cfg.Admin == "" {
		cfg.Admin = "127.0.0.1:9901"
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	stores := make(map[string]func() any, len(cfg.Stores)+4)
	for name, f := range cfg.Stores {
		stores[name] = f
	}
	cfg.Stores = stores // FollowEtcd adds its own
	if cfg.Snapshot.Transport == nil {
		// The node's own upstream pools: its Via name and listeners are
		// what loop detection compares with.
		cfg.Snapshot.Transport = proxy.NewTransport(proxy.Settings{NodeID: cfg.NodeID, Logger: cfg.Logger})
	}
	cfg.Snapshot.Transport.SetListeners(cfg.Listen, cfg.Admin)
	cfg.Snapshot.Metrics = cfg.Metrics
	cfg.Snapshot.Logger = cfg.Logger
	cfg.Snapshot.TrustedProxies = cfg.TrustedProxies
	if cfg.Snapshot.MaxKeysPerLimit == 0 {
		cfg.Snapshot.MaxKeysPerLimit = cfg.MaxKeysPerLimit
	}
	return &Node{cfg: cfg, log: cfg.Logger, metrics: cfg.Metrics, started: time.Now()}
}

// Current returns the applied snapshot, or nil before the first Apply.
func (n *Node) Current() *snapshot.Snapshot { return n.current.Load() }

// Apply decodes, validates and compiles one document and, when all of that
// succeeds, swaps it in. On any error the applied snapshot stays as it was, the
// error is logged with its field paths, counted in
// sluice_ruleset_apply_errors_total and shown in /status, and returned.
func (n *Node) Apply(ctx context.Context, u source.Update) error {
	n.applyMu.Lock()
	defer n.applyMu.Unlock()
	err := n.apply(ctx, u)
	n.statusMu.Lock()
	defer n.statusMu.Unlock()
	if err != nil {
		n.metrics.RulesetApplyErrors.Inc()
		n.lastApplyError = err.Error()
		n.lastErrorAt = time.Now()
		n.log.Error("rule set refused; keeping the last good one", "source", u.Source, "version", u.Version, "err", err,
			"fieldErrors", api.AsErrors(err))
		return err
	}
	n.lastApplyError = ""
	return nil
}

func (n *Node) apply(ctx context.Context, u source.Update) error {
	if u.Err != nil {
		return u.Err
	}
	rs, err := api.Decode(u.Data)
	if err != nil {
		return err
	}
	v, err := api.Validated(rs) // validates, normalizes once, checksums that
	if err != nil {
		return err
	}
	prev := n.current.Load()
	meta := snapshot.Meta{Version: u.Version, Checksum: v.Checksum(), Source: u.Source, AppliedAt: time.Now()}
	if prev != nil && prev.Checksum == meta.Checksum {
		// Same rules (a re-publish, or leaving a canary for identical
		// content): keep every component, take the new version and source.
		same := *prev
		same.Meta = meta
		n.current.Store(&same)
		n.metrics.RulesetVersion.Set(float64(meta.Version))
		return nil
	}
	next, err := snapshot.Compile(ctx, v, meta, prev, n.cfg.Snapshot)
	if err != nil {
		return fmt.Errorf("compiling rule set: %w", err)
	}
	n.current.Store(next)
	if prev != nil {
		prev.Retire(next)
	}
	n.ovMu.Lock()
	if len(n.override.DegradeLevels) > 0 {
		n.applyLevelsLocked(next.Degrades())
	}
	n.ovMu.Unlock()
	n.metrics.RulesetVersion.Set(float64(meta.Version))
	n.metrics.RulesetApplies.Inc()
	n.log.Info("rule set applied", "source", meta.Source, "version", meta.Version, "checksum", meta.Checksum,
		"routes", len(rs.Routes), "limits", len(rs.Limits), "breakers", len(rs.Breakers), "degrades", len(rs.Degrades))
	return nil
}

// Status is what /status serves.
type Status struct {
	NodeID         string         `json:"nodeId,omitempty"`
	Build          string         `json:"build"`
	StartedAt      time.Time      `json:"startedAt"`
	Version        int64          `json:"version"`
	Checksum       string         `json:"checksum,omitempty"`
	Source         string         `json:"source,omitempty"`
	AppliedAt      time.Time      `json:"appliedAt,omitzero"`
	LastApplyError string         `json:"lastApplyError,omitempty"`
	LastErrorAt    time.Time      `json:"lastErrorAt,omitzero"`
	Routes         int            `json:"routes"`
	Limits         int            `json:"limits"`
	Breakers       int            `json:"breakers"`
	Degrades       int            `json:"degrades"`
	Draining       bool           `json:"draining,omitempty"`
	Components     map[string]any `json:"components,omitempty"`
	// Targets is the health of the upstream targets with outlier detection
	// or health checks; Adaptive the adaptive limits' state (issue 15).
	Targets  []proxy.TargetHealth `json:"targets,omitempty"`
	Adaptive []limit.AdaptiveRule `json:"adaptive,omitempty"`
	// Identities is each identity's JWKS state (issue 28).
	Identities []snapshot.IdentityStatus `json:"identities,omitempty"`
}

// Status reports the applied version and the last apply error.
func (n *Node) Status() Status {
	st := Status{NodeID: n.cfg.NodeID, Build: buildinfo.Version, StartedAt: n.started}
	if s := n.current.Load(); s != nil {
		st.Version, st.Checksum, st.Source, st.AppliedAt = s.Version, s.Checksum, s.Source, s.AppliedAt
		st.Routes, st.Limits, st.Breakers, st.Degrades = len(s.Rules.Routes), len(s.Rules.Limits), len(s.Rules.Breakers), len(s.Rules.Degrades)
		st.Targets, st.Adaptive = s.Targets(), s.Adaptive()
		st.Identities = s.Identities()
	}
	n.statusMu.Lock()
	st.LastApplyError, st.LastErrorAt = n.lastApplyError, n.lastErrorAt
	n.statusMu.Unlock()
	st.Draining = n.draining.Load()
	if len(n.cfg.Stores) > 0 {
		st.Components = make(map[string]any, len(n.cfg.Stores))
		for name, f := range n.cfg.Stores {
			st.Components[name] = f()
		}
	}
	return st
}

// ErrNoRules is the readiness error before any rule set is applied.
var ErrNoRules = errors.New("no rule set applied yet")

// ErrDraining is the readiness error while the node shuts down.
var ErrDraining = errors.New("draining")

// Ready returns nil when the node has rules to serve.
func (n *Node) Ready() error {
	if n.draining.Load() {
		return ErrDraining
	}
	if n.drained.Load() {
		return ErrDrained
	}
	if n.current.Load() == nil {
		return ErrNoRules
	}
	return nil
}
