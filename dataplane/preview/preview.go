// Package preview runs a proposed change's limits in shadow beside a node's
// live rules (DESIGN.md "Impact preview and replay"): for each request the
// node has decided, Observe decides it again under the preview's rule set,
// with the preview's own limiter state, and counts what the preview's limits
// would have done.
//
// A Preview never answers a request and never changes forwarding: what its
// limits write (a 429, RateLimit headers) goes to a discarding writer, and
// Observe runs after the live decision has been taken. Its limits are
// compiled by the gateway's own limit.Compile, with these differences, which
// a report marks (api.PreviewReport.Approximate for the first):
//
//   - Cluster-scope limits are evaluated locally, never against Redis: each
//     gets an in-memory limiter whose rate and burst are the limit's
//     divided by the live nodes (Settings.Nodes, rounded up, at least 1).
//   - A leaky bucket's delay is not waited out, and a concurrency (or
//     adaptive) limit's slot is given back at once: the preview does not
//     hold the live request.
//   - Degrade plans run in shadow too, before the preview's limits as on a
//     gateway (a request the preview's plan sheds takes no preview token):
//     their own controllers (levels, windows; no operator override), fed
//     with every request Observe sees (arrivals) and with the live upstream
//     outcomes of the route's forwarded requests (Record), except while the
//     preview's plan is at level 2, where it would forward nothing. Their
//     level now and the requests they would have shed are in the report.
//     Breakers are not previewed.
//
// The preview matches routes with its own router (its rule set's routes
// may differ from the live ones) and reads the request through a fresh
// reqview.View built from the live one (method, host, target, header,
// client address, trusted peer and verified claims).
package preview

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/degrade"
	"github.com/sluicegw/sluice/dataplane/limit"
	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/dataplane/proxy"
	"github.com/sluicegw/sluice/dataplane/reqview"
	"github.com/sluicegw/sluice/dataplane/reqview/classify"
)

// TopKeys is the number of keys a report carries per limit.
const TopKeys = 5

// trackedKeys bounds the distinct keys counted per limit; rejections of
// keys beyond it are counted in the limit's totals only.
const trackedKeys = 1024

// Settings are a node's settings for previews. The zero value works: one
// node, the limit package's clock and key bound.
type Settings struct {
	// Nodes returns the live nodes of the namespace (cluster limits are
	// divided by it); nil means 1.
	Nodes func() int
	// MaxKeysPerLimit caps each limit's keys (0: the limit package's
	// default).
	MaxKeysPerLimit int
	// Now is the request-path clock in nanoseconds; nil means limit.Now.
	Now func() int64
	// EncodedSlashes is the gateway's --encoded-slashes.
	EncodedSlashes proxy.SlashPolicy
}

// Preview is one running preview. Safe for concurrent use; Close releases
// it. A nil *Preview observes nothing.
type Preview struct {
	change, checksum string
	until            time.Time
	since            time.Time
	approximate      bool
	rules            *api.RuleSet

	router   *proxy.Router
	routes   []route // by the router's route index
	classes  *classify.Classes
	limits   *limit.Set
	degrades *degrade.Set // nil: the change has no degrade plan
	metrics  *metrics.Metrics
	now      func() int64

	mu  sync.Mutex
	top map[string]map[string]int64 // rule → key text → sampled rejections

	clients map[string]*keySet // rule → distinct rejected keys (built in New, read-only after)
}

// keySet counts distinct key hashes up to api.MaxPreviewClients; once full
// it takes no lock.
type keySet struct {
	full atomic.Bool
	mu   sync.Mutex
	seen map[uint64]struct{}
}

func (k *keySet) add(h uint64) {
	if k.full.Load() {
		return
	}
	k.mu.Lock()
	if len(k.seen) < api.MaxPreviewClients {
		k.seen[h] = struct{}{}
		if len(k.seen) == api.MaxPreviewClients {
			k.full.Store(true)
		}
	}
	k.mu.Unlock()
}

func (k *keySet) count() (int64, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return int64(len(k.seen)), len(k.seen) >= api.MaxPreviewClients
}

