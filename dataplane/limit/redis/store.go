package redislimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/dataplane/limit"
	"github.com/sluicegw/sluice/dataplane/metrics"
)

// ErrUnavailable is the error of a decision made without asking Redis
// because the breaker is open (Redis failed repeatedly and has not answered a
// probe since).
var ErrUnavailable = errors.New("redis unavailable: breaker open")

// ErrCorrupt wraps the error of a script reply the Store cannot use (state
// the scripts cannot use is repaired by them instead: see the package doc).
var ErrCorrupt = errors.New("corrupt limiter state in redis")

// Settings configures a Store. The zero value of every field but the
// connection (URL or ClusterAddrs, or a client given to NewWithClient) is
// meaningful.
type Settings struct {
	// URL is --redis: one server, a Unix socket or Sentinel (see the package
	// doc for the forms). Exclusive with ClusterAddrs.
	URL string
	// ClusterAddrs is --redis-cluster: comma-separated seed host:port list of
	// a Redis Cluster, or a redis:// URL with more seeds as addr= parameters.
	ClusterAddrs string
	// Prefix starts every key (--redis-prefix); "" means DefaultPrefix. Give
	// each gateway fleet (or namespace) sharing one Redis its own prefix.
	Prefix string
	// Timeout is the deadline of every Redis call (--redis-timeout); zero
	// means DefaultTimeout (20 ms).
	Timeout time.Duration
	// ClusterSize is the number of gateway nodes sharing the limits
	// (--cluster-size), used by onStoreError: local when Nodes is nil; zero
	// means 1.
	ClusterSize int
	// Nodes, when set, returns the number of live gateway nodes (from the
	// node registry); values below 1 count as 1. It is called on the failure
	// path and must be cheap and safe for concurrent use.
	Nodes func() int
	// Metrics receives sluice_store_errors_total{store="redis"} and
	// sluice_store_repairs_total{store="redis"}; nil means no metrics.
	Metrics *metrics.Metrics
	// Logger receives a warning for every key repaired (see the scripts);
	// nil means slog.Default().
	Logger *slog.Logger
	// FailuresToOpen is the number of consecutive failed calls that open the
	// breaker; zero means DefaultFailuresToOpen.
	FailuresToOpen int
	// ProbeEvery is how often an open breaker pings Redis (one ping at a
	// time); zero means DefaultProbeEvery.
	ProbeEvery time.Duration
	// LeaseTTL is the longest a batched lease is spent locally before its
	// unused units are returned (token bucket) or dropped (windows); zero
	// means DefaultLeaseTTL.
	LeaseTTL time.Duration
	// LeaseFraction caps one node's lease at this fraction of the limit's
	// capacity (burst, or rate for windows), at least one unit; zero means
	// DefaultLeaseFraction. It sets the over-admission bound (package doc).
	LeaseFraction float64
	// MaxKeys bounds the keys one limiter keeps local state for (batched
	// leases, the local fallback); zero means DefaultMaxKeys.
	MaxKeys int
	// DegradedFor is how long after the last error Status reports degraded
	// rather than ok; zero means DefaultDegradedFor.
	DegradedFor time.Duration
	// Clock returns the time on limit.Now's scale; nil means limit.Now. It is
	// read only where a Take waited for another's Redis call and by the
	// breaker's prober.
	Clock func() int64
	// Wall is the wall clock quotas find their calendar period by
	// (api.Limit.QuotaWindow); nil means time.Now.
	Wall func() time.Time
}

// Store is a connection to Redis shared by every cluster-scope limiter of a
// gateway, with the breaker that guards it. Safe for concurrent use. Close
// stops its prober and closes the client.
type Store struct {
	client  redis.UniversalClient
	ownsCli bool
	set     Settings
	errs    prometheus.Counter
	repairs prometheus.Counter

	open      atomic.Bool
	fails     atomic.Int32
	probeKick chan struct{}

	mu        sync.Mutex
	state     string
	since     time.Time
	lastErr   string
	lastErrAt time.Time
	errCount  uint64
	closeOnce sync.Once

	umu   sync.Mutex
	usage map[string]*quotaUsage // usageKey → what the quota learnt from Redis
	stop  chan struct{}
	wg    sync.WaitGroup
}

