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
	"github.com/sluicegw/sluice/etcdwatch"
)

// etcdDeps is what following etcd needs before the node is built: the client,
// the live-node count (for the Redis limiter's local fallback), the trusted
// keys and the signature-rejection counter.
//
// With --etcd-username the etcd client authenticates as it is made, which
// needs etcd. When etcd cannot be reached then, client is a client without
// credentials (its calls fail, so the node boots from its state dir) and
// the authenticated one is made by a component of the node (see
// components): ready is closed when authed is set (at once when the first
// attempt worked).
type etcdDeps struct {
	client   *clientv3.Client
	authed   *clientv3.Client
	authCfg  *clientv3.Config // set while the authenticated client is still to be made
	ready    chan struct{}
	log      *slog.Logger
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
	d := &etcdDeps{ready: make(chan struct{}), log: log}
	c, err := clientv3.New(cfg)
	switch {
	case err == nil:
		d.client, d.authed = c, c
		close(d.ready)
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
		d.authCfg = &cfg
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

// components are the node components the etcd client needs: with the
// authenticated client still to be made, the one that makes it. It returns
// when the node stops, not when authenticated: the client lives in its
// context.
func (d *etcdDeps) components() []gateway.Component {
	if d.authCfg == nil {
		return nil
	}
	cfg := *d.authCfg
	return []gateway.Component{{Name: "etcd-auth", Run: func(ctx context.Context) error {
		d.authenticate(ctx, cfg, d.log)
		<-ctx.Done()
		return nil
	}}}
}

// authenticate makes the authenticated client, retrying with backoff until
// it works or ctx ends.
func (d *etcdDeps) authenticate(ctx context.Context, cfg clientv3.Config, log *slog.Logger) {
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

// close closes the clients; call it after the node's Run has returned
// (every component, authenticate among them, has stopped).
func (d *etcdDeps) close() {
	d.client.Close()
	if d.authed != nil && d.authed != d.client {
		d.authed.Close()
	}
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
