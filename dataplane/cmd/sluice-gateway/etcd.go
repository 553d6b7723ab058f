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
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/gateway"
	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/dataplane/registry"
	"github.com/sluicegw/sluice/dataplane/source"
)

// etcdDeps is what following etcd needs before the node is built: the client,
// the live-node count (for the Redis limiter's local fallback), the trusted
// keys and the signature-rejection counter.
type etcdDeps struct {
	client   *clientv3.Client
	keys     api.Keys
	nodes    *registry.Nodes
	verifier *api.Verifier // nil: --insecure-accept-unsigned
	rejected *prometheus.CounterVec
}

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
	// New does not wait for a connection: an unreachable etcd is handled by
	// the source (boot from the state dir) and the registrar (retry).
	c, err := clientv3.New(clientv3.Config{
		Endpoints:            eps,
		TLS:                  tlsCfg,
		Username:             o.etcdUser,
		Password:             o.etcdPassword,
		DialTimeout:          3 * time.Second,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("--etcd: %w", err)
	}
	keys := api.Keys{Prefix: o.etcdPrefix}
	rejected := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_signature_rejections_total",
		Help: "etcd values (and state files) refused for their signature, by what (ruleset, canary, override, state) and reason (unsigned, unknown-key, bad-signature).",
	}, []string{"what", "reason"})
	if err := m.Registry.Register(rejected); err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	return &etcdDeps{client: c, keys: keys, verifier: verifier, rejected: rejected,
		nodes: &registry.Nodes{Client: c, Keys: keys, Namespace: o.namespace, Logger: log}}, nil
}

// followEtcd applies the namespace's published rules (or the state dir's copy
// when etcd cannot be reached) before the node listens, and returns the
// goroutines that keep following: the source, the registration, the override
// watch and the live-node count.
func followEtcd(ctx context.Context, o *options, d *etcdDeps, node *gateway.Node, log *slog.Logger, status map[string]func() any) ([]func(context.Context) error, error) {
	labels, err := source.ParseLabels(o.labels)
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
	return []func(context.Context) error{
		func(ctx context.Context) error { return src.Run(ctx, node.Apply) },
		reg.Run,
		ovr.Run,
		d.nodes.Run,
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
