// Package etcd projects the control plane's published versions into etcd and
// reads what the gateway nodes report there.
//
// The Publisher drains the Postgres outbox: for each namespace, in the order
// the operations were queued, it reads the ruleset key, then writes the new
// api.Published value in a transaction that compares the key's mod revision
// with the one it read, and records the etcd revision and time of the write.
// Canary operations go the same way: a canary writes its api.Canary value
//
//	{"version": N, "selector": {"zone": "a"}, "published": {<api.Published of N>}}
//
// to the canary key (in a transaction comparing the ruleset key's revision,
// refusing when the ruleset already holds N or newer); a promotion writes N to
// the ruleset key and deletes the canary key in one transaction; an abort
// deletes the canary key. While etcd is down the publication
// stays pending and is retried with exponential backoff; a later version of a
// namespace waits for the earlier one, and an older version is never written
// over a newer one. With several sluice-admin replicas, the outbox's
// per-namespace advisory lock lets exactly one of them publish a namespace at
// a time.
//
// With a Signer, every value is written as an api.Signer envelope bound to
// its key, and what the publisher reads back is verified with the signer's
// keys (all of them, so that values signed before a key rotation count as
// its own): a ruleset value that is not validly signed was not written by the
// control plane, so its version number means nothing. It is never a reason
// to refuse a publication; it is overwritten (comparing its mod revision) by
// the next one, and, with Repair set, by the namespace's current version as
// soon as the publisher sees it.
//
// The package also runs an etcd server in process (StartEmbedded, embed.go:
// sluice-admin's --embedded-etcd, for the one-machine stack and for tests),
// so importing it links the whole etcd server (go.etcd.io/etcd/server/v3)
// into the binary. That is why only the control plane imports it: the
// gateway's module reaches etcd with the client alone.
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

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

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
	// Signer signs every value written; nil writes them unsigned (nodes
	// then need --insecure-accept-unsigned).
	Signer *api.Signer
	// Namespaces and Current, when both set with Signer, repair forged
	// writes: every poll the publisher checks the ruleset key of each
	// namespace Namespaces lists and rewrites a value that is not validly
	// signed with the version Current returns (the newest one published to
	// the ruleset key, with its document; nil when none).
	Namespaces func(ctx context.Context) ([]string, error)
	Current    func(ctx context.Context, ns string) (*sluice.Version, error)
	// Tracer, if set, records a span per outbox operation, with its
	// signing and etcd writes (publishtrace.go).
	Tracer trace.Tracer
}

// Publisher is the outbox → etcd loop. Start it once; Close stops it. Wake is
// safe to call from any goroutine at any time, before Start and after Close
// too.
type Publisher struct {
	s        Settings
	verifier *api.Verifier    // the signer's keys; nil without a Signer
	checked  map[string]int64 // namespace → mod revision of the ruleset value verified (or written) last
	repaired time.Time        // when the ruleset keys were last checked
	wake     chan struct{}
	cancel   context.CancelFunc
	done     chan struct{}
	once     sync.Once
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
	p := &Publisher{s: s, wake: make(chan struct{}, 1), done: make(chan struct{}), checked: map[string]int64{}}
	if s.Signer != nil {
		p.verifier = s.Signer.Verifier()
	}
	return p
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
	if now := p.s.Now(); now.Sub(p.repaired) >= p.s.PollInterval {
		// At the poll interval, not at every wake-up: checking costs a
		// database read and an etcd read per namespace.
		p.repaired = now
		p.repair(ctx, names)
	}
	return max(wait, 10*time.Millisecond)
}

// repair rewrites every ruleset key that holds a value not validly signed
// with the namespace's current version (see Settings.Current). Namespaces
// with pending publications are left to them. A key is read in full only
// when its mod revision changed since it was last verified.
func (p *Publisher) repair(ctx context.Context, pending []string) {
	if p.s.Namespaces == nil || p.s.Current == nil || p.s.Signer == nil {
		return
	}
	names, err := p.s.Namespaces(ctx)
	if err != nil {
		if ctx.Err() == nil {
			p.s.Logger.Warn("publisher: listing namespaces to check etcd", "err", err)
		}
		return
	}
	busy := map[string]bool{}
	for _, ns := range pending {
		busy[ns] = true
	}
	for _, ns := range names {
		if busy[ns] || ctx.Err() != nil {
			continue
		}
		p.repairOne(ctx, ns)
	}
}

