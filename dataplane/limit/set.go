package limit

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/bits"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/answer"
	"github.com/sluicegw/sluice/dataplane/internal/carry"
	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/dataplane/reqview"
	"github.com/sluicegw/sluice/dataplane/reqview/classify"
)

// Defaults of Options.
const (
	DefaultSweepInterval = 10 * time.Second
	DefaultLogsPerSecond = 10
	DefaultLogBurst      = 50
)

// Options configures Compile. The zero value works: no metrics, no logs,
// DefaultMaxKeys, no cluster limits, the Now clock, a real timer for waits.
type Options struct {
	// Metrics receives sluice_limit_decisions_total and
	// sluice_log_dropped_total; nil records nothing.
	Metrics *metrics.Metrics
	// Logger receives one line per rejection (and shadow rejection), itself
	// rate-limited; nil logs nothing.
	Logger *slog.Logger
	// MaxKeys caps the keys each node-scope limit keeps; 0 means
	// DefaultMaxKeys. At the cap, a new key evicts the least recently used
	// (see the package doc).
	MaxKeys int
	// Cluster builds the limiter of a scope: cluster limit (the Redis
	// package's constructor). Nil makes compiling a cluster limit fail. A
	// limiter it returns that implements io.Closer is closed when retired;
	// one that implements TierSetter is told the tier it decides for.
	Cluster func(api.Limit) (Limiter, error)
	// Now is the clock in nanoseconds; nil means limit.Now.
	Now func() int64
	// Wait blocks a leaky-bucket request for its delay; nil means limit.Wait.
	// It must return early with an error when ctx is done.
	Wait func(ctx context.Context, d time.Duration) error
	// SweepInterval is how often a goroutine owned by the Set forgets idle
	// keys; 0 means DefaultSweepInterval, negative starts no goroutine.
	SweepInterval time.Duration
	// LogsPerSecond and LogBurst size the token bucket of rejection log lines
	// (0 means the defaults); lines over it are dropped and counted.
	LogsPerSecond, LogBurst int64
	// Classes are the rule set's priority classes (classify.NewClasses), which
	// limits with a reserve and decision logs refer to; nil means none.
	Classes *classify.Classes
	// Rejected, if set, is called on every rejection and shadow rejection
	// (not rate-bounded like Logger) with the limit's id and the hash of
	// the request's key (classify.Key.Hash): a preview counts the distinct
	// keys it rejects. It runs on the request path: it must be fast.
	Rejected func(rule string, key uint64)
}

// RequestInfo is what the integrator knows about a request before limits:
// the matched route, the client address computed with api.ClientIP (trusted
// proxies applied; Admit never reads X-Forwarded-For), and the request id.
type RequestInfo struct {
	RouteID   string
	ClientIP  netip.Addr
	RequestID string
	// Class is the request's priority class index (classify.Classes.Classify of the
	// Options' Classes); 0 is the default class.
	Class int
	// TrustedPeer says the connection's peer is a trusted proxy
	// (reqview.View.TrustedPeer): classes that match headers match only then.
	TrustedPeer bool
}

// View returns the request view of r with info's route, client and request
// id: what Admit decides on.
func (info RequestInfo) View(r *http.Request) reqview.View {
	v := reqview.FromRequest(r)
	v.RouteID, v.ClientIP, v.RequestID, v.Class = info.RouteID, info.ClientIP, info.RequestID, info.Class
	v.TrustedPeer = info.TrustedPeer
	return v
}

