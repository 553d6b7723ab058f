package sluice

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// loop runs fn every interval on its own goroutine until Close; it
// recovers and logs panics. Start and Close once each.
type loop struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (l *loop) start(ctx context.Context, every time.Duration, name string, logger *slog.Logger, fn func(ctx context.Context)) {
	ctx, l.cancel = context.WithCancel(ctx)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			func() {
				defer func() {
					if r := recover(); r != nil {
						logger.Error(name+" panicked", "panic", r)
					}
				}()
				fn(ctx)
			}()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

func (l *loop) close() {
	if l.cancel != nil {
		l.cancel()
	}
	l.wg.Wait()
}

// EventSource is what EventFeed reads: every namespace's events after an id.
type EventSource interface {
	EventsAfter(ctx context.Context, after int64, limit int) ([]*Event, error)
	LastEventID(ctx context.Context) (int64, error)
}

// EventFeed polls the events every replica stores (whichever stored them)
// and publishes each one to its namespace's stream subscribers, in id
// order, once. It starts after the newest event at Start: a stream client
// gets older ones from Postgres with Last-Event-ID.
type EventFeed struct {
	Source EventSource
	Hub    *Hub
	// Every is the poll interval; zero means 500ms.
	Every  time.Duration
	Logger *slog.Logger

	loop
	last int64
}

// Start runs the feed until ctx ends or Close.
func (f *EventFeed) Start(ctx context.Context) {
	if f.Every <= 0 {
		f.Every = 500 * time.Millisecond
	}
	if f.Logger == nil {
		f.Logger = slog.Default()
	}
	started := false
	f.start(ctx, f.Every, "event feed", f.Logger, func(ctx context.Context) {
		if !started {
			id, err := f.Source.LastEventID(ctx)
			if err != nil {
				return
			}
			f.last, started = id, true
		}
		for {
			evs, err := f.Source.EventsAfter(ctx, f.last, 500)
			if err != nil {
				if ctx.Err() == nil {
					f.Logger.Warn("event feed: reading events", "err", err)
				}
				return
			}
			for _, e := range evs {
				f.Hub.Publish(e.Namespace, StreamEvent, e.ID, e)
				f.last = e.ID
			}
			if len(evs) < 500 {
				return
			}
		}
	})
}

// Close stops the feed and waits for it.
func (f *EventFeed) Close() { f.close() }

// EventPruner deletes events older than Retention every Every.
type EventPruner struct {
	Events EventService
	// Retention is how long events are kept; zero means 30 days.
	Retention time.Duration
	// Every is how often old events are deleted; zero means 1h.
	Every  time.Duration
	Now    func() time.Time
	Logger *slog.Logger

	loop
}

// Start runs the pruner until ctx ends or Close.
func (p *EventPruner) Start(ctx context.Context) {
	if p.Retention <= 0 {
		p.Retention = 30 * 24 * time.Hour
	}
	if p.Every <= 0 {
		p.Every = time.Hour
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
	p.start(ctx, p.Every, "event pruner", p.Logger, func(ctx context.Context) {
		n, err := p.Events.PruneEvents(ctx, p.Now().Add(-p.Retention))
		if err != nil && ctx.Err() == nil {
			p.Logger.Warn("pruning events", "err", err)
		} else if n > 0 {
			p.Logger.Info("events pruned", "deleted", n, "retention", p.Retention)
		}
	})
}

// Close stops the pruner and waits for it.
func (p *EventPruner) Close() { p.close() }

// CanaryStore is what the CanaryAnalyser needs of the canaries.
type CanaryStore interface {
	FindAnalysedCanaries(ctx context.Context) ([]*Canary, error)
	SaveCanaryComparison(ctx context.Context, id int64, c *CanaryComparison) error
	EndCanaryByAnalysis(ctx context.Context, ns string, id int64, promote bool, reason string, c *CanaryComparison) (bool, error)
}

// CanaryAnalyser judges every active canary that has an analysis (DESIGN
// "Canary analysis"). Windows are fixed by the canary: window k covers
// [createdAt + (k-1)·window, createdAt + k·window), judged once it ended
// and Delay passed (the reports of its last step are in). It compares the
// canary cohort with the baseline, placed by their registrations
// (Canary.Side) and judged on the median of per-node rates (Fleet.Cohort):
// a breach aborts the canary, a pass promotes it (onPass
// promote) or holds it, too few requests on either side judges nothing. The
// comparison, with the number of windows judged, is stored with the canary
// in Postgres, so any replica carries on where another stopped; every
// replica may run one: the store ends a canary at most once, and a replica
// judges only windows that started after its Fleet did (before, its stats
// are partial).
type CanaryAnalyser struct {
	Store CanaryStore
	Fleet *Fleet
	// Every is how often canaries are looked at; zero means 1s.
	Every time.Duration
	// Delay is how long after a window ends it is judged; zero means two
	// stats resolutions (a report interval and a step).
	Delay time.Duration
	// Since is when the Fleet started receiving reports; zero means when
	// Start was called.
	Since  time.Time
	Now    func() time.Time
	Logger *slog.Logger

	loop
}

// Start runs the analyser until ctx ends or Close.
func (a *CanaryAnalyser) Start(ctx context.Context) {
	a.defaults()
	a.start(ctx, a.Every, "canary analyser", a.Logger, a.Run)
}

func (a *CanaryAnalyser) defaults() {
	if a.Every <= 0 {
		a.Every = time.Second
	}
	if a.Delay <= 0 {
		a.Delay = 2 * a.Fleet.Resolution()
	}
	if a.Now == nil {
		a.Now = time.Now
	}
	if a.Since.IsZero() {
		a.Since = a.Now()
	}
	if a.Logger == nil {
		a.Logger = slog.Default()
	}
}

// Close stops the analyser and waits for it.
func (a *CanaryAnalyser) Close() { a.close() }

// Run looks at every analysed canary once (Start calls it every Every).
func (a *CanaryAnalyser) Run(ctx context.Context) {
	a.defaults()
	cs, err := a.Store.FindAnalysedCanaries(ctx)
	if err != nil {
		if ctx.Err() == nil {
			a.Logger.Warn("canary analyser: listing canaries", "err", err)
		}
		return
	}
	for _, c := range cs {
		if err := a.judge(ctx, c); err != nil && ctx.Err() == nil {
			a.Logger.Warn("canary analyser", "namespace", c.Namespace, "canary", c.ID, "err", err)
		}
	}
}

func (a *CanaryAnalyser) judge(ctx context.Context, c *Canary) error {
	an := c.Analysis
	w := an.WindowOrDefault()
	now := a.Now()
	cmp := c.Comparison
	if cmp == nil {
		cmp = &CanaryComparison{State: ComparisonWaiting}
	}
	inCanary := c.Side // cohorts from registrations, robust rates (Fleet.Cohort)
	k := int64(now.Add(-a.Delay).Sub(c.CreatedAt) / w)
	cur := c.CreatedAt.Add(time.Duration(max(k, 0)) * w)
	cc, cb := a.Fleet.Cohort(c.Namespace, cur, now, inCanary)
	cmp.Current = &CohortProgress{Canary: cc, Baseline: cb}
	if k < 1 || k <= cmp.Windows {
		return a.Store.SaveCanaryComparison(ctx, c.ID, cmp)
	}
	start := c.CreatedAt.Add(time.Duration(k-1) * w)
	end := start.Add(w)
	if start.Before(a.Since) {
		return a.Store.SaveCanaryComparison(ctx, c.ID, cmp) // another replica saw the whole window
	}
	canary, baseline := a.Fleet.Cohort(c.Namespace, start, end, inCanary)
	verdict, rej, errs, p99, breaches := an.Judge(canary, baseline)
	cmp.Windows, cmp.Verdict = k, verdict
	cmp.WindowStart, cmp.WindowEnd = ptrTime(start.UTC()), ptrTime(end.UTC())
	cmp.Canary, cmp.Baseline = canary, baseline
	cmp.RejectRateIncrease, cmp.ErrorRate5xxIncrease, cmp.P99Ratio, cmp.Breaches = rej, errs, p99, breaches
	switch {
	case verdict == VerdictBreach:
		cmp.State, cmp.DecidedAt = ComparisonBreached, ptrTime(now.UTC())
		var parts []string
		for _, b := range breaches {
			parts = append(parts, fmt.Sprintf("%s %.4g > %.4g", b.Metric, b.Value, b.Limit))
		}
		reason := fmt.Sprintf("canary analysis: window %d (%s to %s) breached: %s (canary %d requests, reject rate %.4g, 5xx rate %.4g, p99 %.4gs; baseline %d requests, reject rate %.4g, 5xx rate %.4g, p99 %.4gs)",
			k, start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339), strings.Join(parts, ", "),
			canary.Requests, canary.RejectRate, canary.ErrorRate5xx, canary.P99Seconds,
			baseline.Requests, baseline.RejectRate, baseline.ErrorRate5xx, baseline.P99Seconds)
		ended, err := a.Store.EndCanaryByAnalysis(ctx, c.Namespace, c.ID, false, reason, cmp)
		if ended {
			a.Logger.Warn("canary aborted by analysis", "namespace", c.Namespace, "version", c.Version, "reason", reason)
		}
		return err
	case verdict == VerdictPass && an.OnPass == OnPassPromote:
		cmp.State, cmp.DecidedAt = ComparisonPassed, ptrTime(now.UTC())
		reason := fmt.Sprintf("canary analysis: window %d (%s to %s) passed (canary %d requests, reject rate %.4g, 5xx rate %.4g, p99 %.4gs; baseline %d requests, reject rate %.4g, 5xx rate %.4g, p99 %.4gs)",
			k, start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339),
			canary.Requests, canary.RejectRate, canary.ErrorRate5xx, canary.P99Seconds,
			baseline.Requests, baseline.RejectRate, baseline.ErrorRate5xx, baseline.P99Seconds)
		ended, err := a.Store.EndCanaryByAnalysis(ctx, c.Namespace, c.ID, true, reason, cmp)
		if ended {
			a.Logger.Info("canary promoted by analysis", "namespace", c.Namespace, "version", c.Version)
		}
		return err
	case verdict == VerdictPass:
		cmp.State = ComparisonHeld
	default:
		cmp.State = ComparisonRunning
	}
	return a.Store.SaveCanaryComparison(ctx, c.ID, cmp)
}

