package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/etcdwatch"
)

// ReportSettings configures a ReportWatcher. Client, Fleet and Namespaces
// are required; every other zero value has the meaning on its field.
type ReportSettings struct {
	Client *clientv3.Client
	// Fleet stores the reports' deltas (it answers /stats).
	Fleet *sluice.Fleet
	// Events, when set, stores the events the reports make (idempotent
	// across replicas).
	Events sluice.EventService
	// Hub, when set, receives node and stats messages for the stream.
	Hub *sluice.Hub
	// Namespaces lists the namespaces whose reports to follow.
	Namespaces func(ctx context.Context) ([]string, error)
	Keys       api.Keys
	// Skew is how far in the future a report's time may be; zero means
	// api.DefaultReportSkew.
	Skew time.Duration
	// Rescan is how often Namespaces is called; zero means 10s.
	Rescan time.Duration
	// TickDelay is how long after a stats step ends its tick is pushed (so
	// that the reports of the step are in); zero means one resolution.
	TickDelay time.Duration
	// EventsPerMinute is how many events the reports of one node may make
	// per rule (per kind for node_joined/node_left and apply errors) per
	// minute; the excess is dropped, counted in
	// sluice_admin_report_events_suppressed_total, and summed in the next
	// stored event's detail ("suppressed"). Zero means 10.
	EventsPerMinute int
	Now             func() time.Time
	Logger          *slog.Logger
}

// ReportWatcher follows every namespace's registrations and report keys
// (/sluice/v1/ns/<ns>/nodes/<nodeID> and reports/<nodeID>) with the shared
// list/watch loop (etcdwatch), in ONE watch of the namespace's prefix, so
// that it sees a registration and the reports after it in etcd's order
// (a report is never judged against a registration older than itself).
// It hands each valid, lease-bound registration to the Fleet
// (Fleet.Register; api.DecodeRegistration), checks each report
// (api.DecodeReport, then Fleet.Ingest: a live registration under the same
// lease, rules of its version, counters never backwards, plausible rates),
// stores it in the Fleet and the events it makes in Postgres (at most
// EventsPerMinute per node and rule), and pushes node and stats messages
// to the Hub. Every control-plane replica runs one. Start it once; Close
// stops it and waits.
type ReportWatcher struct {
	s          ReportSettings
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	once       sync.Once
	refused    *prometheus.CounterVec
	stored     prometheus.Counter
	suppressed *prometheus.CounterVec

	mu      sync.Mutex
	pending []*sluice.Event // events not yet stored (Postgres unreachable)

	lmu     sync.Mutex
	windows map[string]*eventWindow // ns/node/kind/rule → this minute's events
	badRegs map[string]bool         // ns/node → its invalid registration was logged
}

// eventWindow counts one node's events of one rule in the minute from start.
type eventWindow struct {
	start      time.Time
	n          int
	suppressed int64 // dropped since the last one stored
}

// NewReportWatcher returns a ReportWatcher over s, not yet started.
func NewReportWatcher(s ReportSettings) *ReportWatcher {
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	if s.Rescan == 0 {
		s.Rescan = 10 * time.Second
	}
	if s.TickDelay == 0 {
		s.TickDelay = s.Fleet.Resolution()
	}
	if s.EventsPerMinute <= 0 {
		s.EventsPerMinute = 10
	}
	return &ReportWatcher{s: s, windows: map[string]*eventWindow{}, badRegs: map[string]bool{},
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_admin_reports_refused_total",
			Help: "Node reports refused (never stored), by reason: invalid, unknown_rules, backwards, no_version, unregistered, lease_mismatch, implausible."}, []string{"reason"}),
		stored: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_admin_reports_total", Help: "Node reports stored."}),
		suppressed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_admin_report_events_suppressed_total",
			Help: "Events from node reports dropped over the per node and rule rate, by kind."}, []string{"kind"}),
	}
}

// Collectors are the watcher's metrics, for the admin's registry.
func (w *ReportWatcher) Collectors() []prometheus.Collector {
	return []prometheus.Collector{w.refused, w.stored, w.suppressed}
}

