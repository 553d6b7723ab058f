// Package breaker holds the gateway's circuit breakers: one Breaker per
// (breaker rule, route), because every route has its own upstreams.
//
// # States
//
// A Breaker is closed (requests pass), open (requests get the fallback) or
// half-open (exactly halfOpenProbes concurrent probe requests pass; the rest get
// the fallback).
//
//   - closed → open when, over the rolling window, failed/total reaches
//     errorRatio or slow/total reaches slowCallRatio, provided total has
//     reached minRequests (0 means api.DefaultBreakerMinRequests); or when
//     consecutiveFailures failures happen in a row. The consecutive count is
//     not gated by minRequests: N failures in a row are already N requests.
//   - open → half-open when openFor has passed, decided lazily by the first
//     Allow after that moment.
//   - half-open → closed when all halfOpenProbes probes succeed; → open when
//     any probe fails (a slow probe counts as failed when slowCallRatio is
//     set), with openFor doubled up to maxOpenFor. Closing resets openFor to
//     the rule's value. Every transition starts a fresh window.
//
// A failure is a transport error, a timeout, or an upstream status in
// failureStatuses (every 5xx when empty); see IsFailure. A call is slow when
// it took at least slowCallDuration.
//
// # Window
//
// The rolling window is 10 buckets of window/10 each, held in atomics and
// advanced lazily by the request path from the caller's clock: there are no
// goroutines and no timers. Ratios are evaluated only when a failed or slow
// call is recorded, or when one is still inside the window, so the healthy path
// is a handful of atomic operations and allocates nothing. Counting is exact
// except at bucket boundaries and transitions, where a call racing the
// rotation may land in the neighbouring bucket or be dropped.
//
// # Time
//
// now is nanoseconds on Now's scale (package internal/clock's monotonic
// clock, which limit.Now and degrade.Now share), supplied by the caller:
// Allow, Done and Release never read a clock. Options.Now is read only by
// the admin handler (GET /breakers, the now of Status); Status also reads
// the wall clock, for the times it reports.
//
// # Hot swap
//
// Compile carries every Breaker of an unchanged rule (same canonical JSON) over
// to the new Set as the same object, so its state, counts and in-flight
// tickets survive; a changed or new rule starts closed.
package breaker

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/answer"
)

// ErrOpen is returned by Allow when the breaker is open, or half-open with
// every probe slot taken. The caller answers with WriteFallback.
var ErrOpen = errors.New("circuit breaker open")

// State is a breaker's state. Its numeric value is the one exported in
// sluice_breaker_state.
type State uint8

// The breaker states.
const (
	Closed   State = 0
	HalfOpen State = 1
	Open     State = 2
)

// String returns "closed", "half-open" or "open".
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case HalfOpen:
		return "half-open"
	case Open:
		return "open"
	}
	return "unknown"
}

// Ticket is what Allow hands out and Done takes back: the state generation the
// request was admitted in, and whether it is a half-open probe. Outcomes of
// requests admitted in an earlier generation are ignored. The zero Ticket is
// ignored by Done.
type Ticket struct {
	gen   uint32
	probe bool
}

// Probe reports whether the ticket admitted a half-open probe.
func (t Ticket) Probe() bool { return t.probe }

const nBuckets = 10

// The state word packs: generation (32 bits) | probe successes (15) | probes
// admitted (15) | state (2). Transitions bump the generation under mu; within
// a generation only the probe counts change, by CAS.
const (
	stateBits = 2
	countBits = 15
	countMask = 1<<countBits - 1
	usedShift = stateBits
	okShift   = stateBits + countBits
	genShift  = 32
)

func word(gen uint32, s State) uint64 { return uint64(gen)<<genShift | uint64(s) }
func wState(w uint64) State           { return State(w & 3) }
func wGen(w uint64) uint32            { return uint32(w >> genShift) }
func wUsed(w uint64) int              { return int(w >> usedShift & countMask) }
func wOK(w uint64) int                { return int(w >> okShift & countMask) }

type bucket struct {
	epoch  atomic.Int64 // absolute bucket index (now / bucketNs) these counts belong to
	total  atomic.Int64
	failed atomic.Int64
	slow   atomic.Int64
}

// config is a breaker's compiled, immutable settings.
type config struct {
	bucketNs    int64
	minRequests int64
	errorRatio  float64
	slowRatio   float64
	slowDur     time.Duration
	consecutive int64
	openFor     int64
	maxOpenFor  int64
	probes      int
	failures    [10]uint64 // bit set of failure statuses 0..639
	status      int
	retryAfter  time.Duration // 0: time left open
	body        []byte
	contentType string
	problem     []byte
}

