// Package etcd projects the control plane's published versions into etcd and
// reads what the gateway nodes report there.
//
// The Publisher drains the Postgres outbox: for each namespace, in version
// order, it reads the ruleset key, then writes the new api.Published value in
// a transaction that compares the key's mod revision with the one it read, and
// records the etcd revision of the write. While etcd is down the publication
// stays pending and is retried with exponential backoff; a later version of a
// namespace waits for the earlier one, and an older version is never written
// over a newer one. With several sluice-admin replicas, the outbox's
// per-namespace advisory lock lets exactly one of them publish a namespace at
// a time.
package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

// Settings configures a Publisher. Client and Outbox are required; every
// other zero value has the meaning documented on its field.
type Settings struct {
	Client *clientv3.Client
	Outbox sluice.Outbox
	// Keys lays out the etcd keys; the zero value uses api.DefaultEtcdPrefix.
	Keys api.Keys
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// PollInterval is how often the outbox is scanned without a wake-up
	// (publications from other replicas, retries); zero means 2s.
	PollInterval time.Duration
	// OpTimeout bounds each etcd call; zero means 5s.
	OpTimeout time.Duration
	// MinBackoff and MaxBackoff bound the retry delay after a failed
	// attempt, which doubles with each attempt; zero means 250ms and 30s.
	MinBackoff, MaxBackoff time.Duration
	// Observe, if set, is called after every attempt: result is
	// "published", "retry" or "failed"; lag is the time since the version was
	// created (for "published").
	Observe func(ns string, result string, lag time.Duration)
}