func (p *Publisher) repairOne(ctx context.Context, ns string) {
	ctx, cancel := context.WithTimeout(ctx, p.s.OpTimeout)
	defer cancel()
	key := p.s.Keys.RuleSet(ns)
	keys, err := p.s.Client.Get(ctx, key, clientv3.WithKeysOnly())
	if err != nil || len(keys.Kvs) == 0 || keys.Kvs[0].ModRevision == p.checked[ns] {
		return
	}
	h, err := p.rulesetHead(ctx, ns)
	if err != nil || h.kv == nil {
		return
	}
	if !h.forged {
		p.checked[ns] = h.kv.ModRevision
		return
	}
	v, err := p.s.Current(ctx, ns)
	if err != nil || v == nil {
		p.s.Logger.Error("etcd holds a ruleset value not signed by this control plane, and there is no current version to rewrite it with",
			"namespace", ns, "key", key, "revision", h.kv.ModRevision, "err", errors.Join(h.err, err))
		if err == nil {
			p.checked[ns] = h.kv.ModRevision // said once; the next publication writes over it
		}
		return
	}
	p.s.Logger.Error("etcd holds a ruleset value not signed by this control plane; rewriting the current version",
		"namespace", ns, "key", key, "revision", h.kv.ModRevision, "version", v.Number, "err", h.err)
	out := p.publishRuleSet(ctx, v, false, func(err error) sluice.PublishOutcome { return sluice.PublishOutcome{Err: err} })
	if out.Err != nil {
		p.s.Logger.Warn("publisher: repairing the ruleset key", "namespace", ns, "err", out.Err)
		return
	}
	p.checked[ns] = out.Revision
	p.observe(ns, "repaired", 0)
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
		sctx, span := p.startPublish(ctx, claim.Version(), claim.Publication())
		out := p.publish(sctx, claim.Version(), claim.Publication())
		endPublish(span, out)
		if err := claim.Finish(ctx, out); err != nil {
			p.s.Logger.Warn("publisher: recording outcome", "namespace", ns, "err", err)
			return time.Second, true
		}
		v := claim.Version()
		if k := claim.Publication().Kind; out.Err == nil && out.Revision != 0 && k != sluice.PublishCanary && k != sluice.PublishAbort {
			p.checked[ns] = out.Revision // our own write: no need to read it back
		}
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

// errMoved is a compare that failed: the key changed between read and write.
var errMoved = errors.New("the ruleset key changed between read and write")

// publish runs one outbox operation on version v.
func (p *Publisher) publish(ctx context.Context, v *sluice.Version, pub *sluice.Publication) sluice.PublishOutcome {
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
	switch pub.Kind {
	case sluice.PublishCanary:
		return p.publishCanary(opCtx, v, pub, retry)
	case sluice.PublishAbort:
		key := p.s.Keys.Canary(v.Namespace)
		var resp *clientv3.DeleteResponse
		err := p.spanned(opCtx, spanWrite, func(ctx context.Context) (err error) {
			resp, err = p.s.Client.Delete(ctx, key)
			return err
		}, attribute.String("etcd.key", key))
		if err != nil {
			return retry(fmt.Errorf("deleting %s: %w", key, err))
		}
		return sluice.PublishOutcome{Revision: resp.Header.Revision, At: p.s.Now()}
	case sluice.PublishRuleSet, sluice.PublishPromote, "":
		return p.publishRuleSet(opCtx, v, pub.Kind == sluice.PublishPromote, retry)
	}
	return sluice.PublishOutcome{Err: fmt.Errorf("unknown outbox operation %q", pub.Kind), Final: true}
}

// head is what the ruleset key holds: its version and checksum, or forged
// (with the reason in err) when it is not validly signed, so that its
// claims mean nothing. kv is nil when the key is absent.
type head struct {
	version  int64
	checksum string
	kv       *mvccpb.KeyValue
	forged   bool
	err      error
}

// rulesetHead reads the version and checksum held by the ruleset key,
// verifying its signature when the publisher signs.
func (p *Publisher) rulesetHead(ctx context.Context, ns string) (head, error) {
	key := p.s.Keys.RuleSet(ns)
	get, err := p.s.Client.Get(ctx, key)
	if err != nil {
		return head{}, fmt.Errorf("reading %s: %w", key, err)
	}
	if len(get.Kvs) == 0 {
		return head{}, nil
	}
	h := head{kv: get.Kvs[0]}
	payload, _, err := p.verifier.Open(key, h.kv.Value)
	if err != nil {
		h.forged, h.err = true, err
		return h, nil
	}
	var cur struct {
		Version  int64  `json:"version"`
		Checksum string `json:"checksum"`
	}
	_ = json.Unmarshal(payload, &cur) // an unreadable value is overwritten
	h.version, h.checksum = cur.Version, cur.Checksum
	return h, nil
}

// encode is the value written under key: v signed when the publisher signs
// (in a span of ctx's trace).
func (p *Publisher) encode(ctx context.Context, key string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil || p.s.Signer == nil {
		return b, err
	}
	var signed []byte
	err = p.spanned(ctx, spanSign, func(context.Context) (err error) {
		signed, err = p.s.Signer.Sign(key, b)
		return err
	}, attribute.String("etcd.key", key), attribute.String("sluice.signing_key", p.s.Signer.KeyID()))
	return signed, err
}

// commit runs txn, the write of key, in a span of ctx's trace.
func (p *Publisher) commit(ctx context.Context, key string, txn clientv3.Txn) (*clientv3.TxnResponse, error) {
	var resp *clientv3.TxnResponse
	err := p.spanned(ctx, spanWrite, func(context.Context) (err error) {
		resp, err = txn.Commit()
		return err
	}, attribute.String("etcd.key", key))
	return resp, err
}

func (p *Publisher) value(v *sluice.Version, at time.Time) api.PublishedValue {
	return api.PublishedValue{Version: v.Number, Checksum: v.Checksum, PublishedAt: at, PublishedBy: v.CreatedBy, Rules: v.Document}
}

// publishRuleSet writes version v to the ruleset key unless the key already
// holds it (a write whose outcome was not recorded) or a newer one. A
// promotion deletes the canary key in the same transaction.
func (p *Publisher) publishRuleSet(ctx context.Context, v *sluice.Version, promote bool, retry func(error) sluice.PublishOutcome) sluice.PublishOutcome {
	key := p.s.Keys.RuleSet(v.Namespace)
	h, err := p.rulesetHead(ctx, v.Namespace)
	if err != nil {
		return retry(err)
	}
	cur, sum, kv := h.version, h.checksum, h.kv
	if h.forged {
		p.s.Logger.Error("etcd holds a ruleset value not signed by this control plane; writing over it",
			"namespace", v.Namespace, "revision", kv.ModRevision, "version", v.Number, "err", h.err)
	}
	var ops []clientv3.Op
	if promote {
		ops = append(ops, clientv3.OpDelete(p.s.Keys.Canary(v.Namespace)))
	}
	cmp := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	if kv != nil {
		switch {
		case cur == v.Number && sum == v.Checksum:
			if !promote {
				return sluice.PublishOutcome{Revision: kv.ModRevision}
			}
			// Written, but perhaps not the canary key's deletion.
			resp, err := p.commit(ctx, key, p.s.Client.Txn(ctx).Then(ops...))
			if err != nil {
				return retry(fmt.Errorf("ending canary of %s: %w", v.Namespace, err))
			}
			return sluice.PublishOutcome{Revision: resp.Header.Revision}
		case cur >= v.Number:
			return sluice.PublishOutcome{Err: fmt.Errorf("etcd holds version %d (%s); version %d is not written over it", cur, sum, v.Number), Final: true}
		}
		cmp = clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)
	}
	at := p.s.Now().UTC().Truncate(time.Microsecond) // as Postgres records it
	value, err := p.encode(ctx, key, p.value(v, at))
	if err != nil {
		return sluice.PublishOutcome{Err: fmt.Errorf("encoding version %d: %w", v.Number, err), Final: true}
	}
	ops = append(ops, clientv3.OpPut(key, string(value)))
	resp, err := p.commit(ctx, key, p.s.Client.Txn(ctx).If(cmp).Then(ops...))
	if err != nil {
		return retry(fmt.Errorf("writing %s: %w", key, err))
	}
	if !resp.Succeeded {
		return retry(errMoved)
	}
	return sluice.PublishOutcome{Revision: resp.Header.Revision, At: at}
}