// Breaker is one circuit breaker: a rule applied to one route. Create
// Breakers with Compile. Its methods are safe for concurrent use; Allow and
// Done allocate nothing. A nil *Breaker admits everything (Allow returns a
// zero Ticket and nil; Done does nothing), so callers may skip the nil check.
type Breaker struct {
	st        atomic.Uint64
	openUntil atomic.Int64
	openFor   atomic.Int64 // current open period; doubles on failed probes
	consec    atomic.Int64
	lastBad   atomic.Int64 // bucket index of the last failed or slow call
	buckets   [nBuckets]bucket

	mu    sync.Mutex // serialises transitions and bucket rotation
	cfg   config
	rule  string
	route string
	group *group
	log   *slog.Logger
	trans *prometheus.CounterVec // may be nil
}

func newBreaker(rule, route string, c config, g *group, log *slog.Logger, trans *prometheus.CounterVec) *Breaker {
	b := &Breaker{cfg: c, rule: rule, route: route, group: g, log: log, trans: trans}
	b.st.Store(word(1, Closed))
	b.openFor.Store(c.openFor)
	b.lastBad.Store(math.MinInt64 / 2)
	for i := range b.buckets {
		b.buckets[i].epoch.Store(math.MinInt64 / 2)
	}
	return b
}

// Rule returns the breaker rule's id.
func (b *Breaker) Rule() string { return b.rule }

// Route returns the id of the route the breaker guards.
func (b *Breaker) Route() string { return b.route }

// State returns the current state, without advancing it: an open breaker whose
// openFor has passed reports Open until the next Allow.
func (b *Breaker) State() State { return wState(b.st.Load()) }

// Allow decides whether a request may go to the upstream at now. It returns
// ErrOpen when the breaker is open or when it is half-open and every probe
// slot is taken; otherwise a Ticket that must be passed to Done exactly once
// with the outcome, or to Release when there is none (a half-open probe whose
// Done or Release never comes keeps its slot until the next transition).
func (b *Breaker) Allow(now int64) (Ticket, error) {
	if b == nil {
		return Ticket{}, nil
	}
	for {
		w := b.st.Load()
		switch wState(w) {
		case Closed:
			return Ticket{gen: wGen(w)}, nil
		case Open:
			if now < b.openUntil.Load() {
				return Ticket{}, b.refuse()
			}
			b.toHalfOpen(now, wGen(w))
			continue
		default: // HalfOpen
			if wUsed(w) >= b.cfg.probes {
				return Ticket{}, b.refuse()
			}
			if b.st.CompareAndSwap(w, w+1<<usedShift) {
				return Ticket{gen: wGen(w), probe: true}, nil
			}
		}
	}
}

// refuse counts one refusal (sluice_breaker_rejections_total) and returns
// ErrOpen.
func (b *Breaker) refuse() error {
	if b.group != nil && b.group.refused != nil {
		b.group.refused.Inc()
	}
	return ErrOpen
}

// Done records the outcome of a request admitted by Allow at t: failed as
// decided by IsFailure, and how long the upstream took (slow when dur >=
// slowCallDuration). now is when the request finished.
func (b *Breaker) Done(t Ticket, now int64, failed bool, dur time.Duration) {
	if b == nil {
		return
	}
	slow := b.cfg.slowDur > 0 && dur >= b.cfg.slowDur
	w := b.st.Load()
	if wGen(w) != t.gen {
		return // admitted in an earlier state
	}
	if wState(w) == HalfOpen {
		if !t.probe {
			return
		}
		if failed || (slow && b.cfg.slowRatio > 0) {
			b.reopen(now, t.gen)
			return
		}
		for {
			if b.st.CompareAndSwap(w, w+1<<okShift) {
				if wOK(w)+1 >= b.cfg.probes {
					b.close(now, t.gen)
				}
				return
			}
			w = b.st.Load()
			if wGen(w) != t.gen {
				return
			}
		}
	}
	if wState(w) != Closed {
		return
	}
	e := now / b.cfg.bucketNs
	bk := &b.buckets[uint64(e)%nBuckets]
	if bk.epoch.Load() < e {
		b.rotate(bk, e)
	}
	bk.total.Add(1)
	if failed {
		bk.failed.Add(1)
		if c := b.consec.Add(1); b.cfg.consecutive > 0 && c >= b.cfg.consecutive {
			b.trip(now, t.gen, "consecutiveFailures", slog.Int64("consecutiveFailures", c))
			return
		}
	} else if b.consec.Load() != 0 {
		b.consec.Store(0)
	}
	if slow {
		bk.slow.Add(1)
	}
	if failed || slow {
		if b.lastBad.Load() < e {
			b.lastBad.Store(e)
		}
	} else if e-b.lastBad.Load() >= nBuckets {
		return // healthy path: nothing bad inside the window
	}
	b.evaluate(now, e, t.gen)
}

