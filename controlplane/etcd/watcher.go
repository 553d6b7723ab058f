package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

// WatcherSettings configures a NodeWatcher. Client, History and Namespaces
// are required; every other zero value has the meaning documented on its
// field.
type WatcherSettings struct {
	Client  *clientv3.Client
	History sluice.NodeHistory
	// Namespaces lists the namespaces whose nodes to follow.
	Namespaces func(ctx context.Context) ([]string, error)
	// Keys lays out the etcd keys; the zero value uses api.DefaultEtcdPrefix.
	Keys api.Keys
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Rescan is how often Namespaces is called to follow new namespaces;
	// zero means 10s.
	Rescan time.Duration
	// Heartbeat is how often the live nodes' LastSeen is refreshed in the
	// history (so that nodes that vanish while no watcher runs keep a
	// LastSeen close to the truth); zero means 30s.
	Heartbeat time.Duration
	// Forget is how long gone nodes are kept in the history; zero means 7
	// days.
	Forget time.Duration
	// MinBackoff and MaxBackoff bound the delay before listing again after a
	// failure; zero means 200ms and 10s.
	MinBackoff, MaxBackoff time.Duration
}

// NodeWatcher follows the node registrations of every namespace into the
// node history: for each namespace it lists the nodes prefix at a revision R
// (recording the whole state: nodes not listed are gone), watches from R+1
// (recording each registration that changed in a way that matters and each
// deletion), and lists again after a compaction, a broken watch or a failed
// write, with backoff. Start it once; Close stops it and waits.
type NodeWatcher struct {
	s      WatcherSettings
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// NewNodeWatcher returns a NodeWatcher over s, not yet started.
func NewNodeWatcher(s WatcherSettings) *NodeWatcher {
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	if s.Rescan == 0 {
		s.Rescan = 10 * time.Second
	}
	if s.Heartbeat == 0 {
		s.Heartbeat = 30 * time.Second
	}
	if s.Forget == 0 {
		s.Forget = 7 * 24 * time.Hour
	}
	if s.MinBackoff == 0 {
		s.MinBackoff = 200 * time.Millisecond
	}
	if s.MaxBackoff == 0 {
		s.MaxBackoff = 10 * time.Second
	}
	return &NodeWatcher{s: s}
}

// Start follows the namespaces until ctx ends or Close is called.
func (w *NodeWatcher) Start(ctx context.Context) {
	w.once.Do(func() {
		ctx, w.cancel = context.WithCancel(ctx)
		w.wg.Add(1)
		go w.supervise(ctx)
	})
}

// Close stops every watch and waits for the goroutines.
func (w *NodeWatcher) Close() {
	w.once.Do(func() {}) // a later Start does nothing
	if w.cancel != nil {
		w.cancel()
	}
	w.wg.Wait()
}

func (w *NodeWatcher) recovered(what string) {
	if r := recover(); r != nil {
		w.s.Logger.Error("node watcher panicked", "in", what, "panic", r)
	}
}

// supervise starts one follower per namespace, rescanning for new ones.
func (w *NodeWatcher) supervise(ctx context.Context) {
	defer w.wg.Done()
	defer w.recovered("supervisor")
	following := map[string]bool{}
	for {
		names, err := w.s.Namespaces(ctx)
		if err != nil && ctx.Err() == nil {
			w.s.Logger.Warn("node watcher: listing namespaces", "err", err)
		}
		for _, ns := range names {
			if !following[ns] {
				following[ns] = true
				w.wg.Add(1)
				go w.follow(ctx, ns)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.s.Rescan):
		}
	}
}

// follow lists and watches one namespace's nodes until ctx ends.
func (w *NodeWatcher) follow(ctx context.Context, ns string) {
	defer w.wg.Done()
	defer w.recovered("namespace " + ns)
	backoff := w.s.MinBackoff
	for ctx.Err() == nil {
		err := w.followOnce(ctx, ns, func() { backoff = w.s.MinBackoff })
		if ctx.Err() != nil {
			return
		}
		w.s.Logger.Warn("node watcher: listing again", "namespace", ns, "err", err, "in", backoff)
		d := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		backoff = min(backoff*2, w.s.MaxBackoff)
	}
}

// fingerprint is what the history records of a registration, without the
// fields that change on every refresh (load figures, UpdatedAt).
func fingerprint(s api.NodeStatus) string {
	s.RPS, s.RejectRate, s.P99Seconds, s.UpdatedAt = 0, 0, 0, time.Time{}
	b, _ := json.Marshal(s)
	return string(b)
}

func (w *NodeWatcher) followOnce(ctx context.Context, ns string, listed func()) error {
	prefix := w.s.Keys.Nodes(ns)
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	resp, err := w.s.Client.Get(lctx, prefix, clientv3.WithPrefix())
	cancel()
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	recorded := map[string]string{} // node id → fingerprint recorded
	var live []api.NodeStatus
	for _, kv := range resp.Kvs {
		if s, ok := decodeNode(prefix, kv); ok {
			live = append(live, s)
			recorded[s.NodeID] = fingerprint(s)
		}
	}
	if err := w.s.History.SyncNodes(ctx, ns, live, w.s.Now()); err != nil {
		return err
	}
	listed()
	wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer wcancel()
	wch := w.s.Client.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	beat := time.NewTicker(w.s.Heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-beat.C:
			now := w.s.Now()
			if err := w.s.History.TouchNodes(ctx, ns, now, now.Add(-w.s.Forget)); err != nil {
				return err
			}
		case wr, ok := <-wch:
			if !ok {
				return fmt.Errorf("the watch closed")
			}
			if wr.CompactRevision != 0 {
				return fmt.Errorf("the watch fell behind a compaction at revision %d", wr.CompactRevision)
			}
			if err := wr.Err(); err != nil {
				return fmt.Errorf("watching: %w", err)
			}
			now := w.s.Now()
			for _, ev := range wr.Events {
				id := strings.TrimPrefix(string(ev.Kv.Key), prefix)
				if ev.Type == clientv3.EventTypeDelete {
					delete(recorded, id)
					if err := w.s.History.RecordNodeGone(ctx, ns, id, now); err != nil {
						return err
					}
					continue
				}
				s, ok := decodeNode(prefix, ev.Kv)
				if !ok {
					if _, was := recorded[id]; was {
						// Rewritten without a lease: no longer a node's registration.
						delete(recorded, id)
						if err := w.s.History.RecordNodeGone(ctx, ns, id, now); err != nil {
							return err
						}
					}
					continue
				}
				fp := fingerprint(s)
				if recorded[id] == fp {
					continue
				}
				if err := w.s.History.RecordNode(ctx, ns, s, now); err != nil {
					return err
				}
				recorded[id] = fp
			}
		}
	}
}

// decodeNode reads one registration; the key names the node. A value not
// bound to a lease is not a registration (a node's registrar always binds
// it, so that it disappears with the node): ok is false.
func decodeNode(prefix string, kv *mvccpb.KeyValue) (api.NodeStatus, bool) {
	var s api.NodeStatus
	if kv.Lease == 0 {
		return s, false
	}
	if err := json.Unmarshal(kv.Value, &s); err != nil {
		return s, false
	}
	s.NodeID = strings.TrimPrefix(string(kv.Key), prefix)
	return s, NodeIDValid(s.NodeID)
}
