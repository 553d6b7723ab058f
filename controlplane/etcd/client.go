package etcd

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/sluicegw/sluice/api"
)

// ClientConfig is how sluice-admin reaches etcd. Endpoints is required;
// every other zero value means "not used".
type ClientConfig struct {
	Endpoints []string
	// CAFile, CertFile and KeyFile are PEM files: the CA that signed the
	// servers' certificates, and the client certificate and key (both or
	// neither); see api.ClientTLS.
	CAFile, CertFile, KeyFile string
	// Username and Password authenticate to etcd's auth (both or neither).
	Username, Password string
	// DialTimeout bounds the authentication at connect time (with a user);
	// zero means 3s.
	DialTimeout time.Duration
}

// NewClient connects to etcd at endpoints without TLS or auth; see
// NewClientConfig.
func NewClient(endpoints []string) (*clientv3.Client, error) {
	return NewClientConfig(ClientConfig{Endpoints: endpoints})
}

// NewClientConfig connects to etcd with settings fit for rule sets of many
// thousand rules (16 MiB messages), over TLS and with a user when c says
// so. It does not wait for a connection: calls fail until etcd answers.
func NewClientConfig(c ClientConfig) (*clientv3.Client, error) {
	tlsCfg, err := api.ClientTLS(c.CAFile, c.CertFile, c.KeyFile)
	if err != nil {
		return nil, err
	}
	if (c.Username == "") != (c.Password == "") {
		return nil, fmt.Errorf("etcd auth: give both a user name and a password")
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 3 * time.Second
	}
	cl, err := clientv3.New(clientv3.Config{
		Endpoints:            c.Endpoints,
		TLS:                  tlsCfg,
		Username:             c.Username,
		Password:             c.Password,
		DialTimeout:          c.DialTimeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		MaxCallSendMsgSize:   16 << 20,
		MaxCallRecvMsgSize:   64 << 20,
		// Failures surface as errors that the publisher and the API log
		// themselves; the client's own retry chatter is dropped.
		Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return cl, nil
}

// Ping checks that etcd answers within a second.
func Ping(ctx context.Context, c *clientv3.Client) error {
	return PingKeys(ctx, c, api.Keys{})
}

// PingKeys checks that etcd answers within a second, reading a key under
// the keys' prefix (so that, with etcd auth, the control plane's role needs
// nothing outside it).
func PingKeys(ctx context.Context, c *clientv3.Client, keys api.Keys) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := c.Get(ctx, keys.Namespace("")+"health", clientv3.WithCountOnly())
	return err
}