// Start follows the namespaces until ctx ends or Close is called.
func (w *ReportWatcher) Start(ctx context.Context) {
	w.once.Do(func() {
		ctx, w.cancel = context.WithCancel(ctx)
		w.wg.Add(2)
		go w.supervise(ctx)
		go w.tick(ctx)
	})
}

// Close stops every watch and waits for the goroutines.
func (w *ReportWatcher) Close() {
	w.once.Do(func() {})
	if w.cancel != nil {
		w.cancel()
	}
	w.wg.Wait()
}

func (w *ReportWatcher) recovered(what string) {
	if r := recover(); r != nil {
		w.s.Logger.Error("report watcher panicked", "in", what, "panic", r)
	}
}

func (w *ReportWatcher) supervise(ctx context.Context) {
	defer w.wg.Done()
	defer w.recovered("supervisor")
	superviseNamespaces(ctx, &w.wg, w.s.Logger, "report watcher", w.s.Namespaces, w.s.Rescan, w.follow)
}

// tick pushes each closed stats step of every namespace to the Hub.
func (w *ReportWatcher) tick(ctx context.Context) {
	defer w.wg.Done()
	defer w.recovered("ticker")
	res := w.s.Fleet.Resolution()
	resSec := int64(res / time.Second)
	last := int64(0)
	forgot := time.Now()
	t := time.NewTicker(res / 5)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.flush(ctx)
		if time.Since(forgot) > time.Minute {
			w.s.Fleet.Forget()
			w.forgetWindows()
			forgot = time.Now()
		}
		if w.s.Hub == nil {
			continue
		}
		// The step that ended TickDelay ago.
		b := w.s.Now().Add(-w.s.TickDelay).Unix()/resSec - 1
		if b <= last {
			continue
		}
		last = b
		for _, ns := range w.s.Fleet.Namespaces() {
			if w.s.Hub.Subscribers(ns) > 0 {
				w.s.Hub.Publish(ns, sluice.StreamStats, 0, w.s.Fleet.Tick(ns, b))
			}
		}
	}
}

func (w *ReportWatcher) follow(ctx context.Context, ns string) {
	defer w.wg.Done()
	defer w.recovered("namespace " + ns)
	prefix, nodes := w.s.Keys.Reports(ns), w.s.Keys.Nodes(ns)
	f, err := etcdwatch.New(etcdwatch.Settings{
		Client: w.s.Client,
		// One watch of the namespace, not one per prefix: a registration
		// and the reports written after it arrive in revision order.
		Specs: []etcdwatch.Spec{{Key: w.s.Keys.Namespace(ns), Prefix: true}},
		Now:   w.s.Now,
		Listed: func(ctx context.Context, _ int64, kvs [][]*mvccpb.KeyValue) error {
			regs := map[string]sluice.Registration{}
			for _, kv := range kvs[0] {
				if strings.HasPrefix(string(kv.Key), nodes) {
					if s, ok := decodeNode(nodes, kv); ok {
						regs[s.NodeID] = registration(s, kv)
					}
				}
			}
			w.s.Fleet.SyncRegistrations(ns, regs)
			seen := map[string]bool{}
			for _, kv := range kvs[0] {
				if !strings.HasPrefix(string(kv.Key), prefix) {
					continue
				}
				if id, ok := w.ingest(ctx, ns, prefix, kv); ok {
					seen[id] = true
				}
			}
			// Nodes whose report key vanished while the watch was down.
			for _, id := range w.known(ns) {
				if !seen[id] {
					w.gone(ctx, ns, id, 0)
				}
			}
			return nil
		},
		Changed: func(ctx context.Context, _ int64, evs []*clientv3.Event) error {
			for _, ev := range evs {
				key := string(ev.Kv.Key)
				if strings.HasPrefix(key, nodes) {
					w.register(ns, nodes, ev)
					continue
				}
				if !strings.HasPrefix(key, prefix) {
					continue // the rule set, the canary, overrides
				}
				switch ev.Type {
				case clientv3.EventTypePut:
					w.ingest(ctx, ns, prefix, ev.Kv)
				case clientv3.EventTypeDelete:
					w.gone(ctx, ns, strings.TrimPrefix(string(ev.Kv.Key), prefix), 0)
				}
			}
			return nil
		},
		Broken: func(err error) {
			w.s.Logger.Warn("report watcher: listing again", "namespace", ns, "err", err)
		},
	})
	if err != nil {
		w.s.Logger.Error("report watcher", "namespace", ns, "err", err)
		return
	}
	_ = f.Run(ctx, 0)
}

