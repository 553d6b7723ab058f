package etcdwatch_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/etcdwatch"
	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
)

// recorder keeps what a Follower's callbacks saw: the value of every key.
type recorder struct {
	mu     sync.Mutex
	vals   map[string]string
	lists  int
	broken []error
	fail   error // returned by the next Changed, then cleared
}

func (r *recorder) settings(c *clientv3.Client, specs ...etcdwatch.Spec) etcdwatch.Settings {
	return etcdwatch.Settings{
		Client: c, Specs: specs,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		Listed: func(_ context.Context, _ int64, kvs [][]*mvccpb.KeyValue) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.lists++
			r.vals = map[string]string{}
			for _, l := range kvs {
				for _, kv := range l {
					r.vals[string(kv.Key)] = string(kv.Value)
				}
			}
			return nil
		},
		Changed: func(_ context.Context, _ int64, evs []*clientv3.Event) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			if err := r.fail; err != nil && len(evs) > 0 {
				r.fail = nil
				return err
			}
			for _, ev := range evs {
				if ev.Type == clientv3.EventTypeDelete {
					delete(r.vals, string(ev.Kv.Key))
				} else {
					r.vals[string(ev.Kv.Key)] = string(ev.Kv.Value)
				}
			}
			return nil
		},
		Broken: func(err error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.broken = append(r.broken, err)
		},
	}
}

func (r *recorder) waitFor(t *testing.T, what string, ok func(r *recorder) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		done := ok(r)
		r.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func run(t *testing.T, s etcdwatch.Settings) {
	t.Helper()
	f, err := etcdwatch.New(s)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx, 0) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// TestFollowerManySpecs follows more than two specs (the old Follower held
// two watch channels and dropped the others' events) with every duration
// left zero (a zero Heartbeat made NewTicker panic).
func TestFollowerManySpecs(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	if _, err := c.Put(ctx, "/t/a", "1"); err != nil {
		t.Fatal(err)
	}
	r := &recorder{}
	specs := []etcdwatch.Spec{{Key: "/t/a"}, {Key: "/t/b"}, {Key: "/t/p/", Prefix: true}, {Key: "/t/d"}}
	s := r.settings(c, specs...)
	s.MinBackoff, s.MaxBackoff = 0, 0
	run(t, s)
	r.waitFor(t, "the first list", func(r *recorder) bool { return r.lists == 1 && r.vals["/t/a"] == "1" })
	for i, k := range []string{"/t/b", "/t/p/x", "/t/p/y", "/t/d", "/t/other"} {
		if _, err := c.Put(ctx, k, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Delete(ctx, "/t/a"); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"/t/b": "0", "/t/p/x": "1", "/t/p/y": "2", "/t/d": "3"}
	r.waitFor(t, fmt.Sprint(want), func(r *recorder) bool { return fmt.Sprint(r.vals) == fmt.Sprint(want) })
}

// TestFollowerCallbackError: an error from Changed counts as a broken watch:
// Broken is told, and the Follower lists again, which finds the value the
// callback refused.
func TestFollowerCallbackError(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	c := srv.Client(t)
	r := &recorder{fail: errors.New("history unavailable")}
	run(t, r.settings(c, etcdwatch.Spec{Key: "/t/k"}))
	r.waitFor(t, "the first list", func(r *recorder) bool { return r.lists == 1 })
	if _, err := c.Put(context.Background(), "/t/k", "v"); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "a second list holding the value", func(r *recorder) bool { return r.lists == 2 && r.vals["/t/k"] == "v" })
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.broken) != 1 || !contains(r.broken[0], "history unavailable") {
		t.Fatalf("broken = %v, want the callback's error once", r.broken)
	}
}

func contains(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }

// TestNewRequires: a Follower without a client, a key or callbacks is an
// error that names what is missing, not a panic in Run.
func TestNewRequires(t *testing.T) {
	t.Parallel()
	c := etcdtest.UnreachableClient(t)
	ok := func(context.Context, int64, [][]*mvccpb.KeyValue) error { return nil }
	changed := func(context.Context, int64, []*clientv3.Event) error { return nil }
	for _, tc := range []struct {
		desc string
		s    etcdwatch.Settings
		want string
	}{
		{"no client", etcdwatch.Settings{Specs: []etcdwatch.Spec{{Key: "/k"}}, Listed: ok, Changed: changed}, "no client"},
		{"no key", etcdwatch.Settings{Client: c, Listed: ok, Changed: changed}, "no key"},
		{"no callbacks", etcdwatch.Settings{Client: c, Specs: []etcdwatch.Spec{{Key: "/k"}}}, "Listed and Changed"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if _, err := etcdwatch.New(tc.s); err == nil || !contains(err, tc.want) {
				t.Fatalf("New: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// TestFollowerTick: Tick runs while the watch does; its error counts as a
// broken watch (Broken, then a new list).
func TestFollowerTick(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	r := &recorder{}
	var mu sync.Mutex
	ticks := 0
	s := r.settings(srv.Client(t), etcdwatch.Spec{Key: "/t/k"})
	s.TickEvery = 20 * time.Millisecond
	s.Tick = func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		ticks++
		if ticks == 2 {
			return errors.New("touch failed")
		}
		return nil
	}
	run(t, s)
	r.waitFor(t, "a list after the failed tick", func(r *recorder) bool {
		return r.lists >= 2 && len(r.broken) == 1 && contains(r.broken[0], "touch failed")
	})
	r.waitFor(t, "ticks after the new list", func(*recorder) bool {
		mu.Lock()
		defer mu.Unlock()
		return ticks >= 3
	})
}
