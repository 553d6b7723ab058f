package registry

import (
	"context"
	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"
)

// The embedded etcd helpers are a copy of those in package source's tests.

var logLevel = slog.LevelError

// The embedded etcd the tests run is package etcdtest's.
type TestEtcd = etcdtest.Server

// MustEtcd starts an embedded etcd that the test's cleanup stops.
func MustEtcd(tb testing.TB) *TestEtcd { return etcdtest.Start(tb) }

var (
	freeLoopbackURL   = etcdtest.FreeLoopbackURL
	mustClient        = etcdtest.MustClient
	unreachableClient = etcdtest.UnreachableClient
)

func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel}))
}

// runUntilCleanup runs run in a goroutine; the test's cleanup cancels it and
// checks it returned nil promptly. stop does the same earlier.
func runUntilCleanup(tb testing.TB, run func(context.Context) error) (stop func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					tb.Errorf("Run: %v", err)
				}
			case <-time.After(10 * time.Second):
				tb.Error("Run did not return within 10s of cancel")
			}
		})
	}
	tb.Cleanup(stop)
	return stop
}