// Release gives back the probe slot of a ticket whose request ended with no
// upstream outcome (the client went away first), counting neither a success
// nor a failure; call it instead of Done. A ticket that is not a half-open
// probe of the current state holds nothing, and Release then does nothing.
func (b *Breaker) Release(t Ticket) {
	if b == nil || !t.probe {
		return
	}
	for {
		w := b.st.Load()
		if wGen(w) != t.gen || wState(w) != HalfOpen || wUsed(w) == 0 {
			return
		}
		if b.st.CompareAndSwap(w, w-1<<usedShift) {
			return
		}
	}
}

// rotate resets bucket bk for bucket index e unless another call did.
func (b *Breaker) rotate(bk *bucket, e int64) {
	b.mu.Lock()
	if bk.epoch.Load() < e {
		bk.total.Store(0)
		bk.failed.Store(0)
		bk.slow.Store(0)
		bk.epoch.Store(e)
	}
	b.mu.Unlock()
}

// Counts is what a breaker's window holds.
type Counts struct {
	Total  int64 `json:"total"`
	Failed int64 `json:"failed"`
	Slow   int64 `json:"slow"`
}

// counts sums the buckets inside the window that ends with bucket index e.
func (b *Breaker) counts(e int64) Counts {
	var c Counts
	for i := range b.buckets {
		bk := &b.buckets[i]
		if be := bk.epoch.Load(); be > e-nBuckets && be <= e {
			c.Total += bk.total.Load()
			c.Failed += bk.failed.Load()
			c.Slow += bk.slow.Load()
		}
	}
	return c
}

func (b *Breaker) evaluate(now, e int64, gen uint32) {
	c := b.counts(e)
	if c.Total < b.cfg.minRequests || c.Total == 0 {
		return
	}
	total := float64(c.Total)
	switch {
	case b.cfg.errorRatio > 0 && float64(c.Failed) >= b.cfg.errorRatio*total:
		b.trip(now, gen, "errorRatio", slog.Int64("total", c.Total), slog.Int64("failed", c.Failed))
	case b.cfg.slowRatio > 0 && float64(c.Slow) >= b.cfg.slowRatio*total:
		b.trip(now, gen, "slowCallRatio", slog.Int64("total", c.Total), slog.Int64("slow", c.Slow))
	}
}

// transition moves the state word from (gen, from) to (gen+1, to). It must be
// called with mu held; it reports false when the state already moved on.
func (b *Breaker) transition(gen uint32, from, to State) bool {
	for {
		w := b.st.Load()
		if wGen(w) != gen || wState(w) != from {
			return false
		}
		if b.st.CompareAndSwap(w, word(gen+1, to)) {
			return true
		}
	}
}

func (b *Breaker) clearWindow() {
	for i := range b.buckets {
		bk := &b.buckets[i]
		bk.epoch.Store(math.MinInt64 / 2)
		bk.total.Store(0)
		bk.failed.Store(0)
		bk.slow.Store(0)
	}
	b.consec.Store(0)
	b.lastBad.Store(math.MinInt64 / 2)
}

func (b *Breaker) trip(now int64, gen uint32, reason string, attrs ...slog.Attr) {
	b.mu.Lock()
	openFor := b.cfg.openFor
	b.openFor.Store(openFor)
	b.openUntil.Store(now + openFor)
	ok := b.transition(gen, Closed, Open)
	if ok {
		b.clearWindow()
	}
	b.mu.Unlock()
	if ok {
		b.notify(Closed, Open, reason, openFor, attrs...)
	}
}

func (b *Breaker) reopen(now int64, gen uint32) {
	b.mu.Lock()
	w := b.st.Load()
	ok := wGen(w) == gen && wState(w) == HalfOpen
	var openFor int64
	if ok {
		openFor = min(2*b.openFor.Load(), b.cfg.maxOpenFor)
		b.openFor.Store(openFor)
		b.openUntil.Store(now + openFor)
		ok = b.transition(gen, HalfOpen, Open)
	}
	b.mu.Unlock()
	if ok {
		b.notify(HalfOpen, Open, "probe failed", openFor)
	}
}

