// Package etcdtest runs a real etcd server embedded in a test process, on
// free loopback ports and a temporary directory, that a test can stop and
// restart on the same directory and ports; the gateway's and the control
// plane's tests share it. Only tests import it: the gateway binary must
// never link the etcd server (package source has a test that checks).
package etcdtest

import (
	"errors"
	"math/rand/v2"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Server is an embedded etcd. Safe for concurrent use.
type Server struct {
	tb     testing.TB
	dir    string
	client url.URL
	peer   url.URL
	tls    *TLS
	// Endpoints are the client URLs, for clientv3.Config.
	Endpoints []string

	mu sync.Mutex
	e  *embed.Etcd
}

// FreeLoopbackURL picks a free loopback port below the kernel's ephemeral
// range, so that no port the kernel hands out (":0") lands on the port of an
// etcd that a test stopped and will restart.
func FreeLoopbackURL(tb testing.TB) url.URL {
	tb.Helper()
	u, err := PickLoopbackURL()
	if err != nil {
		tb.Fatal(err)
	}
	return u
}

// PickLoopbackURL is FreeLoopbackURL for callers without a testing.TB
// (a TestMain). Each port is handed out once per process, so that two picks
// made before either is bound (a gateway's --listen and --admin) differ. The
// port is free when picked; a caller that binds it later should pick again
// if another process took it meanwhile.
func PickLoopbackURL() (url.URL, error) {
	handedMu.Lock()
	defer handedMu.Unlock()
	for range 200 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(20000+rand.IntN(12000)))
		if handed[addr] {
			continue
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		l.Close()
		handed[addr] = true
		return url.URL{Scheme: "http", Host: addr}, nil
	}
	return url.URL{}, errors.New("no free loopback port found")
}

// handed are the addresses PickLoopbackURL gave out.
var (
	handedMu sync.Mutex
	handed   = map[string]bool{}
)

// TLS are the server's PEM files for StartTLS.
type TLS struct {
	// CertFile and KeyFile are the server's certificate and key.
	CertFile, KeyFile string
	// TrustedCAFile, when set, makes clients present a certificate signed
	// by this CA.
	TrustedCAFile string
}

// Start starts a server that the test's cleanup stops.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return start(tb, nil)
}

// StartTLS starts a server that serves clients over TLS only (https
// endpoints), and that the test's cleanup stops.
func StartTLS(tb testing.TB, t TLS) *Server {
	tb.Helper()
	return start(tb, &t)
}

func start(tb testing.TB, t *TLS) *Server {
	tb.Helper()
	s := &Server{tb: tb, dir: tb.TempDir(), client: FreeLoopbackURL(tb), peer: FreeLoopbackURL(tb), tls: t}
	if t != nil {
		s.client.Scheme = "https"
	}
	s.Endpoints = []string{s.client.String()}
	s.Restart()
	tb.Cleanup(s.Stop)
	return s
}

// Addr is the client address, host:port.
func (s *Server) Addr() string { return s.client.Host }

// Restart starts the server (again) on the same directory and ports; a no-op
// when it runs.
func (s *Server) Restart() {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.e != nil {
		return
	}
	cfg := embed.NewConfig()
	cfg.Name = "test"
	cfg.Dir = filepath.Join(s.dir, "data")
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{s.client}, []url.URL{s.client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{s.peer}, []url.URL{s.peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{filepath.Join(s.dir, "etcd.log")}
	cfg.TickMs, cfg.ElectionMs = 10, 100
	cfg.MaxRequestBytes = 16 << 20 // as sluice-admin's embedded etcd: large rule sets
	if s.tls != nil {
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: s.tls.CertFile, KeyFile: s.tls.KeyFile,
			TrustedCAFile: s.tls.TrustedCAFile, ClientCertAuth: s.tls.TrustedCAFile != ""}
	}
	var e *embed.Etcd
	var err error
	for range 100 { // the old listeners may take a moment to go
		if e, err = embed.StartEtcd(cfg); err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		s.tb.Fatalf("starting etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		s.tb.Fatalf("etcd: %v", err)
	case <-time.After(20 * time.Second):
		e.Close()
		s.tb.Fatal("etcd not ready within 20s")
	}
	s.e = e
}

// Stop stops the server; a no-op when it is stopped.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.e != nil {
		// As a crash does: the server stops at once. (Close alone waits
		// up to 5 s for open streams, and meanwhile keeps answering the
		// watches of clients that are meant to see etcd gone.)
		s.e.Server.HardStop()
		s.e.Close()
		s.e = nil
	}
}

// Client is a client of the server that the test's cleanup closes.
func (s *Server) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	return MustClient(tb, s.Endpoints)
}

// MustClient is a client of endpoints that the test's cleanup closes.
func MustClient(tb testing.TB, endpoints []string) *clientv3.Client {
	tb.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		tb.Fatalf("etcd client: %v", err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// UnreachableClient is a client of a port nobody listens on.
func UnreachableClient(tb testing.TB) *clientv3.Client {
	tb.Helper()
	u := FreeLoopbackURL(tb)
	return MustClient(tb, []string{u.String()})
}
