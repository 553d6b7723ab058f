package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/sluicegw/sluice/api"
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

// Nodes reads node registrations and writes operator overrides. The zero
// value is not usable: set Client.
type Nodes struct {
	Client *clientv3.Client
	Keys   api.Keys
	// Timeout bounds each call; zero means 5s.
	Timeout time.Duration
}

func (n *Nodes) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	if n.Timeout == 0 {
		return context.WithTimeout(ctx, 5*time.Second)
	}
	return context.WithTimeout(ctx, n.Timeout)
}

// FindNodes lists the live registrations of a namespace's nodes, by node id,
// with each node's override if it has one. Entries that do not decode are
// skipped.
func (n *Nodes) FindNodes(ctx context.Context, ns string) ([]api.NodeStatus, map[string]api.Override, error) {
	ctx, cancel := n.ctx(ctx)
	defer cancel()
	resp, err := n.Client.Get(ctx, n.Keys.Nodes(ns), clientv3.WithPrefix())
	if err != nil {
		return nil, nil, fmt.Errorf("reading nodes: %w", err)
	}
	out := []api.NodeStatus{}
	for _, kv := range resp.Kvs {
		var s api.NodeStatus
		if json.Unmarshal(kv.Value, &s) == nil {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	ovs, err := n.Client.Get(ctx, n.Keys.Overrides(ns), clientv3.WithPrefix())
	if err != nil {
		return nil, nil, fmt.Errorf("reading overrides: %w", err)
	}
	overrides := map[string]api.Override{}
	prefix := n.Keys.Overrides(ns)
	for _, kv := range ovs.Kvs {
		var o api.Override
		if json.Unmarshal(kv.Value, &o) == nil {
			overrides[string(kv.Key[len(prefix):])] = o
		}
	}
	return out, overrides, nil
}

// PutOverride writes a node's override and returns it with the etcd revision
// of the write. A zero override deletes it.
func (n *Nodes) PutOverride(ctx context.Context, ns, nodeID string, o api.Override) (api.Override, error) {
	ctx, cancel := n.ctx(ctx)
	defer cancel()
	key := n.Keys.Override(ns, nodeID)
	if len(o.DegradeLevels) == 0 && !o.Drain {
		resp, err := n.Client.Delete(ctx, key)
		if err != nil {
			return o, fmt.Errorf("deleting override: %w", err)
		}
		o.Revision = resp.Header.Revision
		return o, nil
	}
	b, err := json.Marshal(o)
	if err != nil {
		return o, fmt.Errorf("encoding override: %w", err)
	}
	resp, err := n.Client.Put(ctx, key, string(b))
	if err != nil {
		return o, fmt.Errorf("writing override: %w", err)
	}
	o.Revision = resp.Header.Revision
	return o, nil
}