// register hands a registration's change to the Fleet: a valid, lease-bound
// registration is recorded, anything else (a deletion, a value that does
// not decode or check, no lease) ends it.
func (w *ReportWatcher) register(ns, prefix string, ev *clientv3.Event) {
	id := strings.TrimPrefix(string(ev.Kv.Key), prefix)
	if ev.Type == clientv3.EventTypePut {
		if s, ok := decodeNode(prefix, ev.Kv); ok {
			w.s.Fleet.Register(ns, s.NodeID, registration(s, ev.Kv))
			w.invalid(ns, id, nil)
			return
		}
		if ev.Kv.Lease != 0 {
			_, err := api.DecodeRegistration(id, ev.Kv.Value)
			w.invalid(ns, id, err)
		}
	} else {
		w.invalid(ns, id, nil)
	}
	w.s.Fleet.Unregister(ns, id)
}

// invalid logs a registration refused (err), once until the node's
// registration is valid or gone (err nil).
func (w *ReportWatcher) invalid(ns, id string, err error) {
	w.lmu.Lock()
	defer w.lmu.Unlock()
	k := ns + "/" + id
	switch {
	case err == nil:
		delete(w.badRegs, k)
	case !w.badRegs[k] && len(w.badRegs) < 10000:
		w.badRegs[k] = true
		w.s.Logger.Warn("node registration refused: not listed, its reports do not count", "namespace", ns, "node", id, "err", err)
	}
}

func registration(s api.NodeStatus, kv *mvccpb.KeyValue) sluice.Registration {
	return sluice.Registration{Lease: kv.Lease, Labels: s.Labels, Version: s.Version}
}

// known lists the nodes of ns the Fleet holds a live report key for.
func (w *ReportWatcher) known(ns string) []string { return w.s.Fleet.LiveNodes(ns) }

// ingest checks and stores one report value; it returns the node id and
// whether the key names a node.
func (w *ReportWatcher) ingest(ctx context.Context, ns, prefix string, kv *mvccpb.KeyValue) (string, bool) {
	id := strings.TrimPrefix(string(kv.Key), prefix)
	if kv.Lease == 0 {
		// A report that outlives its node is not one: refuse it.
		w.refuse(sluice.RefusedInvalid, ns, id, "written without a lease")
		return id, false
	}
	r, err := api.DecodeReport(id, kv.Value, w.s.Now(), w.s.Skew)
	if err != nil {
		w.refuse(sluice.RefusedInvalid, ns, id, err.Error())
		return id, false
	}
	prev, _ := w.s.Fleet.NodeSummary(ns, id)
	evs, err := w.s.Fleet.Ingest(ctx, ns, r, sluice.ReportKey{CreateRevision: kv.CreateRevision, Lease: kv.Lease})
	if err != nil {
		reason := sluice.RefusedNoVersion
		var re *sluice.RefusedError
		if errors.As(err, &re) {
			reason = re.Reason
		}
		w.refused.WithLabelValues(reason).Inc()
		w.s.Logger.Warn("node report refused", "namespace", ns, "node", id, "err", err)
		return id, true
	}
	w.stored.Inc()
	w.record(ctx, w.limit(evs))
	if w.s.Hub != nil {
		sum, live := w.s.Fleet.NodeSummary(ns, id)
		if len(evs) > 0 || prev == nil || sum != nil && (prev.Version != sum.Version || !sameStates(prev, sum)) {
			w.s.Hub.Publish(ns, sluice.StreamNode, 0, nodeMessage{NodeID: id, Namespace: ns, Live: live, Report: sum})
		}
	}
	return id, true
}