func ptrTime(t time.Time) *time.Time { return &t }

// PublicationSource is what PublicationFeed reads.
type PublicationSource interface {
	RecentPublications(ctx context.Context, after int64) ([]*Publication, error)
}

// PublicationFeed polls the publications and publishes each one that is new
// or changed state (pending → published, a failed attempt) to its
// namespace's stream subscribers as a `publication` message.
type PublicationFeed struct {
	Source PublicationSource
	Hub    *Hub
	// Every is the poll interval; zero means 1s.
	Every  time.Duration
	Logger *slog.Logger

	loop
}

// Start runs the feed until ctx ends or Close.
func (f *PublicationFeed) Start(ctx context.Context) {
	if f.Every <= 0 {
		f.Every = time.Second
	}
	if f.Logger == nil {
		f.Logger = slog.Default()
	}
	seen := map[int64]string{}
	var floor int64 // publications at or below it, not pending, are settled
	started := false
	f.start(ctx, f.Every, "publication feed", f.Logger, func(ctx context.Context) {
		ps, err := f.Source.RecentPublications(ctx, floor)
		if err != nil {
			if ctx.Err() == nil {
				f.Logger.Warn("publication feed", "err", err)
			}
			return
		}
		for _, p := range ps {
			fp := fmt.Sprintf("%s/%d/%s", p.State, p.Attempts, p.LastError)
			if seen[p.ID] == fp {
				continue
			}
			seen[p.ID] = fp
			if started {
				f.Hub.Publish(p.Namespace, StreamPublication, 0, p)
			}
		}
		started = true
		// Forget settled publications well below the newest.
		if n := len(ps); n > 0 && ps[n-1].ID-100 > floor {
			floor = ps[n-1].ID - 100
			for id := range seen {
				if id <= floor {
					delete(seen, id)
				}
			}
		}
	})
}

// Close stops the feed and waits for it.
func (f *PublicationFeed) Close() { f.close() }
