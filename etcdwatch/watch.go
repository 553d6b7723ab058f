// Package etcdwatch is the one list/watch loop of Sluice, which the gateway
// (rule-set source, overrides, node count) and the control plane (node
// history) share: list every key spec at one revision R, watch them from
// R+1, list again at once when the watch fell behind a compaction, and after
// a failed list, a broken or silent watch (no answer to a progress request
// within three Heartbeats) or a callback's error, back off (jittered,
// doubling, capped) and list again. It hands whole lists and batches of
// events to callbacks on its own goroutine.
//
// The module depends on the etcd client only; its etcdtest package, which
// links the etcd server, is for tests.
package etcdwatch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

// Spec is one key (or prefix) a Follower lists and watches.
type Spec struct {
	Key    string
	Prefix bool
}

// Why a watch ended; Run handles them, callbacks may see them in Broken.
var (
	ErrCompacted   = errors.New("watch revision compacted")
	ErrWatchClosed = errors.New("watch closed")
	ErrWatchSilent = errors.New("watch silent: no answer to progress requests")
)

// Settings configures a Follower. Client, Specs, Listed and Changed are
// required; every other zero value has the meaning documented on its field.
type Settings struct {
	// Client is the etcd client; the Follower never closes it.
	Client *clientv3.Client
	// Specs are the keys and prefixes followed, listed in one transaction
	// (so at one revision); at least one.
	Specs []Spec
	// OpTimeout bounds each list; zero means 5s.
	OpTimeout time.Duration
	// Heartbeat is how often the watch is probed with a progress request; a
	// watch silent for three Heartbeats counts as broken. Zero means 5s.
	Heartbeat time.Duration
	// MinBackoff and MaxBackoff bound the wait before listing again after a
	// failure, which doubles per consecutive failure and is jittered; zero
	// means 250ms and 30s (a MaxBackoff below MinBackoff is MinBackoff).
	MinBackoff, MaxBackoff time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Listed gets the pairs of each spec (in Specs' order) at revision rev.
	// An error counts as a failed list: Broken, backoff, list again.
	Listed func(ctx context.Context, rev int64, kvs [][]*mvccpb.KeyValue) error
	// Changed gets the events of one or more watch responses, ordered by
	// mod revision; rev is the newest header revision (evs may be empty).
	// An error ends the watch as a broken one: Broken, backoff, list again.
	Changed func(ctx context.Context, rev int64, evs []*clientv3.Event) error
	// Broken, when set, is told why a list or watch failed, before a
	// backoff.
	Broken func(err error)
	// Tick, when set with TickEvery, is called every TickEvery while the
	// watch runs (never while etcd is unreachable, or before the first
	// list); an error ends the watch as a broken one.
	Tick      func(ctx context.Context) error
	TickEvery time.Duration
}

// Follower runs the list-at-R / watch-from-R+1 protocol over its specs. Make
// it with New; Run it once.
type Follower struct {
	s Settings
}

// New returns a Follower over s with its defaults filled in, or an error
// naming the required setting that is missing.
func New(s Settings) (*Follower, error) {
	switch {
	case s.Client == nil:
		return nil, errors.New("etcd follower: no client")
	case len(s.Specs) == 0:
		return nil, errors.New("etcd follower: no key to follow")
	case s.Listed == nil || s.Changed == nil:
		return nil, errors.New("etcd follower: Listed and Changed are required")
	}
	s.Specs = append([]Spec(nil), s.Specs...)
	if s.OpTimeout <= 0 {
		s.OpTimeout = 5 * time.Second
	}
	if s.Heartbeat <= 0 {
		s.Heartbeat = 5 * time.Second
	}
	if s.MinBackoff <= 0 {
		s.MinBackoff = 250 * time.Millisecond
	}
	if s.MaxBackoff <= 0 {
		s.MaxBackoff = 30 * time.Second
	}
	s.MaxBackoff = max(s.MaxBackoff, s.MinBackoff)
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Broken == nil {
		s.Broken = func(error) {}
	}
	return &Follower{s: s}, nil
}

// Run follows until ctx ends and then returns nil. With startRev > 0 the
// first list was done by the caller at that revision, and the watch starts
// from startRev+1.
func (f *Follower) Run(ctx context.Context, startRev int64) error {
	failures := 0
	for {
		rev, err := startRev, error(nil)
		startRev = 0
		if rev == 0 {
			rev, err = f.list(ctx)
		}
		if err == nil {
			failures = 0
			err = f.watch(ctx, rev)
		}
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrCompacted) {
			continue // list again at once: the watch fell behind, etcd is fine
		}
		failures++
		f.s.Broken(err)
		t := time.NewTimer(Backoff(failures, f.s.MinBackoff, f.s.MaxBackoff))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// Backoff is the wait after the n-th consecutive failure (n ≥ 1): min·2^(n-1)
// capped at max, of which a random half is taken off.
func Backoff(n int, minD, maxD time.Duration) time.Duration {
	d := minD
	for i := 1; i < n && d < maxD; i++ {
		d *= 2
	}
	d = min(d, maxD)
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(half)+1))
}

