package etcd

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// NewClient connects to etcd at endpoints with settings fit for rule sets
// of many thousand rules (16 MiB messages). It does not wait for a
// connection: calls fail until etcd answers.
func NewClient(endpoints []string) (*clientv3.Client, error) {
	c, err := clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          3 * time.Second,
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
	return c, nil
}

// Ping checks that etcd answers within a second.
func Ping(ctx context.Context, c *clientv3.Client) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := c.Get(ctx, "/sluice-health", clientv3.WithCountOnly())
	return err
}