// publishCanary writes version v and the selector to the canary key, unless
// the ruleset key already holds v or a newer version (the canary would be
// over before it began). The ruleset key's revision is compared so that the
// check holds at the write.
func (p *Publisher) publishCanary(ctx context.Context, v *sluice.Version, pub *sluice.Publication, retry func(error) sluice.PublishOutcome) sluice.PublishOutcome {
	rkey, ckey := p.s.Keys.RuleSet(v.Namespace), p.s.Keys.Canary(v.Namespace)
	h, err := p.rulesetHead(ctx, v.Namespace)
	if err != nil {
		return retry(err)
	}
	cur, sum, kv := h.version, h.checksum, h.kv
	cmp := clientv3.Compare(clientv3.CreateRevision(rkey), "=", 0)
	if kv != nil {
		if cur >= v.Number {
			return sluice.PublishOutcome{Err: fmt.Errorf("etcd holds version %d (%s); version %d is not a canary over it", cur, sum, v.Number), Final: true}
		}
		cmp = clientv3.Compare(clientv3.ModRevision(rkey), "=", kv.ModRevision)
	}
	at := p.s.Now().UTC().Truncate(time.Microsecond) // as Postgres records it
	canary, err := api.EncodeCanary(pub.Selector, p.value(v, at))
	if err != nil {
		return sluice.PublishOutcome{Err: err, Final: true}
	}
	value, err := p.encode(ctx, ckey, json.RawMessage(canary))
	if err != nil {
		return sluice.PublishOutcome{Err: fmt.Errorf("encoding canary version %d: %w", v.Number, err), Final: true}
	}
	resp, err := p.commit(ctx, ckey, p.s.Client.Txn(ctx).If(cmp).Then(clientv3.OpPut(ckey, string(value))))
	if err != nil {
		return retry(fmt.Errorf("writing %s: %w", ckey, err))
	}
	if !resp.Succeeded {
		return retry(errMoved)
	}
	return sluice.PublishOutcome{Revision: resp.Header.Revision, At: at}
}

// CurrentVersion returns the Settings.Current of versions: the newest
// version of a namespace whose latest operation wrote it to the ruleset key
// (a publication or a promotion, landed), with its document; nil when none
// of the newest 500 is.
func CurrentVersion(versions sluice.VersionService) func(ctx context.Context, ns string) (*sluice.Version, error) {
	return func(ctx context.Context, ns string) (*sluice.Version, error) {
		var before int64
		for range 10 {
			vs, _, err := versions.FindVersions(ctx, sluice.VersionFilter{Namespace: ns, Before: before, Limit: 50})
			if err != nil || len(vs) == 0 {
				return nil, err
			}
			for _, v := range vs {
				p := v.Publication
				if p != nil && p.State == sluice.PublicationPublished &&
					(p.Kind == sluice.PublishRuleSet || p.Kind == sluice.PublishPromote || p.Kind == "") {
					return versions.FindVersion(ctx, ns, v.Number)
				}
			}
			before = vs[len(vs)-1].Number
		}
		return nil, nil
	}
}
