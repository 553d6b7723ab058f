package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/gateway"
	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/dataplane/registry"
	"github.com/sluicegw/sluice/dataplane/source"
	"github.com/sluicegw/sluice/etcdwatch"
)

// etcdDeps is what following etcd needs before the node is built: the client,
// the live-node count (for the Redis limiter's local fallback), the trusted
// keys and the signature-rejection counter.
//
// With --etcd-username the etcd client authenticates as it is made, which
// needs etcd. When etcd cannot be reached then, client is a client without
// credentials (its calls fail, so the node boots from its state dir) and
// the authenticated one is made in the background: ready is closed when
// authed is set (at once when the first attempt worked).
type etcdDeps struct {
	client   *clientv3.Client
	authed   *clientv3.Client
	ready    chan struct{}
	stop     context.CancelFunc
	done     chan struct{}
	keys     api.Keys
	nodes    *registry.Nodes
	verifier *api.Verifier // nil: --insecure-accept-unsigned
	rejected *prometheus.CounterVec
}

// etcdDialTimeout bounds the etcd client's authentication at connect time
// (with --etcd-username); tests of a race-instrumented etcd lengthen it.
var etcdDialTimeout = 3 * time.Second

func dialEtcd(o *options, log *slog.Logger, m *metrics.Metrics) (*etcdDeps, error) {
	var verifier *api.Verifier
	if o.trustKeys != "" {
		var files []string
		for _, f := range strings.Split(o.trustKeys, ",") {
			if f = strings.TrimSpace(f); f != "" {
				files = append(files, f)
			}
		}
		v, err := api.ReadVerifier(files...)
		if err != nil {
			return nil, fmt.Errorf("--trust-keys: %w", err)
		}
		verifier = v
		log.Info("verifying etcd values", "trustedKeys", v.KeyIDs())
	} else {
		log.Warn("accepting UNSIGNED etcd values (--insecure-accept-unsigned): anyone who can write to etcd controls this node's rules")
	}
	tlsCfg, err := api.ClientTLS(o.etcdCA, o.etcdCert, o.etcdKey)
	if err != nil {
		return nil, err
	}
	if (o.etcdUser == "") != (o.etcdPassword == "") {
		return nil, errors.New("etcd auth: give both --etcd-username and a password (--etcd-password-file or SLUICE_ETCD_PASSWORD)")
	}
	var eps []string
	for _, e := range strings.Split(o.etcd, ",") {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	// New does not wait for a connection (unless it must authenticate): an
	// unreachable etcd is handled by the source (boot from the state dir)
	// and the registrar (retry).
	cfg := clientv3.Config{
		Endpoints:            eps,
		TLS:                  tlsCfg,
		Username:             o.etcdUser,
		Password:             o.etcdPassword,
		DialTimeout:          etcdDialTimeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		Logger:               zap.NewNop(),
	}
	d := &etcdDeps{ready: make(chan struct{}), done: make(chan struct{}), stop: func() {}}
	c, err := clientv3.New(cfg)
	switch {
	case err == nil:
		d.client, d.authed = c, c
		close(d.ready)
		close(d.done)
	case o.etcdUser == "":
		return nil, fmt.Errorf("--etcd: %w", err)
	case errors.Is(err, rpctypes.ErrAuthFailed):
		return nil, fmt.Errorf("--etcd-username %s: %w", o.etcdUser, err)
	default:
		log.Warn("etcd unreachable: authenticating in the background; until then the node runs its state dir's rules", "user", o.etcdUser, "err", err)
		anon := cfg
		anon.Username, anon.Password = "", ""
		if d.client, err = clientv3.New(anon); err != nil {
			return nil, fmt.Errorf("--etcd: %w", err)
		}
		var bg context.Context
		bg, d.stop = context.WithCancel(context.Background())
		go d.authenticate(bg, cfg, log)
	}
	keys := api.Keys{Prefix: o.etcdPrefix}
	rejected := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_signature_rejections_total",
		Help: "etcd values (and state files) refused for their signature, by what (ruleset, canary, override, state) and reason (unsigned, unknown-key, bad-signature).",
	}, []string{"what", "reason"})
	if err := m.Registry.Register(rejected); err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	for _, what := range []string{"ruleset", "canary", "override", "state"} {
		for _, reason := range []string{"unsigned", "unknown-key", "bad-signature"} {
			rejected.WithLabelValues(what, reason) // exported at 0, so that increase() sees the first one
		}
	}
	d.keys, d.verifier, d.rejected = keys, verifier, rejected
	d.nodes = &registry.Nodes{Client: d.client, Keys: keys, Namespace: o.namespace, Logger: log}
	return d, nil
}