func (w *ReportWatcher) refuse(reason, ns, id, why string) {
	w.s.Fleet.Refuse(reason)
	w.refused.WithLabelValues(reason).Inc()
	w.s.Logger.Warn("node report refused", "namespace", ns, "node", id, "reason", reason, "err", why)
}

func (w *ReportWatcher) gone(ctx context.Context, ns, id string, createRev int64) {
	ev := w.s.Fleet.Gone(ns, id, createRev, w.s.Now().UTC())
	if ev == nil {
		return
	}
	w.record(ctx, w.limit([]*sluice.Event{ev}))
	if w.s.Hub != nil {
		sum, _ := w.s.Fleet.NodeSummary(ns, id)
		w.s.Hub.Publish(ns, sluice.StreamNode, 0, nodeMessage{NodeID: id, Namespace: ns, Live: false, Report: sum})
	}
}

// record stores events (with any still pending); on failure they stay
// pending for the next call (another replica may store them first: the
// keys make that harmless).
func (w *ReportWatcher) record(ctx context.Context, evs []*sluice.Event) {
	if w.s.Events == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	all := append(w.pending, evs...)
	if len(all) == 0 {
		return
	}
	if _, err := w.s.Events.RecordEvents(ctx, all); err != nil {
		if len(all) > 10000 {
			all = all[len(all)-10000:]
		}
		w.pending = all
		w.s.Logger.Warn("storing node events; retrying", "events", len(all), "err", err)
		return
	}
	w.pending = nil
}

// limit keeps, of evs, the events within EventsPerMinute per node and rule
// (node_joined and node_left share one allowance, apply errors another),
// adding to each kept one the number dropped before it ("suppressed").
func (w *ReportWatcher) limit(evs []*sluice.Event) []*sluice.Event {
	if len(evs) == 0 {
		return evs
	}
	now := w.s.Now()
	w.lmu.Lock()
	defer w.lmu.Unlock()
	kept := evs[:0]
	for _, ev := range evs {
		kind := string(ev.Kind)
		if ev.Kind == sluice.EventNodeJoined || ev.Kind == sluice.EventNodeLeft {
			kind = "node"
		}
		k := ev.Namespace + "/" + ev.Node + "/" + kind + "/" + ev.Rule
		win := w.windows[k]
		if win == nil {
			win = &eventWindow{start: now}
			w.windows[k] = win
		}
		if now.Sub(win.start) >= time.Minute {
			win.start, win.n = now, 0
		}
		if win.n >= w.s.EventsPerMinute {
			win.suppressed++
			w.suppressed.WithLabelValues(string(ev.Kind)).Inc()
			continue
		}
		win.n++
		if win.suppressed > 0 {
			detail := map[string]any{}
			_ = json.Unmarshal(ev.Detail, &detail)
			detail["suppressed"] = win.suppressed
			ev.Detail, _ = json.Marshal(detail)
			win.suppressed = 0
		}
		kept = append(kept, ev)
	}
	return kept
}

// forgetWindows drops the event windows idle for a minute.
func (w *ReportWatcher) forgetWindows() {
	now := w.s.Now()
	w.lmu.Lock()
	defer w.lmu.Unlock()
	for k, win := range w.windows {
		if now.Sub(win.start) >= time.Minute && win.suppressed == 0 {
			delete(w.windows, k)
		}
	}
}

// flush retries the pending events.
func (w *ReportWatcher) flush(ctx context.Context) { w.record(ctx, nil) }

// nodeMessage is the data of a `node` stream message: the Node fields the
// report watcher knows.
type nodeMessage struct {
	NodeID    string             `json:"nodeId"`
	Namespace string             `json:"namespace"`
	Live      bool               `json:"live"`
	Report    *sluice.NodeReport `json:"report,omitempty"`
}

func sameStates(a, b *sluice.NodeReport) bool {
	if len(a.Breakers) != len(b.Breakers) || len(a.Degrades) != len(b.Degrades) {
		return false
	}
	for k, v := range a.Breakers {
		if b.Breakers[k] != v {
			return false
		}
	}
	for k, v := range a.Degrades {
		if b.Degrades[k] != v {
			return false
		}
	}
	return true
}