// Wait blocks for d or until ctx is done, whichever is first, and returns
// ctx's error in the second case. It is the wait of leaky-bucket requests.
func Wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// rule is one compiled limit. Rules whose limit did not change are carried
// into the next Set as the same pointer, state and all (package carry, keyed
// by limit id and canonical JSON).
type rule struct {
	l      api.Limit // normalized
	lim    Limiter
	local  *Local // lim, when node scope
	key    classify.Key
	cost   costSpec
	exempt exemptList
	class  class // evaluation order

	rl     answer.RateLimitPolicy // the RateLimit fields' policy
	quota  int64                  // q of the policy: the rate over w whole seconds
	window int64                  // w of the policy in seconds; 0 for concurrency

	mAllow, mReject, mShadow, mExempt, mStoreErr prometheus.Counter

	// Adaptive protection (adaptive.go, classes.go, variants.go).
	ad        *adaptive             // adaptive: the controller; nil otherwise
	variant   string                // a variant's rule: the variant id; "" for the limit itself
	variants  []*rule               // the limit's variants, in document order
	ends      []int                 // cumulative weights of variants
	tier      string                // a tier's rule: the tier id; "" for the limit itself
	tiers     []*rule               // the limit's tiers, in document order (tiers.go)
	tierMatch []classify.ClaimMatch // each tier's claims; empty: every caller
	byClass   []decCounters         // per class index, for limits with a reserve; nil otherwise
	dc        decCounters           // the m* counters above, for counters
	// lat is the variant's latency histogram (a rule of a limit with
	// variants: its base or one variant); nil otherwise.
	lat prometheus.Observer
}

// decCounters are one rule's decision counters for one class.
type decCounters struct {
	allow, reject, shadow, exempt, storeErr prometheus.Counter
}

// Set is a compiled rule set's limits: what one rule-set version enforces.
// Build it with Compile off the hot path, swap it in (atomic.Pointer), then
// call Retire on the old Set. Safe for concurrent use; immutable after
// Compile except for the limiters' states.
type Set struct {
	rules  []*rule
	gen    *carry.Gen[*rule] // rules by id, what the next Set may carry
	chains map[string]*Chain
	all    *Chain // routes no limit names

	now    func() int64
	wait   func(context.Context, time.Duration) error
	logger *slog.Logger
	logs   *Local // token bucket of log lines, carried across Sets
	onRej  func(rule string, key uint64)
	drops  prometheus.Counter
	cls    *classify.Classes

	stop    chan struct{}
	stopped chan struct{}
	retire  sync.Once
}

// Chain is the limits that apply to one route, in evaluation order: rate
// limits first, then concurrency, then leaky buckets, so that a leaky-bucket
// wait starts only once every other limit has passed. A nil *Chain admits
// everything.
type Chain struct {
	set    *Set
	rules  []*rule
	keyIdx []int          // per rule: index into specs
	specs  []classify.Key // distinct key specs, hashed once per request
}

// Compile builds the Set for limits, which must be the limits of a validated,
// normalized rule set (api.Validated's Rules): Compile trusts them and checks
// nothing Validate checks. prev is the Set in service, or nil. A limit whose
// canonical JSON equals the one of the same id in prev keeps its exact
// limiter and state. A changed node-scope limit over the same key dimensions
// gets its keys' current fill carried over, scaled to the new capacity (see
// params.carry). Compile reads prev but never changes what prev decides; it
// may run concurrently with requests on prev.
//
// Errors name the limit: "limits[3]: scope cluster needs --redis on this
// node". On error nothing is started, the cluster limiters Compile made are
// closed, and prev is untouched.
func Compile(limits []api.Limit, prev *Set, opts Options) (*Set, error) {
	s := &Set{now: opts.Now, wait: opts.Wait, logger: opts.Logger, cls: opts.Classes, onRej: opts.Rejected}
	if s.now == nil {
		s.now = Now
	}
	if s.wait == nil {
		s.wait = Wait
	}
	if opts.Metrics != nil {
		s.drops = opts.Metrics.LogsDropped
	}
	if prev != nil && prev.logs != nil {
		s.logs = prev.logs
	} else {
		perSec := cmp.Or(opts.LogsPerSecond, DefaultLogsPerSecond)
		burst := cmp.Or(opts.LogBurst, DefaultLogBurst)
		lg, err := NewLocal(api.Limit{Algorithm: api.TokenBucket, Rate: perSec, Period: api.Duration(time.Second), Burst: burst}, 1)
		if err != nil {
			return nil, fmt.Errorf("log limiter: %w", err)
		}
		s.logs = lg
	}
	var prevGen *carry.Gen[*rule]
	if prev != nil {
		prevGen = prev.gen
	}
	b := carry.Begin(prevGen, retireRule)
	defer b.Discard()
	now := s.now()
	s.rules = make([]*rule, 0, len(limits))
	for i := range limits {
		l := &limits[i]
		canon, err := json.Marshal(l)
		if err != nil {
			return nil, fmt.Errorf("limits[%d]: encoding limit %q: %w", i, l.ID, err)
		}
		ru, _, err := b.Provide(l.ID, string(canon), func(old *rule, _ bool) (*rule, error) {
			return compileRule(*l, old, opts, now)
		})
		if err != nil {
			return nil, fmt.Errorf("limits[%d]: %w", i, err)
		}
		s.rules = append(s.rules, ru)
	}
	s.gen = b.Done()
	s.buildChains()
	if opts.SweepInterval >= 0 {
		s.stop, s.stopped = make(chan struct{}), make(chan struct{})
		go s.sweepLoop(cmp.Or(opts.SweepInterval, DefaultSweepInterval))
	}
	return s, nil
}

