package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/etcdwatch"
)

// Nodes counts the live registrations of a namespace (the lease-bound keys
// under api.Keys.Nodes, which expire with their nodes' leases, of valid node
// ids: what the control plane lists), kept current by a watch. Count is what a limit with onStoreError: local divides by. Set the
// exported fields and call Run once; Count and Connected are safe for
// concurrent use and cheap.
type Nodes struct {
	// Client is the etcd client; required.
	Client *clientv3.Client
	// Keys lays out the etcd keys; the zero value uses api.DefaultEtcdPrefix.
	Keys api.Keys
	// Namespace is the namespace whose nodes are counted; required.
	Namespace string
	// Heartbeat, OpTimeout, MinBackoff and MaxBackoff are as in Overrides.
	Heartbeat, OpTimeout   time.Duration
	MinBackoff, MaxBackoff time.Duration
	// Logger; nil means slog.Default().
	Logger *slog.Logger

	count     atomic.Int64
	connected atomic.Bool
	mu        sync.Mutex // guards ids (Run's goroutine only, kept for clarity)
	ids       map[string]struct{}
}

// Count returns the number of live nodes of the namespace, at least 1 (the
// caller is a node too, registered or not), so dividing by it is always
// safe. While etcd is unreachable it keeps the last count seen.
func (n *Nodes) Count() int { return int(max(n.count.Load(), 1)) }

// Connected reports whether the watch is established.
func (n *Nodes) Connected() bool { return n.connected.Load() }

// Run follows the namespace's registrations until ctx ends, then returns
// nil. It returns an error only for invalid settings.
func (n *Nodes) Run(ctx context.Context) error {
	if n.Client == nil {
		return errors.New("nodes: no etcd client")
	}
	if !api.ValidID(n.Namespace) {
		return fmt.Errorf("nodes: invalid namespace %q", n.Namespace)
	}
	if n.Logger == nil {
		n.Logger = slog.Default()
	}
	defer n.connected.Store(false)
	prefix := n.Keys.Nodes(n.Namespace)
	f, err := etcdwatch.New(etcdwatch.Settings{
		Client:     n.Client,
		Specs:      []etcdwatch.Spec{{Key: prefix, Prefix: true}},
		OpTimeout:  n.OpTimeout,
		Heartbeat:  n.Heartbeat,
		MinBackoff: n.MinBackoff,
		MaxBackoff: n.MaxBackoff,
		Listed: func(_ context.Context, _ int64, kvs [][]*mvccpb.KeyValue) error {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.ids = map[string]struct{}{}
			if len(kvs) > 0 {
				for _, kv := range kvs[0] {
					if id, ok := registration(prefix, kv); ok {
						n.ids[id] = struct{}{}
					}
				}
			}
			n.count.Store(int64(len(n.ids)))
			n.connected.Store(true)
			return nil
		},
		Changed: func(_ context.Context, _ int64, evs []*clientv3.Event) error {
			n.mu.Lock()
			defer n.mu.Unlock()
			for _, ev := range evs {
				id, ok := registration(prefix, ev.Kv)
				if ev.Type == clientv3.EventTypeDelete || !ok {
					delete(n.ids, strings.TrimPrefix(string(ev.Kv.Key), prefix))
				} else {
					n.ids[id] = struct{}{}
				}
			}
			n.count.Store(int64(len(n.ids)))
			return nil
		},
		Broken: func(err error) {
			n.connected.Store(false)
			n.Logger.Warn("node count watch broken; keeping the last count", "namespace", n.Namespace, "count", n.count.Load(), "err", err)
		},
	})
	if err != nil {
		return fmt.Errorf("nodes: %w", err)
	}
	return f.Run(ctx, 0)
}

// registration reports whether kv is a node's registration, as the control
// plane counts them: bound to a lease (a registrar always binds it, so that
// it disappears with the node), under a valid node id, of a value that
// decodes (api.DecodeNodeStatus). It returns the node id.
func registration(prefix string, kv *mvccpb.KeyValue) (string, bool) {
	id := strings.TrimPrefix(string(kv.Key), prefix)
	if kv.Lease == 0 {
		return id, false
	}
	_, err := api.DecodeNodeStatus(id, kv.Value)
	return id, err == nil
}
