// Package replay replays a recorded access log through a rule set's limits,
// offline, with the clock taken from the log: what `sluicectl simulate`
// prints.
//
// A Sim is one rule set compiled the way a gateway compiles it: the rules
// are api.Validated (validated and normalized), the routes go into the
// gateway's router (package proxy), each route gets the key check of its
// limits and degrade plans, requests get their priority class, and the
// limits are one limit.Set made by limit.Compile and decided by
// limit.Chain.AdmitView: the gateway's own code, with no second limiter.
// Only the clock differs: it is a parameter (limit.Options.Now), set to each
// line's timestamp before its request is decided, so nothing sleeps.
//
// What a log cannot say is settled as follows, and Result says so:
//
//   - Time: lines are replayed in file order and the clock never goes
//     backwards: a line older than the one before it is decided at the
//     newer time (and counted in Stats.OutOfOrder).
//   - Cluster-scope limits are simulated as one node: each gets an
//     in-memory limiter of its own (limit.NewLocal) instead of Redis, as if
//     this one node served the whole log.
//   - Logs carry no request durations: a concurrency (or adaptive) limit's
//     slot is given back as soon as its request is admitted, so such limits
//     reject only requests costing more than they hold.
//   - A leaky bucket's delay (maxDelay) is not waited out: the request
//     counts as admitted at its line's time, as the bucket's state already
//     accounts for the delay.
//   - Degrade plans and breakers react to upstream outcomes a log does not
//     carry; they are not replayed (degrade keys still take part in the
//     routes' key checks, as on a gateway).
//   - Idle keys are forgotten every limit.DefaultSweepInterval of log time,
//     as a gateway's sweeper does in real time.
//   - The logged address is the client's (ClientIP; X-Forwarded-For is not
//     read) and the peer is untrusted (reqview.View.TrustedPeer false), so
//     priority classes that match headers do not apply.
//
// A Sim is not safe for concurrent use: Run feeds it one line at a time.
package replay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/limit"
	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/dataplane/proxy"
	"github.com/sluicegw/sluice/dataplane/reqview"
	"github.com/sluicegw/sluice/dataplane/reqview/classify"
)

// Defaults of Options.
const (
	DefaultTopKeys = 5
	// MaxKeyText is the most bytes of a key's text a result shows.
	MaxKeyText = 64
	// trackedKeys is how many distinct rejected keys each rule counts
	// exactly before counting approximately (space saving).
	trackedKeys = 4096
)

// Options configures New. The zero value works.
type Options struct {
	// TopKeys is how many of the most rejected keys each rule reports; 0
	// means DefaultTopKeys.
	TopKeys int
	// MaxKeysPerLimit caps the keys each limit keeps, as the gateway's
	// --max-keys does; 0 means limit.DefaultMaxKeys.
	MaxKeysPerLimit int
	// EncodedSlashes is the gateway's --encoded-slashes; the zero value
	// refuses paths with %2F, as a gateway does by default.
	EncodedSlashes proxy.SlashPolicy
}

// Sim is one compiled rule set that replays requests. Build it with New,
// feed it with Run (or Replay), read Result, then Close it.
type Sim struct {
	rules    *api.RuleSet
	checksum string
	router   *proxy.Router
	routes   []route // by proxy.Route.Index: the rule set's order
	limits   *limit.Set
	classes  *classify.Classes
	metrics  *metrics.Metrics
	now      int64 // the simulated clock, read by the limits
	swept    int64 // when idle keys were last forgotten
	w        discard
	top      map[string]*topKeys
	topN     int

	requests, noRoute, invalid, ambiguous int64
}

type route struct {
	id    string
	keys  *classify.KeyCheck
	chain *limit.Chain
}