// retireRule closes the cluster limiter of a rule no Set holds any more (a
// node-scope limiter is memory only).
func retireRule(_ string, ru *rule, _ bool) {
	for _, r := range append([]*rule{ru}, ru.tiers...) {
		if r.local == nil {
			if c, ok := r.lim.(io.Closer); ok {
				_ = c.Close()
			}
		}
	}
}

// compileRule returns a new rule for l, changed from prev (nil when l is new)
// or new; a node-scope limit takes prev's fill when it can. Each of l's
// variants becomes a rule of its own (compileVariants).
func compileRule(l api.Limit, prev *rule, opts Options, now int64) (*rule, error) {
	label := ""
	if len(l.Variants) > 0 {
		label = BaseVariant
	}
	ru, err := compileOne(l, prev, opts, now, label, "")
	if err != nil {
		return nil, err
	}
	if err := ru.compileVariants(prev, opts, now); err != nil {
		return nil, err
	}
	if err := ru.compileTiers(prev, opts, now); err != nil {
		return nil, err
	}
	return ru, nil
}

// compileOne compiles one limit, or one variant's limit (variant is its
// label: "" for a limit without variants, BaseVariant or the variant id),
// or one tier's limit (tier is its id; "" for the limit itself).
func compileOne(l api.Limit, prev *rule, opts Options, now int64, variant, tier string) (ru *rule, err error) {
	ru = &rule{l: l, variant: variant, tier: tier}
	if ru.key, err = classify.ParseLimitKey(&l); err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	if ru.exempt, err = parseExempt(l.Exempt); err != nil {
		return nil, err
	}
	p, err := newParams(l)
	if err != nil {
		return nil, err
	}
	if p.resv, err = newReserve(l.Reserve, opts.Classes); err != nil {
		return nil, err
	}
	if p.alg == kAdaptive {
		ru.ad = compileAdaptive(l, prev, opts, now, variant)
		p.ad = ru.ad
	}
	ru.cost = newCostSpec(l.Cost, p.capacity())
	ru.class = p.alg.class()
	if l.Scope == api.ScopeCluster {
		if opts.Cluster == nil {
			return nil, errors.New("scope cluster needs --redis on this node")
		}
		if ru.lim, err = opts.Cluster(l); err != nil {
			return nil, fmt.Errorf("cluster limiter: %w", err)
		}
		if ts, ok := ru.lim.(TierSetter); ok && tier != "" {
			ts.SetTier(tier)
		}
	} else {
		global := ru.key.Global()
		if prev != nil && prev.local != nil && slices.Equal(prev.l.Key, l.Key) && prev.l.IPv6Prefix == l.IPv6Prefix {
			ru.local = carried(prev.local, p, global, opts.MaxKeys, now)
		} else {
			ru.local = newLocal(p, global, opts.MaxKeys)
		}
		ru.lim = ru.local
	}
	ru.setPolicy(p)
	if m := opts.Metrics; m != nil {
		dc := newDecCounters(m, l.ID, "", variant, tier)
		ru.mAllow, ru.mReject, ru.mShadow, ru.mExempt, ru.mStoreErr = dc.allow, dc.reject, dc.shadow, dc.exempt, dc.storeErr
		ru.dc = dc
		if variant != "" {
			ru.lat = m.VariantLatency(l.ID, variant)
		}
		if p.resv != nil {
			for _, id := range opts.Classes.IDs() {
				ru.byClass = append(ru.byClass, newDecCounters(m, l.ID, id, variant, tier))
			}
		}
	}
	return ru, nil
}