type route struct {
	id      string
	keys    *classify.KeyCheck
	chain   *limit.Chain
	degrade *degrade.Controller
}

// New compiles the preview p of rules v (api.DecodePreview's results).
func New(p *api.Preview, v *api.Valid, s Settings) (_ *Preview, err error) {
	norm := v.Rules()
	pv := &Preview{change: p.Change, checksum: p.Checksum, until: p.Until, since: time.Now(), rules: norm,
		metrics: metrics.New(), top: map[string]map[string]int64{}, clients: map[string]*keySet{}, now: s.Now}
	if pv.now == nil {
		pv.now = limit.Now
	}
	defer func() {
		if err != nil {
			pv.Close()
		}
	}()
	// Only route matching counts here: a matcher, with no upstream, pool,
	// TLS file or health check (proxy.NewMatcher, as the SDK matches).
	if pv.router, err = proxy.NewMatcher(norm.Routes, proxy.RouterSettings{EncodedSlashes: s.EncodedSlashes}); err != nil {
		return nil, fmt.Errorf("preview routes: %w", err)
	}
	pv.classes = classify.NewClasses(norm.Classes)
	nodes := func() int64 {
		if s.Nodes == nil {
			return 1
		}
		return int64(max(s.Nodes(), 1))
	}
	for _, l := range norm.Limits {
		if l.Scope == api.ScopeCluster {
			pv.approximate = true
		}
		pv.clients[l.ID] = &keySet{seen: map[uint64]struct{}{}}
	}
	if pv.limits, err = limit.Compile(norm.Limits, nil, limit.Options{
		Metrics: pv.metrics,
		Logger:  slog.New(&rejections{p: pv}),
		MaxKeys: s.MaxKeysPerLimit,
		Cluster: func(l api.Limit) (limit.Limiter, error) {
			return limit.NewLocal(perNode(l, nodes()), s.MaxKeysPerLimit)
		},
		Now:     s.Now,
		Wait:    func(ctx context.Context, _ time.Duration) error { return nil }, // never hold the live request
		Classes: pv.classes,
		Rejected: func(rule string, key uint64) {
			if k := pv.clients[rule]; k != nil {
				k.add(key)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("preview limits: %w", err)
	}
	if len(norm.Degrades) > 0 {
		routeIDs := make([]string, len(norm.Routes))
		for i, r := range norm.Routes {
			routeIDs[i] = r.ID
		}
		if pv.degrades, err = degrade.Compile(norm.Degrades, routeIDs, nil, degrade.Options{Metrics: pv.metrics,
			Logger: slog.New(slog.DiscardHandler), Now: pv.now, Classes: pv.classes.IDs()}); err != nil {
			return nil, fmt.Errorf("preview degrades: %w", err)
		}
	}
	for _, r := range norm.Routes {
		pv.routes = append(pv.routes, route{id: r.ID, keys: keyCheck(norm, r.ID), chain: pv.limits.Chain(r.ID),
			degrade: pv.degrades.ForRoute(r.ID)})
	}
	return pv, nil
}

// perNode is l's share on one of n nodes: rate and burst divided by n,
// rounded up, at least 1.
func perNode(l api.Limit, n int64) api.Limit {
	div := func(x int64) int64 { return max(1, int64(math.Ceil(float64(x)/float64(n)))) }
	l.Rate = div(l.Rate)
	if l.Burst > 0 {
		l.Burst = div(l.Burst)
	}
	l.Scope = api.ScopeNode
	return l
}

// keyCheck is the check of every key that applies to the route, as the
// gateway's snapshot builds it.
func keyCheck(rs *api.RuleSet, routeID string) *classify.KeyCheck {
	var keys []classify.RuleKey
	for _, l := range rs.Limits {
		if api.Applies(l.Routes, routeID) {
			keys = append(keys, classify.RuleKey{Parts: l.Key, RawCookies: l.CookieDecoding == api.CookieRaw})
		}
	}
	for _, d := range rs.Degrades {
		if api.Applies(d.Routes, routeID) {
			keys = append(keys, classify.RuleKey{Parts: d.Key})
		}
	}
	return classify.NewKeyCheckOf(keys...)
}

// Change is the previewed change's id.
func (p *Preview) Change() string { return p.change }

// Checksum is the previewed rule set's checksum.
func (p *Preview) Checksum() string { return p.checksum }

// Active reports whether the preview still runs at wall (Unix nanoseconds).
func (p *Preview) Active(wall int64) bool { return p != nil && wall < p.until.UnixNano() }

// Close releases the preview's limiters.
func (p *Preview) Close() {
	if p == nil {
		return
	}
	if p.limits != nil {
		p.limits.Close()
	}
	if p.router != nil {
		p.router.CloseIdle()
	}
}

var discards = sync.Pool{New: func() any { return &discard{h: http.Header{}} }}

// Observe decides the request v, which the live rules have decided, under
// the preview's limits, and counts the outcome. It never writes to the
// client and never waits.
func (p *Preview) Observe(v *reqview.View) {
	pv := reqview.View{Method: v.Method, Host: v.Host, RawPath: v.RawPath, RawQuery: v.RawQuery,
		ContentLength: v.ContentLength, ClientIP: v.ClientIP, TrustedPeer: v.TrustedPeer, Claims: v.Claims,
		RequestID: v.RequestID, Trace: v.Trace, Ctx: context.Background()}
	pv.SetHeader(v.Header())
	m := p.router.MatchView(&pv)
	if m.Invalid != "" || m.Route == nil {
		return
	}
	pv.Path = m.Path
	rt := &p.routes[m.Route.Index]
	if rt.chain == nil && rt.degrade == nil {
		return
	}
	pv.RouteID = rt.id
	if rt.keys.ReadView(&pv) != nil {
		return
	}
	pv.Class = p.classes.Classify(&pv, rt.id)
	if rt.degrade != nil {
		if shed, _ := rt.degrade.AdmitView(&pv, p.now()); shed {
			return // as on a gateway: a shed request takes no limit token
		}
	}
	if rt.chain == nil {
		return
	}
	w := discards.Get().(*discard)
	if done, ok := rt.chain.AdmitView(w, &pv); ok {
		done()
	}
	clear(w.h)
	discards.Put(w)
}

// Record feeds the live upstream outcome of a request the node forwarded on
// route routeID (success: not a 5xx or transport error, as a gateway's
// degrade judges it) to the preview's degrade plan of that route, if any,
// at now (the request path's clock): its success-rate triggers read the
// live upstream's health. A plan at level 2 would have forwarded nothing
// and records nothing. It allocates nothing.
func (p *Preview) Record(routeID string, now int64, success bool) {
	if p == nil || p.degrades == nil {
		return
	}
	if d := p.degrades.ForRoute(routeID); d != nil && d.Level(now) < 2 {
		d.Record(now, success)
	}
}

// discard is the preview's response writer: what a limit writes is dropped.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

// TakeRateLimit takes an admitted request's RateLimit fields without
// formatting them.
func (d *discard) TakeRateLimit(limit.Fields) {}

// Report is what the preview counted since it started: per limit that
// decided a request its decisions and top keys (a limit that decided
// nothing is left out: the control plane reads it as zero), per degrade
// plan its level now and its sheds.
func (p *Preview) Report() api.PreviewReport {
	rep := api.PreviewReport{Change: p.change, Checksum: p.checksum, Since: p.since, Approximate: p.approximate,
		Limits: []api.PreviewCounts{}}
	decisions := map[string]float64{}
	collect(p.metrics.LimitDecisions, func(labels []*dto.LabelPair, v float64) {
		var rule, decision string
		for _, l := range labels {
			switch l.GetName() {
			case "rule":
				rule = l.GetValue()
			case "decision":
				decision = l.GetValue()
			}
		}
		decisions[rule+"/"+decision] += v
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.rules.Limits {
		c := api.PreviewCounts{Rule: l.ID,
			Allowed:        int64(decisions[l.ID+"/"+metrics.DecisionAllow]),
			Rejected:       int64(decisions[l.ID+"/"+metrics.DecisionReject]),
			ShadowRejected: int64(decisions[l.ID+"/"+metrics.DecisionShadowDeny])}
		if k := p.clients[l.ID]; k != nil {
			c.Clients, c.Saturated = k.count()
			// The decision counters and the key set are read apart: a
			// rejection between the two reads is in the set, not yet in
			// the counts.
			c.Clients = min(c.Clients, c.Rejected+c.ShadowRejected)
			c.Saturated = c.Saturated && c.Clients == api.MaxPreviewClients
		}
		for k, n := range p.top[l.ID] {
			c.TopKeys = append(c.TopKeys, api.PreviewKey{Key: k, Rejected: n})
		}
		slices.SortFunc(c.TopKeys, func(a, b api.PreviewKey) int {
			return cmp.Or(cmp.Compare(b.Rejected, a.Rejected), cmp.Compare(a.Key, b.Key))
		})
		if len(c.TopKeys) > TopKeys {
			c.TopKeys = c.TopKeys[:TopKeys]
		}
		if c.Allowed == 0 && c.Rejected == 0 && c.ShadowRejected == 0 && len(c.TopKeys) == 0 {
			continue // decided nothing yet: the control plane reads an absent limit as zero
		}
		rep.Limits = append(rep.Limits, c)
	}
	trimKeys(rep.Limits, api.MaxPreviewReportKeys)
	if len(p.rules.Degrades) > 0 {
		shed := map[string]float64{}
		collect(p.metrics.DegradeShed, func(labels []*dto.LabelPair, v float64) {
			for _, l := range labels {
				if l.GetName() == "rule" {
					shed[l.GetValue()] += v
				}
			}
		})
		now := p.now()
		for _, d := range p.rules.Degrades {
			rep.Degrades = append(rep.Degrades, api.PreviewDegrade{Rule: d.ID, Level: p.degrades.ForRule(d.ID).Level(now), Shed: int64(shed[d.ID])})
		}
	}
	return rep
}

// trimKeys keeps the max keys rejected most across limits.
func trimKeys(ls []api.PreviewCounts, max int) {
	var counts []int64
	for _, l := range ls {
		for _, k := range l.TopKeys {
			counts = append(counts, k.Rejected)
		}
	}
	if len(counts) <= max {
		return
	}
	slices.Sort(counts)
	floor := counts[len(counts)-max] // keep keys above it, and at it while room is left
	room := max
	for i := range ls {
		for _, k := range ls[i].TopKeys {
			if k.Rejected > floor {
				room--
			}
		}
	}
	for i := range ls {
		kept := ls[i].TopKeys[:0]
		for _, k := range ls[i].TopKeys {
			switch {
			case k.Rejected > floor:
				kept = append(kept, k)
			case k.Rejected == floor && room > 0:
				kept = append(kept, k)
				room--
			}
		}
		ls[i].TopKeys = kept
	}
}

func collect(c prometheus.Collector, f func([]*dto.LabelPair, float64)) {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	var pb dto.Metric
	for mt := range ch {
		pb.Reset()
		if mt.Write(&pb) == nil && pb.Counter != nil {
			f(pb.GetLabel(), pb.GetCounter().GetValue())
		}
	}
}

// rejections is the preview limits' decision log: it counts each rejected
// (and shadow-rejected) key by rule. The limit set bounds its rate, so the
// counts are a sample.
type rejections struct{ p *Preview }

func (h *rejections) Enabled(context.Context, slog.Level) bool { return true }
func (h *rejections) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *rejections) WithGroup(string) slog.Handler            { return h }

func (h *rejections) Handle(_ context.Context, r slog.Record) error {
	rule, key, ok := reqview.RateLimitKey(r)
	if !ok {
		return nil
	}
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	t := h.p.top[rule]
	if t == nil {
		t = map[string]int64{}
		h.p.top[rule] = t
	}
	k := keyText(key)
	if _, ok := t[k]; ok || len(t) < trackedKeys {
		t[k]++
	}
	return nil
}

// keyText is a key's text as reports show it: at most
// api.MaxPreviewKeyText bytes; a longer key keeps its first bytes and a
// hash of the whole.
func keyText(k string) string { return reqview.KeyText(k, api.MaxPreviewKeyText) }