// New compiles v for replay. It fails as a gateway's compile would (a route
// the router refuses, say).
func New(v *api.Valid, opts Options) (_ *Sim, err error) {
	norm := v.Rules()
	s := &Sim{rules: norm, checksum: v.Checksum(), metrics: metrics.New(),
		top: map[string]*topKeys{}, topN: opts.TopKeys, w: discard{h: http.Header{}}}
	if s.topN <= 0 {
		s.topN = DefaultTopKeys
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	// Only route matching counts here: a matcher, with no upstream, pool,
	// TLS file or health check (proxy.NewMatcher, as the SDK matches).
	if s.router, err = proxy.NewMatcher(norm.Routes, proxy.RouterSettings{EncodedSlashes: opts.EncodedSlashes}); err != nil {
		return nil, fmt.Errorf("routes: %w", err)
	}
	s.classes = classify.NewClasses(norm.Classes)
	maxKeys := opts.MaxKeysPerLimit
	if s.limits, err = limit.Compile(norm.Limits, nil, limit.Options{
		Metrics: s.metrics,
		Logger:  slog.New(&rejections{s: s}),
		MaxKeys: maxKeys,
		Cluster: func(l api.Limit) (limit.Limiter, error) {
			return limit.NewLocal(l, maxKeys) // one node: the log is all the traffic
		},
		Now:           func() int64 { return s.now },
		Wait:          func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
		SweepInterval: -1, // swept on the log's clock (Replay)
		// Every rejection reaches the top keys: the log bucket never runs dry.
		LogsPerSecond: 1 << 40, LogBurst: 1 << 40,
		Classes: s.classes,
	}); err != nil {
		return nil, fmt.Errorf("limits: %w", err)
	}
	for _, r := range norm.Routes {
		s.routes = append(s.routes, route{id: r.ID, keys: keyCheck(norm, r.ID), chain: s.limits.Chain(r.ID)})
	}
	return s, nil
}

// keyCheck is the check of every key that applies to the route, as the
// gateway's snapshot builds it: its limits' (with their cookieDecoding) and
// its degrade plans'.
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

// Close releases what the Sim holds.
func (s *Sim) Close() {
	if s.limits != nil {
		s.limits.Close()
	}
	if s.router != nil {
		s.router.CloseIdle()
	}
}

// Replay decides one request at time now (Unix nanoseconds; it must not be
// before the last call's): route match, key check, priority class, limits.
func (s *Sim) Replay(rec *Record, now int64) {
	s.now = now
	if s.swept == 0 {
		s.swept = now
	} else if now-s.swept >= int64(limit.DefaultSweepInterval) {
		s.limits.Sweep(now)
		s.swept = now
	}
	s.requests++
	v := reqview.View{Method: rec.Method, Host: rec.Host, RawPath: rec.RawPath, RawQuery: rec.RawQuery,
		ContentLength: -1, ClientIP: rec.IP}
	v.SetHeader(rec.Header)
	m := s.router.MatchView(&v)
	v.Path = m.Path
	if m.Invalid != "" {
		s.invalid++
		return
	}
	if m.Route == nil {
		s.noRoute++
		return
	}
	rt := &s.routes[m.Route.Index]
	v.RouteID = rt.id
	if err := rt.keys.ReadView(&v); err != nil {
		s.ambiguous++
		return
	}
	v.Class = s.classes.Classify(&v, rt.id)
	if len(s.w.h) > 0 {
		clear(s.w.h)
	}
	if done, ok := rt.chain.AdmitView(&s.w, &v); ok {
		done() // a log has no durations: the request ends at once
	}
}

// discard is the response writer of replayed requests: what a limit writes
// is dropped (decisions are counted from the limits' own counters).
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

// TakeRateLimit takes an admitted request's RateLimit fields without
// formatting them (see limit.Fields).
func (d *discard) TakeRateLimit(limit.Fields) {}

// rejections is the limits' decision log: it counts each rejected (and
// shadow-rejected) key by rule.
type rejections struct{ s *Sim }

func (h *rejections) Enabled(context.Context, slog.Level) bool { return true }
func (h *rejections) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *rejections) WithGroup(string) slog.Handler            { return h }