// TierSetter is implemented by a cluster Limiter that keeps figures per
// tier (a quota's usage, for the node's report): Compile calls SetTier with
// the tier id before the limiter decides, for a tier's limiter only (the
// limit passed to Options.Cluster is then Limit.WithTier, which keeps the
// limit's id).
type TierSetter interface{ SetTier(tier string) }

// setPolicy precomputes the RateLimit-Policy item. The draft's w is whole
// seconds, so a period that is not is rounded up to w and the quota scaled
// to it: 10 per 100ms reads q=100;w=1. Concurrency has no window: q only.
func (ru *rule) setPolicy(p params) {
	ru.quota = p.rate
	if !p.alg.inFlight() {
		ru.window = max(1, (p.period+sec-1)/sec)
		if ru.window*sec != p.period {
			hi, lo := bits.Mul64(uint64(p.rate), uint64(ru.window*sec))
			q, _ := bits.Div64(hi%uint64(p.period), lo, uint64(p.period))
			ru.quota = int64(q)
		}
	}
	ru.rl = answer.NewRateLimitPolicy(ru.l.ID, ru.quota, ru.window)
}

// buildChains builds every route's chain in one pass over the rules: the
// cost is the total length of the chains, not routes × rules.
func (s *Set) buildChains() {
	named := map[string][]*rule{}
	for _, ru := range s.rules {
		for _, r := range ru.l.Routes {
			named[r] = nil
		}
	}
	var all []*rule
	for _, ru := range s.rules {
		if len(ru.l.Routes) == 0 {
			all = append(all, ru)
			for r, rules := range named {
				named[r] = append(rules, ru)
			}
			continue
		}
		for _, r := range ru.l.Routes {
			if rules := named[r]; len(rules) == 0 || rules[len(rules)-1] != ru {
				named[r] = append(rules, ru)
			}
		}
	}
	s.chains = make(map[string]*Chain, len(named))
	for r, rules := range named {
		s.chains[r] = s.newChain(rules)
	}
	s.all = s.newChain(all)
}

// newChain orders rules (which apply to one route, in document order) for
// evaluation and indexes their distinct key specs.
func (s *Set) newChain(rules []*rule) *Chain {
	if len(rules) == 0 {
		return nil
	}
	c := &Chain{set: s, rules: rules}
	slices.SortStableFunc(c.rules, func(a, b *rule) int { return int(a.class) - int(b.class) })
	specIdx := make(map[string]int, 1)
	for _, ru := range c.rules {
		ks := ru.key.String()
		k, ok := specIdx[ks]
		if !ok {
			k = len(c.specs)
			c.specs = append(c.specs, ru.key)
			specIdx[ks] = k
		}
		c.keyIdx = append(c.keyIdx, k)
	}
	return c
}

// Chain returns the limits that apply to routeID, or nil when none does.
func (s *Set) Chain(routeID string) *Chain {
	if c, ok := s.chains[routeID]; ok {
		return c
	}
	return s.all
}

// Sweep forgets idle keys of every node-scope limit (see Local.Sweep) and
// returns how many it forgot.
func (s *Set) Sweep(now int64) int {
	n := 0
	for _, ru := range s.rules {
		for _, r := range append(append([]*rule{ru}, ru.variants...), ru.tiers...) {
			if r.local != nil {
				n += r.local.Sweep(now)
			}
		}
	}
	return n
}

func (s *Set) sweepLoop(every time.Duration) {
	defer close(s.stopped)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.Sweep(s.now())
		}
	}
}

// Retire stops s's sweeper and closes the cluster limiters of s that next
// did not carry over; limiters carried into next keep running. Call it once
// next is in service (nil: close everything, as when shutting down). Requests
// still running on s stay safe: their done funcs release into limiters that
// remain valid. Retire waits for the sweeper to stop; it is idempotent.
func (s *Set) Retire(next *Set) {
	s.retire.Do(func() {
		if s.stop != nil {
			close(s.stop)
			<-s.stopped
		}
		var ng *carry.Gen[*rule]
		if next != nil {
			ng = next.gen
		}
		s.gen.Retire(ng, retireRule)
	})
}