// authenticate makes the authenticated client, retrying with backoff until
// it works or ctx ends.
func (d *etcdDeps) authenticate(ctx context.Context, cfg clientv3.Config, log *slog.Logger) {
	defer close(d.done)
	cfg.Context = ctx
	cfg.DialTimeout = max(cfg.DialTimeout, 15*time.Second) // nothing waits for it: give a slow etcd time
	for failures := 1; ; failures++ {
		c, err := clientv3.New(cfg)
		if err == nil {
			d.authed = c
			close(d.ready)
			log.Info("etcd authenticated", "user", cfg.Username)
			return
		}
		if errors.Is(err, rpctypes.ErrAuthFailed) {
			log.Error("etcd refuses the user name or password; retrying", "user", cfg.Username, "err", err)
		}
		t := time.NewTimer(etcdwatch.Backoff(failures, time.Second, 30*time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// wait returns the authenticated client once there is one, nil if ctx ends
// first.
func (d *etcdDeps) wait(ctx context.Context) *clientv3.Client {
	select {
	case <-d.ready:
		return d.authed
	case <-ctx.Done():
		return nil
	}
}

// close stops authenticating and closes the clients.
func (d *etcdDeps) close() {
	d.stop()
	<-d.done
	d.client.Close()
	if d.authed != nil && d.authed != d.client {
		d.authed.Close()
	}
}

// followEtcd applies the namespace's published rules (or the state dir's copy
// when etcd cannot be reached) before the node listens, and returns the
// goroutines that keep following: the source, the registration, the override
// watch and the live-node count.
func followEtcd(ctx context.Context, o *options, d *etcdDeps, node *gateway.Node, log *slog.Logger, status map[string]func() any) ([]func(context.Context) error, error) {
	labels, err := api.ParseLabels(o.labels)
	if err != nil {
		return nil, fmt.Errorf("--labels: %w", err)
	}
	if o.stateDir == "" {
		log.Warn("no --state-dir: this node cannot boot while etcd is unreachable")
	}
	reject := func(what, reason string) { d.rejected.WithLabelValues(what, reason).Inc() }
	src := &source.Etcd{Client: d.client, Namespace: o.namespace, Keys: d.keys, Labels: labels, StateDir: o.stateDir, Logger: log,
		Verifier: d.verifier, OnSignatureRejection: reject}
	if err := src.Start(ctx, node.Apply); err != nil {
		if !errors.Is(err, source.ErrNoState) {
			return nil, err
		}
		// Nothing published yet (or etcd down and no cache): serve not-ready
		// (503, /readyz failing) and take the first version when it lands.
		log.Warn("no rule set yet: the node is not ready until the first version arrives", "namespace", o.namespace, "err", err)
	}
	tmpl := api.NodeStatus{NodeID: o.nodeID, Namespace: o.namespace, Address: advertise(o), AdminAddress: o.admin, Labels: labels}
	ovr := &registry.Overrides{Client: d.client, Keys: d.keys, Namespace: o.namespace, NodeID: o.nodeID, Logger: log,
		OnChange: node.ApplyOverride, Verifier: d.verifier,
		OnSignatureRejection: func(reason string) { reject("override", reason) }}
	reg := &registry.Registrar{Client: d.client, Keys: d.keys, Namespace: o.namespace, NodeID: o.nodeID, Logger: log,
		NodeStatus: func() api.NodeStatus {
			st := node.NodeStatus(tmpl)
			st.SignatureRejections = src.SignatureRejections() + ovr.Status().SignatureRejections
			st.AcceptsUnsigned = d.verifier == nil
			return st
		}}
	status["etcd"] = func() any { return src.Status() }
	status["registration"] = func() any { return reg.Status() }
	status["override"] = func() any { return ovr.Current() }
	status["signatures"] = func() any {
		s := signatureStatus{TrustedKeys: d.verifier.KeyIDs(), Rejections: src.SignatureRejections() + ovr.Status().SignatureRejections}
		if d.verifier == nil {
			s.Warning = "accepting unsigned etcd values (--insecure-accept-unsigned): anyone who can write to etcd controls this node's rules"
		}
		if e := ovr.Status().LastError; e != "" {
			s.LastOverrideError = e
		}
		return s
	}
	// Each follower starts once the client is authenticated (at once
	// without --etcd-username).
	authed := func(run func(ctx context.Context, c *clientv3.Client) error) func(context.Context) error {
		return func(ctx context.Context) error {
			c := d.wait(ctx)
			if c == nil {
				return nil
			}
			return run(ctx, c)
		}
	}
	return []func(context.Context) error{
		authed(func(ctx context.Context, c *clientv3.Client) error { src.Client = c; return src.Run(ctx, node.Apply) }),
		authed(func(ctx context.Context, c *clientv3.Client) error { reg.Client = c; return reg.Run(ctx) }),
		authed(func(ctx context.Context, c *clientv3.Client) error { ovr.Client = c; return ovr.Run(ctx) }),
		authed(func(ctx context.Context, c *clientv3.Client) error { d.nodes.Client = c; return d.nodes.Run(ctx) }),
	}, nil
}

// signatureStatus is the "signatures" component of /status.
type signatureStatus struct {
	// TrustedKeys are the ids of --trust-keys; empty with
	// --insecure-accept-unsigned, which Warning then says.
	TrustedKeys []string `json:"trustedKeys"`
	Warning     string   `json:"warning,omitempty"`
	// Rejections counts the values refused for their signature (rule set,
	// canary, override, state file).
	Rejections        int64  `json:"rejections"`
	LastOverrideError string `json:"lastOverrideError,omitempty"`
}

// advertise is the traffic address others should use for this node.
func advertise(o *options) string {
	if o.advertise != "" {
		return o.advertise
	}
	host, port, err := net.SplitHostPort(o.listen)
	if err != nil {
		return o.listen
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	return net.JoinHostPort(host, port)
}