func (h *rejections) Handle(_ context.Context, r slog.Record) error {
	rule, key, ok := reqview.RateLimitKey(r)
	if !ok {
		return nil
	}
	t := h.s.top[rule]
	if t == nil {
		t = newTopKeys(trackedKeys)
		h.s.top[rule] = t
	}
	t.add(keyText(key))
	return nil
}

// keyText is a key's text as results show it: at most MaxKeyText bytes. A
// longer key keeps its first bytes and a hash of the whole, so two long keys
// stay apart.
func keyText(k string) string { return reqview.KeyText(k, MaxKeyText) }

// Result is what a Sim decided.
type Result struct {
	// Namespace and Checksum identify the rule set.
	Namespace string `json:"namespace"`
	Checksum  string `json:"checksum"`
	// Requests is every record replayed; NoRoute those no route matched
	// (a gateway answers 404), Invalid those the router refuses (a method
	// or path a gateway answers 400), Ambiguous those whose key parts could
	// be read two ways (400 before any limit).
	Requests  int64 `json:"requests"`
	NoRoute   int64 `json:"noRoute"`
	Invalid   int64 `json:"invalid"`
	Ambiguous int64 `json:"ambiguous"`
	// Rules are the rule set's limits, in document order.
	Rules []RuleResult `json:"rules"`
	// Notes say how this replay differs from a fleet of gateways.
	Notes []string `json:"notes"`
}

// RuleResult is one limit's decisions. Requests = Admitted + Rejected +
// Shadow: the requests that reached the limit (a request rejected by a limit
// earlier in its route's chain never reaches the later ones).
type RuleResult struct {
	ID        string `json:"id"`
	Algorithm string `json:"algorithm"`
	Scope     string `json:"scope"`
	Shadow    bool   `json:"shadow"`
	Requests  int64  `json:"requests"`
	// Admitted counts requests the limit let through (exempt clients
	// included, in Exempt as well).
	Admitted int64 `json:"admitted"`
	Exempt   int64 `json:"exempt"`
	Rejected int64 `json:"rejected"`
	// Shadow counts the requests a shadow limit would have rejected (and
	// let through).
	ShadowRejected int64 `json:"shadowRejected"`
	// TopKeys are the keys rejected (or shadow-rejected) most, most first.
	TopKeys []KeyCount `json:"topKeys"`
}

// KeyCount is one key's rejections. Text is at most MaxKeyText bytes. When
// a rule rejected more distinct keys than it counts exactly, a count may
// be too high by at most Error (space-saving counting); Error is 0 when the
// count is exact.
type KeyCount struct {
	Key      string `json:"key"`
	Rejected int64  `json:"rejected"`
	Error    int64  `json:"error,omitempty"`
}

// Result returns the decisions so far.
func (s *Sim) Result() (Result, error) {
	res := Result{Requests: s.requests, NoRoute: s.noRoute, Invalid: s.invalid, Ambiguous: s.ambiguous,
		Namespace: s.rules.Namespace, Checksum: s.checksum, Rules: []RuleResult{}, Notes: []string{}}
	counts, err := s.decisions()
	if err != nil {
		return res, err
	}
	cluster, inFlight := false, false
	for _, l := range s.rules.Limits {
		c := counts[l.ID]
		rr := RuleResult{ID: l.ID, Algorithm: string(l.Algorithm), Scope: string(l.Scope), Shadow: l.Shadow,
			Admitted: c[metrics.DecisionAllow] + c[metrics.DecisionExempt], Exempt: c[metrics.DecisionExempt],
			Rejected: c[metrics.DecisionReject], ShadowRejected: c[metrics.DecisionShadowDeny], TopKeys: []KeyCount{}}
		rr.Requests = rr.Admitted + rr.Rejected + rr.ShadowRejected
		if t := s.top[l.ID]; t != nil {
			rr.TopKeys = t.top(s.topN)
		}
		res.Rules = append(res.Rules, rr)
		cluster = cluster || l.Scope == api.ScopeCluster
		inFlight = inFlight || l.Algorithm == api.Concurrency || l.Algorithm == api.Adaptive
	}
	if cluster {
		res.Notes = append(res.Notes, "cluster-scope limits are simulated as one node serving the whole log")
	}
	if inFlight {
		res.Notes = append(res.Notes, "concurrency and adaptive limits see every request end at once (a log has no durations)")
	}
	return res, nil
}

