// Package etcdwatch is the list/watch Follower the gateway's etcd source and
// node registry share: list at revision R, watch from R+1, re-list at once on
// compaction, and after a broken or silent watch back off (jittered,
// doubling, capped) and list again. It hands whole lists and batches of
// events to callbacks on its own goroutine.
package etcdwatch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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

// Follower runs the list-at-R / watch-from-R+1 protocol over one or two
// specs, handing whole lists and batches of events to its callbacks, which
// run on the Follower's goroutine.
type Follower struct {
	Client                 *clientv3.Client
	Specs                  []Spec // one or two
	OpTimeout, Heartbeat   time.Duration
	MinBackoff, MaxBackoff time.Duration
	Now                    func() time.Time
	// Listed gets the pairs of each spec at revision rev.
	Listed func(ctx context.Context, rev int64, kvs [][]*mvccpb.KeyValue)
	// Changed gets the events of one or more watch responses, ordered by
	// mod revision; rev is the newest header revision (evs may be empty).
	Changed func(ctx context.Context, rev int64, evs []*clientv3.Event)
	// Broken is told why a list or watch failed, before a backoff.
	Broken func(err error)
}

// Run follows until ctx ends and then returns nil. With startRev > 0 the first list was done by
// the caller at that revision, and the watch starts from startRev+1.
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
		f.Broken(err)
		t := time.NewTimer(Backoff(failures, f.MinBackoff, f.MaxBackoff))
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
	lctx, cancel := context.WithTimeout(ctx, f.OpTimeout)
	defer cancel()
	ops := make([]clientv3.Op, len(f.Specs))
	for i, s := range f.Specs {
		if s.Prefix {
			ops[i] = clientv3.OpGet(s.Key, clientv3.WithPrefix())
		} else {
			ops[i] = clientv3.OpGet(s.Key)
		}
	}
	resp, err := f.Client.Txn(lctx).Then(ops...).Commit()
	if err != nil {
		return 0, fmt.Errorf("listing %s: %w", f.Specs[0].Key, err)
	}
	kvs := make([][]*mvccpb.KeyValue, len(resp.Responses))
	for i, r := range resp.Responses {
		kvs[i] = r.GetResponseRange().GetKvs()
	}
	rev := resp.Header.GetRevision()
	f.Listed(ctx, rev, kvs)
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
	var chans [2]clientv3.WatchChan
	for i, s := range f.Specs {
		opts := []clientv3.OpOption{clientv3.WithRev(rev)}
		if s.Prefix {
			opts = append(opts, clientv3.WithPrefix())
		}
		chans[i] = f.Client.Watch(wctx, s.Key, opts...)
	}
	tick := time.NewTicker(f.Heartbeat)
	defer tick.Stop()
	lastHeard := f.Now()
	var probing atomic.Bool
	for {
		var batch []clientv3.WatchResponse
		var resp clientv3.WatchResponse
		var ok bool
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if f.Now().Sub(lastHeard) > 3*f.Heartbeat {
				return ErrWatchSilent
			}
			if probing.CompareAndSwap(false, true) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer probing.Store(false)
					pctx, cancel := context.WithTimeout(wctx, f.Heartbeat)
					defer cancel()
					_ = f.Client.RequestProgress(pctx)
				}()
			}
			continue
		case resp, ok = <-chans[0]:
		case resp, ok = <-chans[1]:
		}
		// Take whatever else is ready too, so the newest state wins.
		for ok && len(batch) < 64 {
			batch = append(batch, resp)
			select {
			case resp, ok = <-chans[0]:
				continue
			case resp, ok = <-chans[1]:
				continue
			default:
			}
			break
		}
		if len(batch) > 0 {
			lastHeard = f.Now()
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
			f.Changed(ctx, newest, evs)
		}
		switch {
		case werr != nil && errors.Is(werr, rpctypes.ErrCompacted):
			return fmt.Errorf("watching after revision %d: %w", rev, ErrCompacted)
		case werr != nil:
			return fmt.Errorf("watching %s: %w", f.Specs[0].Key, werr)
		case !ok:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("watching %s: %w", f.Specs[0].Key, ErrWatchClosed)
		}
	}
}
