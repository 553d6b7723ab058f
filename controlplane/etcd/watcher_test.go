package etcd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/etcd"
	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
)

// journal is one ordered record of what a NodeWatcher did: the history
// calls it made (a NodeHistory) and what it logged (a slog.Handler).
type journal struct {
	mu      sync.Mutex
	entries []string
}

func (j *journal) add(format string, args ...any) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries = append(j.entries, fmt.Sprintf(format, args...))
	return nil
}

func (j *journal) snapshot() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.entries...)
}

func (j *journal) SyncNodes(_ context.Context, ns string, live []api.NodeStatus, _ time.Time) error {
	ids := make([]string, len(live))
	for i, s := range live {
		ids[i] = s.NodeID
	}
	return j.add("sync %s %v", ns, ids)
}
func (j *journal) RecordNode(_ context.Context, ns string, s api.NodeStatus, _ time.Time) error {
	return j.add("record %s %s", ns, s.NodeID)
}
func (j *journal) RecordNodeGone(_ context.Context, ns, id string, _ time.Time) error {
	return j.add("gone %s %s", ns, id)
}
func (j *journal) TouchNodes(_ context.Context, ns string, _, _ time.Time) error {
	return j.add("touch %s", ns)
}
func (j *journal) FindNodeRecords(context.Context, string, time.Time) ([]*sluice.NodeRecord, error) {
	return nil, nil
}
func (j *journal) FindRollout(context.Context, string, int64) (*sluice.Rollout, error) {
	return nil, nil
}

func (j *journal) Enabled(context.Context, slog.Level) bool { return true }
func (j *journal) Handle(_ context.Context, r slog.Record) error {
	msg := "log " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		msg += " " + a.Key + "=" + a.Value.String()
		return true
	})
	return j.add("%s", msg)
}
func (j *journal) WithAttrs([]slog.Attr) slog.Handler { return j }
func (j *journal) WithGroup(string) slog.Handler      { return j }

// waitEntry waits until an entry after index from starts with prefix and
// contains sub, and returns its index.
func (j *journal) waitEntry(t *testing.T, from int, prefix, sub string) int {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		es := j.snapshot()
		for i := from; i < len(es); i++ {
			if strings.HasPrefix(es[i], prefix) && strings.Contains(es[i], sub) {
				return i
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no entry %q…%q after #%d in %d entries; last: %q", prefix, sub, from, len(es), es[max(0, len(es)-5):])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNodeWatcherSilentWatch: when etcd goes away the watch falls silent
// (clientv3 retries it without a word). The node watcher takes that for a
// broken watch and stops refreshing LastSeen until it has listed again, so
// that nodes are not seen alive through an outage. Its own loop never
// noticed, and kept touching every node while etcd was down.
func TestNodeWatcherSilentWatch(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	c, err := etcd.NewClient(srv.Endpoints)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	keys := api.Keys{Prefix: "/test-watcher"}
	lease, err := c.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(api.NodeStatus{Namespace: "shop", Version: 1})
	if _, err := c.Put(ctx, keys.Node("shop", "gw-1"), string(b), clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	j := &journal{}
	w := etcd.NewNodeWatcher(etcd.WatcherSettings{Client: c, History: j, Keys: keys, Logger: slog.New(j),
		Namespaces: func(context.Context) ([]string, error) { return []string{"shop"}, nil },
		Rescan:     time.Hour, Heartbeat: 50 * time.Millisecond, Progress: 100 * time.Millisecond,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, OpTimeout: time.Second})
	w.Start(ctx)
	defer w.Close()
	i := j.waitEntry(t, 0, "sync shop", "gw-1")
	j.waitEntry(t, i, "touch shop", "")

	srv.Stop()
	silent := j.waitEntry(t, i, "log node watcher: listing again", "watch silent")
	srv.Restart()
	relisted := j.waitEntry(t, silent, "sync shop", "gw-1")
	for _, e := range j.snapshot()[silent:relisted] {
		if strings.HasPrefix(e, "touch") {
			t.Fatalf("LastSeen refreshed while etcd was unreachable: %q in %q", e, j.snapshot()[silent:relisted])
		}
	}
	j.waitEntry(t, relisted, "touch shop", "")
}