// Publisher is the outbox → etcd loop. Start it once; Close stops it. Wake is
// safe to call from any goroutine at any time, before Start and after Close
// too.
type Publisher struct {
	s      Settings
	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// NewPublisher returns a Publisher over s, not yet started.
func NewPublisher(s Settings) *Publisher {
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	if s.PollInterval == 0 {
		s.PollInterval = 2 * time.Second
	}
	if s.OpTimeout == 0 {
		s.OpTimeout = 5 * time.Second
	}
	if s.MinBackoff == 0 {
		s.MinBackoff = 250 * time.Millisecond
	}
	if s.MaxBackoff == 0 {
		s.MaxBackoff = 30 * time.Second
	}
	return &Publisher{s: s, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// Wake makes the loop scan the outbox now.
func (p *Publisher) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Start runs the loop in a goroutine until ctx ends or Close is called.
func (p *Publisher) Start(ctx context.Context) {
	p.once.Do(func() {
		ctx, p.cancel = context.WithCancel(ctx)
		go p.run(ctx)
	})
}

// Close stops the loop and waits for it. A publication being written is
// either finished or left pending.
func (p *Publisher) Close() {
	started := false
	p.once.Do(func() { close(p.done) }) // never started: nothing to wait for
	if p.cancel != nil {
		started = true
		p.cancel()
	}
	if started {
		<-p.done
	}
}

func (p *Publisher) run(ctx context.Context) {
	defer close(p.done)
	defer func() {
		if r := recover(); r != nil {
			p.s.Logger.Error("publisher panicked", "panic", r)
		}
	}()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-timer.C:
		}
		next := p.RunOnce(ctx)
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// RunOnce publishes every due publication and returns how long to wait
// before the next scan. The loop calls it; tests may too.
func (p *Publisher) RunOnce(ctx context.Context) time.Duration {
	wait := p.s.PollInterval
	names, err := p.s.Outbox.PendingNamespaces(ctx)
	if err != nil {
		if ctx.Err() == nil {
			p.s.Logger.Warn("publisher: listing the outbox", "err", err)
		}
		return min(wait, time.Second)
	}
	for _, ns := range names {
		if d, retry := p.drain(ctx, ns); retry {
			wait = min(wait, d)
		}
	}
	return max(wait, 10*time.Millisecond)
}

// drain publishes a namespace's due publications in order and stops at the
// first that fails, reporting when it should be retried.
func (p *Publisher) drain(ctx context.Context, ns string) (time.Duration, bool) {
	for ctx.Err() == nil {
		claim, err := p.s.Outbox.ClaimPublication(ctx, ns)
		if err != nil {
			if ctx.Err() == nil {
				p.s.Logger.Warn("publisher: claiming", "namespace", ns, "err", err)
			}
			return time.Second, true
		}
		if claim == nil {
			return 0, false
		}
		out := p.publish(ctx, claim.Version(), claim.Publication())
		if err := claim.Finish(ctx, out); err != nil {
			p.s.Logger.Warn("publisher: recording outcome", "namespace", ns, "err", err)
			return time.Second, true
		}
		v := claim.Version()
		switch {
		case out.Err == nil:
			p.s.Logger.Info("published", "namespace", ns, "version", v.Number, "revision", out.Revision)
			p.observe(ns, "published", p.s.Now().Sub(v.CreatedAt))
		case out.Final:
			p.s.Logger.Error("publication failed", "namespace", ns, "version", v.Number, "err", out.Err)
			p.observe(ns, "failed", 0)
		default:
			p.s.Logger.Warn("publication will be retried", "namespace", ns, "version", v.Number, "retryAt", out.RetryAt, "err", out.Err)
			p.observe(ns, "retry", 0)
			return max(out.RetryAt.Sub(p.s.Now()), 0), true
		}
	}
	return 0, false
}

func (p *Publisher) observe(ns, result string, lag time.Duration) {
	if p.s.Observe != nil {
		p.s.Observe(ns, result, lag)
	}
}

// publishedValue is api.Published with the rules as the stored JSON, which
// the version's document already is.
type publishedValue struct {
	Version     int64           `json:"version"`
	Checksum    string          `json:"checksum"`
	PublishedAt time.Time       `json:"publishedAt"`
	PublishedBy string          `json:"publishedBy"`
	Rules       json.RawMessage `json:"rules"`
}

// errMoved is a compare that failed: the key changed between read and write.
var errMoved = errors.New("the ruleset key changed between read and write")

// publish writes version v to etcd unless the key already holds it (a write
// whose outcome was not recorded) or a newer one.
func (p *Publisher) publish(ctx context.Context, v *sluice.Version, pub *sluice.Publication) sluice.PublishOutcome {
	key := p.s.Keys.RuleSet(v.Namespace)
	retry := func(err error) sluice.PublishOutcome {
		d := p.s.MinBackoff << min(pub.Attempts, 16)
		d = min(d, p.s.MaxBackoff)
		d = d/2 + rand.N(d/2+1) // jitter, so replicas do not retry in step
		if errors.Is(err, errMoved) {
			d = 0
		}
		return sluice.PublishOutcome{Err: err, RetryAt: p.s.Now().Add(d)}
	}
	opCtx, cancel := context.WithTimeout(ctx, p.s.OpTimeout)
	defer cancel()
	get, err := p.s.Client.Get(opCtx, key)
	if err != nil {
		return retry(fmt.Errorf("reading %s: %w", key, err))
	}
	cmp := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	if len(get.Kvs) > 0 {
		kv := get.Kvs[0]
		var cur struct {
			Version  int64  `json:"version"`
			Checksum string `json:"checksum"`
		}
		_ = json.Unmarshal(kv.Value, &cur) // an unreadable value is overwritten
		switch {
		case cur.Version == v.Number && cur.Checksum == v.Checksum:
			return sluice.PublishOutcome{Revision: kv.ModRevision}
		case cur.Version >= v.Number:
			return sluice.PublishOutcome{Err: fmt.Errorf("etcd holds version %d (%s); version %d is not written over it", cur.Version, cur.Checksum, v.Number), Final: true}
		}
		cmp = clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)
	}
	value, err := json.Marshal(publishedValue{Version: v.Number, Checksum: v.Checksum, PublishedAt: p.s.Now().UTC(),
		PublishedBy: v.CreatedBy, Rules: v.Document})
	if err != nil {
		return sluice.PublishOutcome{Err: fmt.Errorf("encoding version %d: %w", v.Number, err), Final: true}
	}
	resp, err := p.s.Client.Txn(opCtx).If(cmp).Then(clientv3.OpPut(key, string(value))).Commit()
	if err != nil {
		return retry(fmt.Errorf("writing %s: %w", key, err))
	}
	if !resp.Succeeded {
		return retry(errMoved)
	}
	return sluice.PublishOutcome{Revision: resp.Header.Revision}
}
