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

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/gateway"
	"github.com/sluicegw/sluice/dataplane/registry"
	"github.com/sluicegw/sluice/dataplane/source"
)

// etcdDeps is what following etcd needs before the node is built: the client
// and the live-node count (for the Redis limiter's local fallback).
type etcdDeps struct {
	client *clientv3.Client
	keys   api.Keys
	nodes  *registry.Nodes
}

func dialEtcd(o *options, log *slog.Logger) (*etcdDeps, error) {
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
		DialTimeout:          3 * time.Second,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("--etcd: %w", err)
	}
	keys := api.Keys{Prefix: o.etcdPrefix}
	return &etcdDeps{client: c, keys: keys, nodes: &registry.Nodes{Client: c, Keys: keys, Namespace: o.namespace, Logger: log}}, nil
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
	src := &source.Etcd{Client: d.client, Namespace: o.namespace, Keys: d.keys, Labels: labels, StateDir: o.stateDir, Logger: log}
	if err := src.Start(ctx, node.Apply); err != nil {
		if !errors.Is(err, source.ErrNoState) {
			return nil, err
		}
		// Nothing published yet (or etcd down and no cache): serve not-ready
		// (503, /readyz failing) and take the first version when it lands.
		log.Warn("no rule set yet: the node is not ready until the first version arrives", "namespace", o.namespace, "err", err)
	}
	tmpl := api.NodeStatus{NodeID: o.nodeID, Namespace: o.namespace, Address: advertise(o), AdminAddress: o.admin, Labels: labels}
	reg := &registry.Registrar{Client: d.client, Keys: d.keys, Namespace: o.namespace, NodeID: o.nodeID, Logger: log,
		NodeStatus: func() api.NodeStatus { return node.NodeStatus(tmpl) }}
	ovr := &registry.Overrides{Client: d.client, Keys: d.keys, Namespace: o.namespace, NodeID: o.nodeID, Logger: log,
		OnChange: node.ApplyOverride}
	status["etcd"] = func() any { return src.Status() }
	status["registration"] = func() any { return reg.Status() }
	status["override"] = func() any { return ovr.Current() }
	return []func(context.Context) error{
		func(ctx context.Context) error { return src.Run(ctx, node.Apply) },
		reg.Run,
		ovr.Run,
		d.nodes.Run,
	}, nil
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
