package etcd

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// EmbeddedConfig configures an in-process etcd server for the one-machine dev
// stack and for tests. Zero values: ClientURL http://127.0.0.1:2379, PeerURL
// http://127.0.0.1:2380, MaxRequestBytes 16 MiB (rule sets of many thousand
// rules exceed etcd's 1.5 MiB default).
type EmbeddedConfig struct {
	Dir             string
	ClientURL       string
	PeerURL         string
	MaxRequestBytes uint
	// LogLevel is etcd's log level; "" means "error".
	LogLevel string
	// CertFile and KeyFile, when set, serve clients over TLS (ClientURL
	// must then be https://); with TrustedCAFile, clients must present a
	// certificate signed by that CA.
	CertFile, KeyFile, TrustedCAFile string
}

// Embedded is a running embedded etcd server.
type Embedded struct {
	e        *embed.Etcd
	endpoint string
}

// StartEmbedded starts a single-member etcd in-process, storing its data in
// cfg.Dir, and waits until it serves (at most a minute, or until ctx ends).
func StartEmbedded(ctx context.Context, cfg EmbeddedConfig) (*Embedded, error) {
	if cfg.ClientURL == "" {
		cfg.ClientURL = "http://127.0.0.1:2379"
	}
	if cfg.PeerURL == "" {
		cfg.PeerURL = "http://127.0.0.1:2380"
	}
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = 16 << 20
	}
	if cfg.LogLevel == "" {
		cfg.LogLevel = "error"
	}
	cu, err := url.Parse(cfg.ClientURL)
	if err != nil {
		return nil, fmt.Errorf("etcd client url: %w", err)
	}
	pu, err := url.Parse(cfg.PeerURL)
	if err != nil {
		return nil, fmt.Errorf("etcd peer url: %w", err)
	}
	ec := embed.NewConfig()
	ec.Name = "sluice-dev"
	ec.Dir = cfg.Dir
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.MaxRequestBytes = cfg.MaxRequestBytes
	ec.LogLevel = cfg.LogLevel
	ec.LogOutputs = []string{"stderr"}
	if cfg.CertFile != "" {
		ec.ClientTLSInfo = transport.TLSInfo{CertFile: cfg.CertFile, KeyFile: cfg.KeyFile,
			TrustedCAFile: cfg.TrustedCAFile, ClientCertAuth: cfg.TrustedCAFile != ""}
	}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("starting embedded etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd: %w", err)
	case <-time.After(time.Minute):
		e.Close()
		return nil, fmt.Errorf("embedded etcd did not become ready within a minute")
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	ep := cu.Host
	if cu.Scheme == "https" {
		ep = cu.String()
	}
	return &Embedded{e: e, endpoint: ep}, nil
}

// Endpoints returns the client endpoints, for clientv3.Config.
func (e *Embedded) Endpoints() []string { return []string{e.endpoint} }

// Err reports a fatal server error.
func (e *Embedded) Err() <-chan error { return e.e.Err() }

// Close stops the server and waits for it.
func (e *Embedded) Close() { e.e.Close() }