func (b *Breaker) close(now int64, gen uint32) {
	b.mu.Lock()
	ok := b.transition(gen, HalfOpen, Closed)
	if ok {
		b.clearWindow()
		b.openFor.Store(b.cfg.openFor)
	}
	b.mu.Unlock()
	if ok {
		b.notify(HalfOpen, Closed, "probes succeeded", 0)
	}
}

func (b *Breaker) toHalfOpen(now int64, gen uint32) {
	b.mu.Lock()
	ok := now >= b.openUntil.Load() && b.transition(gen, Open, HalfOpen)
	b.mu.Unlock()
	if ok {
		b.notify(Open, HalfOpen, "openFor elapsed", 0)
	}
}

func (b *Breaker) notify(from, to State, reason string, openFor int64, attrs ...slog.Attr) {
	args := []any{slog.String("rule", b.rule), slog.String("route", b.route),
		slog.String("from", from.String()), slog.String("to", to.String()), slog.String("reason", reason)}
	if to == Open {
		args = append(args, slog.Duration("openFor", time.Duration(openFor)))
	}
	for _, a := range attrs {
		args = append(args, a)
	}
	lvl := slog.LevelInfo
	if to == Open {
		lvl = slog.LevelWarn
	}
	b.log.Log(context.Background(), lvl, "circuit breaker "+to.String(), args...)
	if b.trans != nil {
		b.trans.WithLabelValues(b.rule, from.String(), to.String()).Inc()
	}
	b.group.moved(from, to)
}

// IsFailure reports whether an upstream outcome counts as a failure: any
// transport error or timeout (transportErr), or a status in the rule's
// failureStatuses (every 5xx when the rule lists none). A nil *Breaker (a
// route without a breaker rule) uses the default: every 5xx.
func (b *Breaker) IsFailure(status int, transportErr bool) bool {
	if transportErr {
		return true
	}
	if b == nil {
		return status >= 500 && status <= 599
	}
	if status < 0 || status >= len(b.cfg.failures)*64 {
		return false
	}
	return b.cfg.failures[status/64]&(1<<(status%64)) != 0
}

// RetryAfter returns the Retry-After the fallback sends at now: the rule's
// fallback retryAfter when set, otherwise the time left open, rounded up to a
// whole second and at least one second.
func (b *Breaker) RetryAfter(now int64) time.Duration {
	d := b.cfg.retryAfter
	if d <= 0 {
		d = time.Duration(b.openUntil.Load() - now)
	}
	return max(time.Second, (d+time.Second-1)/time.Second*time.Second)
}

// WriteFallback answers a request that Allow refused: the rule's fallback
// status (503 by default) with Retry-After (see RetryAfter), and the rule's
// fallback body and content type, or an application/problem+json body naming
// the rule when it has none. A gRPC request (answer.IsGRPC) gets grpc-status
// 14 UNAVAILABLE naming the rule instead.
func (b *Breaker) WriteFallback(w http.ResponseWriter, r *http.Request, now int64) {
	b.WriteFallbackMethod(w, r.Method, r.Header, now)
}

// WriteFallbackMethod is WriteFallback for a request whose method is method
// and whose header is reqHeader (a request view's), for any serving stack.
func (b *Breaker) WriteFallbackMethod(w http.ResponseWriter, method string, reqHeader http.Header, now int64) {
	h := w.Header()
	answer.SetRetryAfter(h, int64(b.RetryAfter(now)/time.Second))
	h.Set("Cache-Control", "no-store")
	if answer.IsGRPC(reqHeader) { // grpc-status 14 UNAVAILABLE naming the rule
		answer.WriteGRPCStatus(w, reqHeader, b.cfg.status, answer.GRPCUnavailable, "breaker "+strconv.Quote(b.rule)+" is open")
		return
	}
	if len(b.cfg.body) > 0 {
		ct := b.cfg.contentType
		if ct == "" {
			ct = "text/plain; charset=utf-8"
		}
		h.Set("Content-Type", ct)
		h.Set("Content-Length", strconv.Itoa(len(b.cfg.body)))
		w.WriteHeader(b.cfg.status)
		if method != http.MethodHead {
			_, _ = w.Write(b.cfg.body)
		}
		return
	}
	h.Set("Content-Type", api.ContentTypeProblemJSON)
	w.WriteHeader(b.cfg.status)
	if method != http.MethodHead {
		_, _ = w.Write(b.cfg.problem)
	}
}