// Close is Retire(nil).
func (s *Set) Close() { s.Retire(nil) }

// taken is one admitted Take, kept to refund or release it.
type taken struct {
	ru   *rule
	h    uint64
	key  string
	cost int64
	// storeFailed: the store failed and its failure policy decided; the
	// units were never taken from the store, so they are not refunded to it.
	storeFailed bool
	pool        int8  // the reserved pool taken from (Decision.Pool)
	start       int64 // when the request was admitted: an adaptive limit's RTT starts here
}

func (t *taken) refund(ctx context.Context, now int64) {
	if t.storeFailed {
		return
	}
	if t.ru.local != nil {
		t.ru.local.RefundHashPool(t.h, t.cost, now, t.pool)
		return
	}
	t.ru.lim.Refund(ctx, t.key, t.cost, now)
}

// release gives back the concurrency slots of one request, once.
type release struct {
	set   *Set
	items []taken
	once  sync.Once
}

func (rl *release) done() {
	rl.once.Do(func() {
		now := rl.set.now()
		for i := range rl.items {
			it := &rl.items[i]
			if it.ru.ad != nil {
				it.ru.ad.observe(now-it.start, now)
			}
			it.refund(context.Background(), now)
		}
	})
}

func noop() {}

// Admit evaluates every limit of the chain for one request, in order, and
// stops at the first that rejects: the units already taken from the others
// are refunded, the rejection is logged and written to w (status, headers,
// body), and ok is false. A shadow limit that would reject is counted and
// logged, never enforced. Exempt clients skip a limit.
//
// When every limit admits, Admit waits out the longest leaky-bucket delay
// (if the client goes away meanwhile, every unit is refunded, nothing is
// written and ok is false), sets the RateLimit headers of the tightest limit
// on w.Header() and returns ok true with done, which the caller must call
// once the request has finished, however it finishes (defer it: panics and
// client cancellation included); done releases concurrency slots and is
// safe to call more than once.
//
// The tightest limit is the non-shadow limit with the least remaining share
// (remaining ÷ limit), ties going to the fewer remaining units, then to the
// earlier limit in evaluation order.
func (c *Chain) Admit(w http.ResponseWriter, r *http.Request, info RequestInfo) (done func(), ok bool) {
	v := info.View(r)
	return c.AdmitView(w, &v)
}