// New connects to the Redis given by s.URL or s.ClusterAddrs. It fails only
// on configuration errors, with a message that never shows a password. An
// unreachable Redis is not an error: the Store starts with its breaker open,
// so that every cluster limit decides by its onStoreError policy, and its
// prober pings Redis every ProbeEvery until it answers, when cluster
// limiting starts by itself. ctx bounds the first ping only.
func New(ctx context.Context, s Settings) (*Store, error) {
	o, err := parseFlags(s.URL, s.ClusterAddrs)
	if err != nil {
		return nil, err
	}
	s = s.withDefaults()
	st := newStore(o.newClient(s.Timeout), true, s)
	st.start(ctx)
	return st, nil
}

// NewWithClient is New with a client the caller built and keeps owning
// (Close does not close it). The client's own timeouts and retries apply in
// addition to Settings.Timeout; see New for what an unreachable Redis does.
func NewWithClient(ctx context.Context, c redis.UniversalClient, s Settings) (*Store, error) {
	if c == nil {
		return nil, errNoRedis
	}
	s = s.withDefaults()
	st := newStore(c, false, s)
	st.start(ctx)
	return st, nil
}

func (s Settings) withDefaults() Settings {
	if s.Prefix == "" {
		s.Prefix = DefaultPrefix
	}
	if s.Timeout <= 0 {
		s.Timeout = DefaultTimeout
	}
	if s.ClusterSize < 1 {
		s.ClusterSize = 1
	}
	if s.FailuresToOpen <= 0 {
		s.FailuresToOpen = DefaultFailuresToOpen
	}
	if s.ProbeEvery <= 0 {
		s.ProbeEvery = DefaultProbeEvery
	}
	if s.LeaseTTL <= 0 {
		s.LeaseTTL = DefaultLeaseTTL
	}
	if s.LeaseFraction <= 0 || s.LeaseFraction > 1 {
		s.LeaseFraction = DefaultLeaseFraction
	}
	if s.MaxKeys <= 0 {
		s.MaxKeys = DefaultMaxKeys
	}
	if s.DegradedFor <= 0 {
		s.DegradedFor = DefaultDegradedFor
	}
	if s.Clock == nil {
		s.Clock = limit.Now
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	return s
}

func newStore(c redis.UniversalClient, owns bool, s Settings) *Store {
	st := &Store{
		client:    c,
		ownsCli:   owns,
		set:       s,
		probeKick: make(chan struct{}, 1),
		stop:      make(chan struct{}),
		state:     StateOK,
		since:     time.Now(),
	}
	if s.Metrics != nil {
		st.errs = s.Metrics.StoreErrors.WithLabelValues("redis")
		st.repairs = s.Metrics.StoreRepairs.WithLabelValues("redis")
	}
	return st
}

// start pings once and starts the prober.
func (s *Store) start(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, s.probeTimeout())
	err := s.client.Ping(pctx).Err()
	cancel()
	if err != nil {
		s.recordError(err)
		s.trip()
	}
	s.wg.Add(1)
	go s.prober()
}

func (s *Store) probeTimeout() time.Duration { return max(4*s.set.Timeout, 100*time.Millisecond) }

// Close stops the prober and, when New built the client, closes it. Limiters
// of a closed Store answer by their failure policy.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.stop)
		s.wg.Wait()
		s.open.Store(true)
		if s.ownsCli {
			err = s.client.Close()
		}
	})
	return err
}

// The states Status reports.
const (
	StateOK       = "ok"       // calls succeed
	StateDegraded = "degraded" // calls succeed, but some failed in the last DegradedFor
	StateDown     = "down"     // the breaker is open: decisions follow onStoreError
)

// Status is the Store's health for the node's /status.
type Status struct {
	// State is ok, degraded or down.
	State string `json:"state"`
	// Since is when State last changed.
	Since time.Time `json:"since"`
	// LastError is the text of the last failed call ("" if none); it never
	// holds a password.
	LastError string `json:"lastError,omitempty"`
	// LastErrorAt is when it happened.
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
	// Errors counts failed calls since the Store started.
	Errors uint64 `json:"errors"`
}

// Status reports the Store's health. Safe for concurrent use.
func (s *Store) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshLocked(time.Now())
	return Status{State: s.state, Since: s.since, LastError: s.lastErr, LastErrorAt: s.lastErrAt, Errors: s.errCount}
}

// refreshLocked moves degraded back to ok once DegradedFor passed quietly.
func (s *Store) refreshLocked(now time.Time) {
	if s.state == StateDegraded && now.Sub(s.lastErrAt) >= s.set.DegradedFor {
		s.state, s.since = StateOK, s.lastErrAt.Add(s.set.DegradedFor)
	}
}