// decisions sums the limits' decision counters by rule and decision.
func (s *Sim) decisions() (map[string]map[string]int64, error) {
	fams, err := s.metrics.Registry.Gather()
	if err != nil {
		return nil, fmt.Errorf("reading the decision counters: %w", err)
	}
	out := map[string]map[string]int64{}
	for _, f := range fams {
		if f.GetName() != "sluice_limit_decisions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			var rule, decision string
			for _, lp := range m.GetLabel() {
				switch lp.GetName() {
				case "rule":
					rule = lp.GetValue()
				case "decision":
					decision = lp.GetValue()
				}
			}
			if out[rule] == nil {
				out[rule] = map[string]int64{}
			}
			out[rule][decision] += int64(m.GetCounter().GetValue())
		}
	}
	return out, nil
}

// Stats describe a replayed log.
type Stats struct {
	Format Format `json:"format"`
	// Lines is every line read; Replayed those that parsed; Unparseable
	// the rest, the first MaxErrors of them in Errors.
	Lines       int64       `json:"lines"`
	Replayed    int64       `json:"replayed"`
	Unparseable int64       `json:"unparseable"`
	Errors      []LineError `json:"errors"`
	// OutOfOrder counts lines older than a line before them: they were
	// decided at the newer time (the clock never goes backwards).
	OutOfOrder int64 `json:"outOfOrder"`
	// From and To are the clock's first and last readings.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// MaxErrors is how many unparseable lines Stats lists.
const MaxErrors = 5

// Run reads the log lr and replays each line through every sim at the
// line's time (never before the previous line's). An unparseable line is
// counted and the reading goes on; a failed read or a done ctx stops it.
//
// Lines are read and parsed by a goroutine of Run's, a batch ahead of the
// replay, which goes in file order on the calling goroutine; several sims
// replay each batch side by side, one goroutine each (replayBatch). Run
// returns once every goroutine it started has stopped.
func Run(ctx context.Context, lr *Reader, sims ...*Sim) (Stats, error) {
	st := Stats{Errors: []LineError{}}
	ctx, cancel := context.WithCancel(ctx)
	batches, free := make(chan *batch, 4), make(chan *batch, 6)
	for range cap(free) {
		free <- &batch{recs: make([]Record, 0, batchSize)}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(batches)
		read(ctx, lr, free, batches)
	}()
	defer func() {
		cancel()
		for range batches { // let the reader see ctx and stop
		}
		wg.Wait()
	}()
	var clock int64
	started := false
	for b := range batches {
		st.Lines += b.lines
		st.Unparseable += int64(len(b.errs))
		for _, e := range b.errs {
			if len(st.Errors) < MaxErrors {
				st.Errors = append(st.Errors, e)
			}
		}
		b.at = b.at[:0]
		for i := range b.recs {
			t := b.recs[i].Time
			st.Replayed++
			switch {
			case !started:
				clock, started = t, true
				st.From = time.Unix(0, clock).UTC()
			case t < clock:
				st.OutOfOrder++
			default:
				clock = t
			}
			b.at = append(b.at, clock)
		}
		replayBatch(b, sims)
		if b.err != nil {
			return st, b.err
		}
		b.recs, b.errs, b.at, b.lines = b.recs[:0], b.errs[:0], b.at[:0], 0
		free <- b
	}
	st.Format = lr.Format()
	if started {
		st.To = time.Unix(0, clock).UTC()
	}
	return st, ctx.Err()
}

// replayBatch replays b through every sim, each at the clock's reading of
// each line (b.at). Sims share nothing but the records, which they only
// read, so several (the file and the published version) replay side by side
// on goroutines of their own, a batch at a time.
func replayBatch(b *batch, sims []*Sim) {
	if len(sims) == 1 {
		for i := range b.recs {
			sims[0].Replay(&b.recs[i], b.at[i])
		}
		return
	}
	var wg sync.WaitGroup
	for _, s := range sims {
		wg.Go(func() {
			for i := range b.recs {
				s.Replay(&b.recs[i], b.at[i])
			}
		})
	}
	wg.Wait()
}

// batchSize is how many lines the reader parses ahead in one batch.
const batchSize = 1024

// batch is lines read ahead: the records that parsed and the lines that
// did not, each in file order, and the error that ended the reading.
type batch struct {
	recs  []Record
	at    []int64 // the clock at each record (Run)
	errs  []LineError
	lines int64
	err   error
}

// read parses lr into batches taken from free and sends them on out, until
// the log ends, a read fails (the last batch's err) or ctx is done.
func read(ctx context.Context, lr *Reader, free <-chan *batch, out chan<- *batch) {
	for {
		var b *batch
		select {
		case b = <-free:
		case <-ctx.Done():
			return
		}
		var rec Record
		for len(b.recs) < batchSize {
			err := lr.Next(&rec)
			if err == io.EOF {
				break
			}
			var le *LineError
			switch {
			case errors.As(err, &le):
				b.lines++
				b.errs = append(b.errs, *le)
				continue
			case err != nil:
				b.err = err
			default:
				b.lines++
				b.recs = append(b.recs, rec)
				continue
			}
			break
		}
		done := b.err != nil || len(b.recs) < batchSize
		select {
		case out <- b:
		case <-ctx.Done():
			return
		}
		if done {
			return
		}
	}
}

// topKeys counts rejected keys with the space-saving algorithm (Metwally,
// Agrawal, El Abbadi 2005): exact while at most cap distinct keys are seen;
// beyond that the least counted key makes room for a new one, whose count
// starts above the evicted one's (its Error), so that every key counted more
// than total/cap times is still there.
type topKeys struct {
	cap int
	idx map[string]int // key → position in h
	h   []KeyCount     // a min-heap by Rejected
}

func newTopKeys(n int) *topKeys { return &topKeys{cap: n, idx: map[string]int{}} }

func (t *topKeys) add(key string) {
	if i, ok := t.idx[key]; ok {
		t.h[i].Rejected++
		t.down(i)
		return
	}
	if len(t.h) < t.cap {
		t.h = append(t.h, KeyCount{Key: key, Rejected: 1})
		t.idx[key] = len(t.h) - 1
		t.up(len(t.h) - 1)
		return
	}
	least := t.h[0]
	delete(t.idx, least.Key)
	t.h[0] = KeyCount{Key: key, Rejected: least.Rejected + 1, Error: least.Rejected}
	t.idx[key] = 0
	t.down(0)
}

func (t *topKeys) less(i, j int) bool { return t.h[i].Rejected < t.h[j].Rejected }

func (t *topKeys) swap(i, j int) {
	t.h[i], t.h[j] = t.h[j], t.h[i]
	t.idx[t.h[i].Key], t.idx[t.h[j].Key] = i, j
}

func (t *topKeys) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !t.less(i, p) {
			return
		}
		t.swap(i, p)
		i = p
	}
}

func (t *topKeys) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(t.h) {
			return
		}
		m := l
		if r := l + 1; r < len(t.h) && t.less(r, l) {
			m = r
		}
		if !t.less(m, i) {
			return
		}
		t.swap(i, m)
		i = m
	}
}

// top returns the n most counted keys, most first (ties by key).
func (t *topKeys) top(n int) []KeyCount {
	all := slices.Clone(t.h)
	slices.SortFunc(all, func(a, b KeyCount) int {
		if c := cmp.Compare(b.Rejected, a.Rejected); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	return all[:min(n, len(all))]
}

// String formats a key count for a table: "key (n)", "key (≤n)" when the
// count may be too high.
func (k KeyCount) String() string {
	if k.Error > 0 {
		return k.Key + " (≤" + strconv.FormatInt(k.Rejected, 10) + ")"
	}
	return k.Key + " (" + strconv.FormatInt(k.Rejected, 10) + ")"
}