// AdmitView is Admit on the request's view (package reqview), as the gateway
// serves: keyed on the parts the route's KeyCheck recorded in v (ReadView,
// which must have passed), costed on v's header and content length, and
// logged with v's request id and trace context. It writes rejections to w.
// On ok, v.Latencies holds the latency histograms of the limits with
// variants that let the request through (the variant each picked), for the
// caller to observe the request's duration in once it is answered; on a
// refusal it holds none.
func (c *Chain) AdmitView(w http.ResponseWriter, v *reqview.View) (done func(), ok bool) {
	if c == nil {
		return noop, true
	}
	s := c.set
	now := s.now()
	var hashBuf [8]uint64
	var haveBuf [8]bool
	var takenBuf [8]taken
	tk := takenBuf[:0]
	var best *rule
	var bestD Decision
	var delay time.Duration
	conc := 0
	for i, ru := range c.rules {
		if ru.exempt.contains(v.ClientIP) {
			inc(ru.mExempt)
			v.Decisions.Add(ru.l.ID, reqview.DecisionExempt)
			continue
		}
		if ru.variants != nil {
			ru = ru.pick(v)
		}
		if ru.tiers != nil {
			ru = ru.pickTier(v)
		}
		m := ru.counters(v.Class)
		t := taken{ru: ru, cost: ru.cost.cost(v), start: now}
		var d Decision
		if ru.local != nil {
			k := c.keyIdx[i]
			switch {
			case k >= len(hashBuf):
				t.h = c.specs[k].Hash(v)
			case haveBuf[k]:
				t.h = hashBuf[k]
			default:
				t.h = c.specs[k].Hash(v)
				hashBuf[k], haveBuf[k] = t.h, true
			}
			d = ru.local.TakeHashClass(t.h, t.cost, now, v.Class)
			t.pool = d.pool
		} else {
			if ru.l.Bucket != "" {
				t.key = ru.key.ValueText(v) // a shared bucket: keys match by value
			} else {
				t.key = ru.key.Text(v)
			}
			var err error
			if d, err = ru.lim.Take(v.Context(), t.key, t.cost, now); err != nil {
				inc(m.storeErr)
				t.storeFailed = true
			}
		}
		if !d.Allowed {
			if s.onRej != nil {
				h := t.h
				if ru.local == nil {
					h = c.specs[c.keyIdx[i]].Hash(v)
				}
				s.onRej(ru.l.ID, h)
			}
			if ru.l.Shadow {
				inc(m.shadow)
				v.Decisions.Add(ru.l.ID, reqview.DecisionShadow)
				if ru.lat != nil {
					v.Latencies.Add(ru.lat)
				}
				s.logReject(v, ru, &c.specs[c.keyIdx[i]], d, now)
				continue
			}
			inc(m.reject)
			v.Decisions.Add(ru.l.ID, reqview.DecisionReject)
			if v.Latencies.Len() > 0 {
				v.Latencies.Reset() // a variant that let it through does not count a 429
			}
			for j := range tk {
				tk[j].refund(v.Context(), now)
			}
			s.logReject(v, ru, &c.specs[c.keyIdx[i]], d, now)
			writeReject(w, v.Header(), ru, d, v.RequestID)
			return nil, false
		}
		inc(m.allow)
		v.Decisions.Add(ru.l.ID, reqview.DecisionAdmit)
		if ru.lat != nil {
			v.Latencies.Add(ru.lat) // observed with the request's duration (the request path)
		}
		tk = append(tk, t)
		if ru.class == classConcurrency {
			conc++
		}
		if ru.l.Shadow {
			continue
		}
		delay = max(delay, d.Delay)
		if best == nil || tighter(d, bestD) {
			best, bestD = ru, d
		}
	}
	if delay > 0 {
		if err := s.wait(v.Context(), delay); err != nil {
			if v.Latencies.Len() > 0 {
				v.Latencies.Reset()
			}
			now = s.now()
			for j := range tk {
				tk[j].refund(context.Background(), now)
			}
			return nil, false
		}
	}
	if best != nil {
		if t, ok := w.(rateLimitTaker); ok {
			t.TakeRateLimit(Fields{best, bestD})
		} else {
			setHeaders(w.Header(), best, bestD)
		}
	}
	if conc == 0 {
		return noop, true
	}
	rl := &release{set: s, items: make([]taken, 0, conc)}
	start := now
	if delay > 0 {
		start = s.now() // the adaptive RTT starts once the wait is over
	}
	for _, t := range tk {
		if t.ru.class == classConcurrency {
			t.start = start
			rl.items = append(rl.items, t)
		}
	}
	return rl.done, true
}

// MayWait reports whether AdmitView may block before it decides: a limit
// shared through a store (cluster scope), which may wait for the store, or
// a leaky bucket that delays requests (maxDelay). A serving stack that must
// not block (an event loop) serves the chain's requests elsewhere. A nil
// Chain never waits.
func (c *Chain) MayWait() bool {
	if c == nil {
		return false
	}
	for _, ru := range c.rules {
		if ru.mayWait() {
			return true
		}
		for _, vr := range ru.variants {
			if vr.mayWait() {
				return true
			}
		}
		for _, tr := range ru.tiers {
			if tr.mayWait() {
				return true
			}
		}
	}
	return false
}

func (ru *rule) mayWait() bool {
	return ru.local == nil || ru.l.MaxDelay > 0
}

// tighter reports whether a leaves a smaller share of its limit than b.
func tighter(a, b Decision) bool {
	ra, rb := max(a.Remaining, 0), max(b.Remaining, 0)
	// ra/la < rb/lb  ⇔  ra·lb < rb·la (all non-negative; 128-bit products).
	h1, l1 := bits.Mul64(uint64(ra), uint64(max(b.Limit, 1)))
	h2, l2 := bits.Mul64(uint64(rb), uint64(max(a.Limit, 1)))
	if h1 != h2 || l1 != l2 {
		return h1 < h2 || (h1 == h2 && l1 < l2)
	}
	return ra < rb
}

func inc(c prometheus.Counter) {
	if c != nil {
		c.Inc()
	}
}