func (s *Store) setStateLocked(state string, now time.Time) {
	if s.state != state {
		s.state, s.since = state, now
	}
}

// recordError counts a failed call.
func (s *Store) recordError(err error) {
	if s.errs != nil {
		s.errs.Inc()
	}
	now := time.Now()
	s.mu.Lock()
	s.errCount++
	s.lastErr, s.lastErrAt = err.Error(), now
	if s.state == StateOK {
		s.setStateLocked(StateDegraded, now)
	}
	s.mu.Unlock()
}

// repaired counts and logs a key a script found in an impossible state and
// rewrote from scratch (see scripts.go).
func (s *Store) repaired(key string) {
	if s.repairs != nil {
		s.repairs.Inc()
	}
	s.set.Logger.Warn("redis limit key held impossible state (wrong type, NaN or out of range); rewritten from scratch",
		"key", key)
}

// trip opens the breaker.
func (s *Store) trip() {
	if s.open.Swap(true) {
		return
	}
	s.mu.Lock()
	s.setStateLocked(StateDown, time.Now())
	s.mu.Unlock()
	select {
	case s.probeKick <- struct{}{}:
	default:
	}
}

// prober pings Redis while the breaker is open, one ping at a time, and
// closes the breaker when one succeeds.
func (s *Store) prober() {
	defer s.wg.Done()
	t := time.NewTicker(s.set.ProbeEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.probeKick:
			continue // wait a full ProbeEvery before the first probe
		case <-t.C:
		}
		if !s.open.Load() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.probeTimeout())
		err := s.client.Ping(ctx).Err()
		cancel()
		if err != nil {
			s.recordError(fmt.Errorf("probe: %w", err))
			continue
		}
		select {
		case <-s.stop:
			return
		default:
		}
		s.fails.Store(0)
		s.open.Store(false)
		s.mu.Lock()
		s.setStateLocked(StateDegraded, time.Now())
		s.mu.Unlock()
	}
}

// reply is a script's answer.
type reply struct {
	granted, remaining int64
	reset, retry       time.Duration // retry < 0: never
}

// run runs one script under the deadline and the breaker.
func (s *Store) run(ctx context.Context, sc *redis.Script, key string, args ...any) (reply, error) {
	if s.open.Load() {
		return reply{}, ErrUnavailable
	}
	cctx, cancel := context.WithTimeout(ctx, s.set.Timeout)
	v, err := sc.Run(cctx, s.client, []string{key}, args...).Int64Slice()
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			// The caller gave up (client gone): not Redis' fault.
			return reply{}, fmt.Errorf("redis call: %w", ctx.Err())
		}
		return reply{}, s.fail(err)
	}
	if s.fails.Load() != 0 {
		s.fails.Store(0)
	}
	if len(v) != 5 {
		err := fmt.Errorf("%w: script answered %d values, want 5", ErrCorrupt, len(v))
		s.recordError(err)
		return reply{}, err
	}
	if v[4] == 1 {
		s.repaired(key)
	}
	r := reply{granted: v[0], remaining: v[1], reset: time.Duration(v[2]) * time.Microsecond, retry: time.Duration(v[3]) * time.Microsecond}
	if v[3] < 0 {
		r.retry = -1
	}
	return r, nil
}

// fail records a failed call and decides whether it counts toward opening
// the breaker: errors about one key's data (WRONGTYPE, corrupt state) do
// not, since Redis itself is healthy.
func (s *Store) fail(err error) error {
	var rerr redis.Error
	if errors.As(err, &rerr) {
		msg := err.Error()
		if strings.HasPrefix(msg, "WRONGTYPE") || strings.Contains(msg, "sluice: corrupt") {
			err = fmt.Errorf("%w: %w", ErrCorrupt, err)
			s.recordError(err)
			return err
		}
	}
	err = fmt.Errorf("redis call: %w", err)
	s.recordError(err)
	if int(s.fails.Add(1)) >= s.set.FailuresToOpen {
		s.trip()
	}
	return err
}

// nodes is the number of live gateway nodes, at least 1.
func (s *Store) nodes() int64 {
	n := s.set.ClusterSize
	if s.set.Nodes != nil {
		n = s.set.Nodes()
	}
	return int64(max(n, 1))
}
