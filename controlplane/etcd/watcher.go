package etcd

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/etcdwatch"
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
	// Progress is how often the watch is probed with a progress request; a
	// watch silent for three Progress intervals (etcd unreachable) counts
	// as broken. Zero means 5s.
	Progress time.Duration
	// OpTimeout bounds each list; zero means 10s.
	OpTimeout time.Duration
}

// NodeWatcher follows the node registrations of every namespace into the
// node history with the list/watch loop of package etcdwatch: for each
// namespace it lists the nodes prefix at a revision R (recording the whole
// state: nodes not listed are gone), watches from R+1 (recording each
// registration that changed in a way that matters and each deletion), lists
// again at once after a compaction, and with backoff after a broken or
// silent watch or a failed write. Start it once; Close stops it and waits.
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
	if s.OpTimeout == 0 {
		s.OpTimeout = 10 * time.Second
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
	superviseNamespaces(ctx, &w.wg, w.s.Logger, "node watcher", w.s.Namespaces, w.s.Rescan, w.follow)
}

// follow lists and watches one namespace's nodes until ctx ends (see
// package etcdwatch), refreshing LastSeen every Heartbeat while the watch
// runs.
func (w *NodeWatcher) follow(ctx context.Context, ns string) {
	defer w.wg.Done()
	defer w.recovered("namespace " + ns)
	prefix := w.s.Keys.Nodes(ns)
	recorded := map[string]string{} // node id → fingerprint recorded
	f, err := etcdwatch.New(etcdwatch.Settings{
		Client:     w.s.Client,
		Specs:      []etcdwatch.Spec{{Key: prefix, Prefix: true}},
		OpTimeout:  w.s.OpTimeout,
		Heartbeat:  w.s.Progress,
		MinBackoff: w.s.MinBackoff,
		MaxBackoff: w.s.MaxBackoff,
		Now:        w.s.Now,
		Listed: func(ctx context.Context, _ int64, kvs [][]*mvccpb.KeyValue) error {
			fresh := map[string]string{}
			var live []api.NodeStatus
			for _, kv := range kvs[0] {
				if s, ok := decodeNode(prefix, kv); ok {
					live = append(live, s)
					fresh[s.NodeID] = fingerprint(s)
				}
			}
			if err := w.s.History.SyncNodes(ctx, ns, live, w.s.Now()); err != nil {
				return err
			}
			recorded = fresh
			return nil
		},
		Changed: func(ctx context.Context, _ int64, evs []*clientv3.Event) error {
			return w.record(ctx, ns, prefix, recorded, evs)
		},
		TickEvery: w.s.Heartbeat,
		Tick: func(ctx context.Context) error {
			now := w.s.Now()
			return w.s.History.TouchNodes(ctx, ns, now, now.Add(-w.s.Forget))
		},
		Broken: func(err error) {
			w.s.Logger.Warn("node watcher: listing again", "namespace", ns, "err", err)
		},
	})
	if err != nil {
		w.s.Logger.Error("node watcher", "namespace", ns, "err", err)
		return
	}
	_ = f.Run(ctx, 0)
}

// fingerprint is what the history records of a registration, without the
// fields that change on every refresh (load figures, UpdatedAt).
func fingerprint(s api.NodeStatus) string {
	s.RPS, s.RejectRate, s.P99Seconds, s.UpdatedAt = 0, 0, 0, time.Time{}
	b, _ := json.Marshal(s)
	return string(b)
}

// record writes the history of one batch of watch events on ns's nodes
// prefix: each registration that changed in a way that matters, each
// deletion.
func (w *NodeWatcher) record(ctx context.Context, ns, prefix string, recorded map[string]string, evs []*clientv3.Event) error {
	now := w.s.Now()
	for _, ev := range evs {
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
	return nil
}

// decodeNode reads one registration; the key names the node. A value not
// bound to a lease is not a registration (a node's registrar always binds
// it, so that it disappears with the node), nor one that
// api.DecodeRegistration refuses (oversized, labels or addresses a node
// cannot have): ok is false, and the node is not listed.
func decodeNode(prefix string, kv *mvccpb.KeyValue) (api.NodeStatus, bool) {
	if kv.Lease == 0 {
		return api.NodeStatus{}, false
	}
	s, err := api.DecodeRegistration(strings.TrimPrefix(string(kv.Key), prefix), kv.Value)
	return s, err == nil
}

// superviseNamespaces starts follow(ctx, ns) once for every namespace that
// names lists (counted in wg), listing again every rescan, until ctx ends:
// the supervisor of the node and report watchers, which follow each
// namespace's etcd prefix.
func superviseNamespaces(ctx context.Context, wg *sync.WaitGroup, logger *slog.Logger, what string,
	names func(context.Context) ([]string, error), rescan time.Duration, follow func(context.Context, string)) {
	following := map[string]bool{}
	for {
		list, err := names(ctx)
		if err != nil && ctx.Err() == nil {
			logger.Warn(what+": listing namespaces", "err", err)
		}
		for _, ns := range list {
			if !following[ns] {
				following[ns] = true
				wg.Add(1)
				go follow(ctx, ns)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(rescan):
		}
	}
}