func (f *Follower) list(ctx context.Context) (int64, error) {
	lctx, cancel := context.WithTimeout(ctx, f.s.OpTimeout)
	defer cancel()
	ops := make([]clientv3.Op, len(f.s.Specs))
	for i, s := range f.s.Specs {
		if s.Prefix {
			ops[i] = clientv3.OpGet(s.Key, clientv3.WithPrefix())
		} else {
			ops[i] = clientv3.OpGet(s.Key)
		}
	}
	resp, err := f.s.Client.Txn(lctx).Then(ops...).Commit()
	if err != nil {
		return 0, fmt.Errorf("listing %s: %w", f.s.Specs[0].Key, err)
	}
	kvs := make([][]*mvccpb.KeyValue, len(resp.Responses))
	for i, r := range resp.Responses {
		kvs[i] = r.GetResponseRange().GetKvs()
	}
	rev := resp.Header.GetRevision()
	if err := f.s.Listed(ctx, rev, kvs); err != nil {
		return 0, fmt.Errorf("after listing %s at revision %d: %w", f.s.Specs[0].Key, rev, err)
	}
	return rev, nil
}

// followerIDs gives each watch its own gRPC stream (clientv3 shares one
// stream among watches whose contexts carry the same metadata), so that
// another watch on the same client cannot hold back its progress answers.
var followerIDs atomic.Int64

// watch watches the specs after a list at rev until the watch fails. It asks
// etcd for the events from rev on and drops those at or before rev, which
// amounts to watching from rev+1; etcd answers progress requests only for
// watches whose start revision it has reached, which a watch from rev+1 of an
// idle key never is.
func (f *Follower) watch(ctx context.Context, rev int64) error {
	wctx := metadata.AppendToOutgoingContext(clientv3.WithRequireLeader(ctx), "sluice-watch", strconv.FormatInt(followerIDs.Add(1), 10))
	wctx, cancel := context.WithCancel(wctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	tick := time.NewTicker(f.s.Heartbeat)
	defer tick.Stop()
	var ticks <-chan time.Time // nil: never
	if f.s.Tick != nil && f.s.TickEvery > 0 {
		t := time.NewTicker(f.s.TickEvery)
		defer t.Stop()
		ticks = t.C
	}
	// cases are ctx.Done, the heartbeat, Tick's ticker, then one watch
	// channel per spec; ready are the watch channels and a default, to take
	// what else is ready.
	const first = 3
	n := len(f.s.Specs)
	cases := make([]reflect.SelectCase, first, first+n)
	cases[0] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}
	cases[1] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(tick.C)}
	cases[2] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ticks)}
	for _, s := range f.s.Specs {
		opts := []clientv3.OpOption{clientv3.WithRev(rev)}
		if s.Prefix {
			opts = append(opts, clientv3.WithPrefix())
		}
		ch := f.s.Client.Watch(wctx, s.Key, opts...)
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
	}
	ready := append(append([]reflect.SelectCase(nil), cases[first:]...), reflect.SelectCase{Dir: reflect.SelectDefault})
	lastHeard := f.s.Now()
	var probing atomic.Bool
	for {
		chosen, v, ok := reflect.Select(cases)
		switch chosen {
		case 0:
			return ctx.Err()
		case 1:
			if f.s.Now().Sub(lastHeard) > 3*f.s.Heartbeat {
				return ErrWatchSilent
			}
			if probing.CompareAndSwap(false, true) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer probing.Store(false)
					pctx, cancel := context.WithTimeout(wctx, f.s.Heartbeat)
					defer cancel()
					_ = f.s.Client.RequestProgress(pctx)
				}()
			}
			continue
		case 2:
			if err := f.s.Tick(ctx); err != nil {
				return fmt.Errorf("watching %s: %w", f.s.Specs[0].Key, err)
			}
			continue
		}
		// Take whatever else is ready too, so the newest state wins.
		var batch []clientv3.WatchResponse
		for ok && len(batch) < 64 {
			batch = append(batch, v.Interface().(clientv3.WatchResponse))
			c, next, nextOK := reflect.Select(ready)
			if c == n {
				break // nothing else ready
			}
			v, ok = next, nextOK
		}
		if len(batch) > 0 {
			lastHeard = f.s.Now()
		}
		var evs []*clientv3.Event
		var newest int64
		var werr error
		for _, r := range batch {
			if err := r.Err(); err != nil {
				werr = err
				break
			}
			for _, ev := range r.Events {
				if ev.Kv.ModRevision > rev {
					evs = append(evs, ev)
				}
			}
			newest = max(newest, r.Header.GetRevision())
		}
		sort.SliceStable(evs, func(i, j int) bool { return evs[i].Kv.ModRevision < evs[j].Kv.ModRevision })
		if len(evs) > 0 || newest > 0 {
			if err := f.s.Changed(ctx, newest, evs); err != nil {
				return fmt.Errorf("after watching %s to revision %d: %w", f.s.Specs[0].Key, newest, err)
			}
		}
		switch {
		case werr != nil && errors.Is(werr, rpctypes.ErrCompacted):
			return fmt.Errorf("watching after revision %d: %w", rev, ErrCompacted)
		case werr != nil:
			return fmt.Errorf("watching %s: %w", f.s.Specs[0].Key, werr)
		case !ok:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("watching %s: %w", f.s.Specs[0].Key, ErrWatchClosed)
		}
	}
}
