package registry

// This file is a copy of the list/watch follower of package source
// (dataplane/source/etcd.go); keep the two in step.

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

// watchSpec is one key (or prefix) a follower lists and watches.
type watchSpec struct {
	key    string
	prefix bool
}

var (
	errCompacted   = errors.New("watch revision compacted")
	errWatchClosed = errors.New("watch closed")
	errWatchSilent = errors.New("watch silent: no answer to progress requests")
)

// follower runs the list-at-R / watch-from-R+1 protocol over one or two
// specs, handing whole lists and batches of events to its callbacks, which
// run on the follower's goroutine.
type follower struct {
	client                 *clientv3.Client
	specs                  []watchSpec // one or two
	opTimeout, heartbeat   time.Duration
	minBackoff, maxBackoff time.Duration
	now                    func() time.Time
	// listed gets the pairs of each spec at revision rev.
	listed func(ctx context.Context, rev int64, kvs [][]*mvccpb.KeyValue)
	// changed gets the events of one or more watch responses, ordered by
	// mod revision; rev is the newest header revision (evs may be empty).
	changed func(ctx context.Context, rev int64, evs []*clientv3.Event)
	// broken is told why a list or watch failed, before a backoff.
	broken func(err error)
}

// run follows until ctx ends. With startRev > 0 the first list was done by
// the caller at that revision, and the watch starts from startRev+1.
func (f *follower) run(ctx context.Context, startRev int64) error {
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
		if errors.Is(err, errCompacted) {
			continue // list again at once: the watch fell behind, etcd is fine
		}
		failures++
		f.broken(err)
		t := time.NewTimer(backoff(failures, f.minBackoff, f.maxBackoff))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// backoff is the wait after the n-th consecutive failure (n ≥ 1): min·2^(n-1)
// capped at max, of which a random half is taken off.
func backoff(n int, minD, maxD time.Duration) time.Duration {
	d := minD
	for i := 1; i < n && d < maxD; i++ {
		d *= 2
	}
	d = min(d, maxD)
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(half)+1))
}

func (f *follower) list(ctx context.Context) (int64, error) {
	lctx, cancel := context.WithTimeout(ctx, f.opTimeout)
	defer cancel()
	ops := make([]clientv3.Op, len(f.specs))
	for i, s := range f.specs {
		if s.prefix {
			ops[i] = clientv3.OpGet(s.key, clientv3.WithPrefix())
		} else {
			ops[i] = clientv3.OpGet(s.key)
		}
	}
	resp, err := f.client.Txn(lctx).Then(ops...).Commit()
	if err != nil {
		return 0, fmt.Errorf("listing %s: %w", f.specs[0].key, err)
	}
	kvs := make([][]*mvccpb.KeyValue, len(resp.Responses))
	for i, r := range resp.Responses {
		kvs[i] = r.GetResponseRange().GetKvs()
	}
	rev := resp.Header.GetRevision()
	f.listed(ctx, rev, kvs)
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
func (f *follower) watch(ctx context.Context, rev int64) error {
	wctx := metadata.AppendToOutgoingContext(clientv3.WithRequireLeader(ctx), "sluice-watch", strconv.FormatInt(followerIDs.Add(1), 10))
	wctx, cancel := context.WithCancel(wctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	var chans [2]clientv3.WatchChan
	for i, s := range f.specs {
		opts := []clientv3.OpOption{clientv3.WithRev(rev)}
		if s.prefix {
			opts = append(opts, clientv3.WithPrefix())
		}
		chans[i] = f.client.Watch(wctx, s.key, opts...)
	}
	tick := time.NewTicker(f.heartbeat)
	defer tick.Stop()
	lastHeard := f.now()
	var probing atomic.Bool
	for {
		var batch []clientv3.WatchResponse
		var resp clientv3.WatchResponse
		var ok bool
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if f.now().Sub(lastHeard) > 3*f.heartbeat {
				return errWatchSilent
			}
			if probing.CompareAndSwap(false, true) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer probing.Store(false)
					pctx, cancel := context.WithTimeout(wctx, f.heartbeat)
					defer cancel()
					_ = f.client.RequestProgress(pctx)
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
			lastHeard = f.now()
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
			f.changed(ctx, newest, evs)
		}
		switch {
		case werr != nil && errors.Is(werr, rpctypes.ErrCompacted):
			return fmt.Errorf("watching after revision %d: %w", rev, errCompacted)
		case werr != nil:
			return fmt.Errorf("watching %s: %w", f.specs[0].key, werr)
		case !ok:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("watching %s: %w", f.specs[0].key, errWatchClosed)
		}
	}
}
