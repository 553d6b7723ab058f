package registry

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// The embedded etcd helpers are a copy of those in package source's tests.

var logLevel = slog.LevelError

// TestEtcd is a real etcd server embedded in the test process, on free
// loopback ports and a temporary dir.
type TestEtcd struct {
	tb        testing.TB
	dir       string
	client    url.URL
	peer      url.URL
	Endpoints []string

	mu sync.Mutex
	e  *embed.Etcd
}

// freeLoopbackURL picks a free loopback port below the kernel's ephemeral
// range, so that no port the kernel hands out (":0") lands on the port of an
// etcd that a test stopped and will restart.
func freeLoopbackURL(tb testing.TB) url.URL {
	tb.Helper()
	for range 100 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(20000+rand.IntN(12000)))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		l.Close()
		return url.URL{Scheme: "http", Host: addr}
	}
	tb.Fatal("no free loopback port found")
	return url.URL{}
}

// MustEtcd starts an embedded etcd that the test's cleanup stops. Stop and
// Restart stop it and start it again on the same dir and ports.
func MustEtcd(tb testing.TB) *TestEtcd {
	tb.Helper()
	te := &TestEtcd{tb: tb, dir: tb.TempDir(), client: freeLoopbackURL(tb), peer: freeLoopbackURL(tb)}
	te.Endpoints = []string{te.client.String()}
	te.Restart()
	tb.Cleanup(te.Stop)
	return te
}

// Restart starts the server (again); a no-op when it runs.
func (te *TestEtcd) Restart() {
	te.tb.Helper()
	te.mu.Lock()
	defer te.mu.Unlock()
	if te.e != nil {
		return
	}
	cfg := embed.NewConfig()
	cfg.Name = "test"
	cfg.Dir = te.dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{te.client}, []url.URL{te.client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{te.peer}, []url.URL{te.peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{filepath.Join(te.dir, "etcd.log")}
	cfg.TickMs, cfg.ElectionMs = 10, 100
	var e *embed.Etcd
	var err error
	for attempt := 0; attempt < 50; attempt++ { // the old listeners may take a moment to go
		if e, err = embed.StartEtcd(cfg); err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		te.tb.Fatalf("starting etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		te.tb.Fatalf("etcd: %v", err)
	case <-time.After(20 * time.Second):
		e.Close()
		te.tb.Fatal("etcd not ready within 20s")
	}
	te.e = e
}

// Stop stops the server; a no-op when it is stopped.
func (te *TestEtcd) Stop() {
	te.mu.Lock()
	defer te.mu.Unlock()
	if te.e != nil {
		te.e.Close()
		te.e = nil
	}
}

// Client is a client of the server that the test's cleanup closes.
func (te *TestEtcd) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	return mustClient(tb, te.Endpoints)
}

func mustClient(tb testing.TB, endpoints []string) *clientv3.Client {
	tb.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		tb.Fatalf("etcd client: %v", err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// unreachableClient is a client of a port nobody listens on.
func unreachableClient(tb testing.TB) *clientv3.Client {
	tb.Helper()
	u := freeLoopbackURL(tb)
	return mustClient(tb, []string{u.String()})
}

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
