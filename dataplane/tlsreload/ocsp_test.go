package tlsreload

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ocsp"

	"github.com/sluicegw/sluice/dataplane/internal/testca"
)

// staples records OnStaple calls.
type staples struct {
	mu   sync.Mutex
	errs []error
}

func (s *staples) on(err error, _ time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, err)
}

func (s *staples) last() (error, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.errs) == 0 {
		return nil, 0
	}
	return s.errs[len(s.errs)-1], len(s.errs)
}

// responder is a test CA's OCSP responder over HTTP that can be made to fail.
type responder struct {
	srv    *httptest.Server
	down   atomic.Bool
	status atomic.Int64 // ocsp.Good, Revoked, Unknown
	n      atomic.Int64 // responses signed
}

func newResponder(t *testing.T, ca *testca.CA) *responder {
	t.Helper()
	rs := &responder{}
	h := ca.OCSPResponder(t, time.Hour, func(*big.Int) int { return int(rs.status.Load()) }, &rs.n)
	rs.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rs.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(rs.srv.Close)
	return rs
}

// stapler writes leaf to files and returns a stapling Reloader of them.
func stapler(t *testing.T, leaf testca.Leaf, sp *staples) (*Reloader, string, string) {
	t.Helper()
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	leaf.Write(t, cert, key)
	r, err := New(Settings{CertFile: cert, KeyFile: key, Logger: quiet(), Interval: 10 * time.Millisecond,
		Staple: true, StapleRetry: 20 * time.Millisecond, OnStaple: sp.on})
	if err != nil {
		t.Fatal(err)
	}
	return r, cert, key
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func leafOf(t *testing.T, l testca.Leaf) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(l.CertPEM)
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// handshakeStaple shakes hands with a TLS server serving r and returns the
// OCSP response the client was given (nil: none).
func handshakeStaple(t *testing.T, r *Reloader, ca *testca.CA) []byte {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", r.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_ = c.(*tls.Conn).Handshake()
		c.Close()
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().OCSPResponse
}

// TestStapleGood: a leaf naming a responder gets the responder's "good"
// answer stapled to handshakes, verifiable by the client for that leaf.
func TestStapleGood(t *testing.T) {
	t.Parallel()
	ca := testca.New(t, "stapling CA")
	rs := newResponder(t, ca)
	leaf := ca.OCSPLeaf(t, rs.srv.URL, "127.0.0.1")
	var sp staples
	r, _, _ := stapler(t, leaf, &sp)
	if r.Certificate().OCSPStaple != nil {
		t.Fatal("stapled before Run")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Run(ctx) }()
	waitFor(t, "a staple", func() bool { return r.Certificate().OCSPStaple != nil })
	raw := handshakeStaple(t, r, ca)
	if raw == nil {
		t.Fatal("the client got no OCSP response")
	}
	resp, err := ocsp.ParseResponseForCert(raw, leafOf(t, leaf), ca.Cert())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != ocsp.Good || resp.SerialNumber.Cmp(leaf.Serial) != 0 {
		t.Fatalf("status %d serial %v, want good for %v", resp.Status, resp.SerialNumber, leaf.Serial)
	}
	if err, n := sp.last(); err != nil || n == 0 {
		t.Fatalf("OnStaple: %v after %d calls", err, n)
	}
	// Not asked again before halfway through the response's life.
	asked := rs.n.Load()
	time.Sleep(100 * time.Millisecond)
	if rs.n.Load() != asked {
		t.Fatalf("asked the responder %d more times within its response's life", rs.n.Load()-asked)
	}
}

// TestStapleRetries: while the responder fails, handshakes go on without a
// staple and the request is retried; once it answers, the staple appears.
func TestStapleRetries(t *testing.T) {
	t.Parallel()
	ca := testca.New(t, "stapling CA")
	rs := newResponder(t, ca)
	rs.down.Store(true)
	var sp staples
	r, _, _ := stapler(t, ca.OCSPLeaf(t, rs.srv.URL, "127.0.0.1"), &sp)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Run(ctx) }()
	waitFor(t, "two failed attempts", func() bool { _, n := sp.last(); return n >= 2 })
	if err, _ := sp.last(); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("OnStaple error %v, want the responder's 503", err)
	}
	if handshakeStaple(t, r, ca) != nil {
		t.Fatal("a staple while the responder fails")
	}
	rs.down.Store(false)
	waitFor(t, "a staple once the responder answers", func() bool { return r.Certificate().OCSPStaple != nil })
}

// TestStapleRefused: a revoked or unknown status, or a response for another
// certificate, is never stapled.
func TestStapleRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc   string
		status int
		want   string
	}{
		{"revoked", ocsp.Revoked, "revoked"},
		{"unknown", ocsp.Unknown, "does not know"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			ca := testca.New(t, "stapling CA")
			rs := newResponder(t, ca)
			rs.status.Store(int64(tc.status))
			var sp staples
			r, _, _ := stapler(t, ca.OCSPLeaf(t, rs.srv.URL, "127.0.0.1"), &sp)
			r.staple(context.Background(), time.Now())
			if err, _ := sp.last(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("OnStaple error %v, want %q", err, tc.want)
			}
			if r.Certificate().OCSPStaple != nil {
				t.Fatal("stapled")
			}
		})
	}
	t.Run("signed by another CA", func(t *testing.T) {
		t.Parallel()
		ca, other := testca.New(t, "stapling CA"), testca.New(t, "another CA")
		rs := newResponder(t, other) // answers for ca's leaf, signed by other
		var sp staples
		r, _, _ := stapler(t, ca.OCSPLeaf(t, rs.srv.URL, "127.0.0.1"), &sp)
		r.staple(context.Background(), time.Now())
		if err, _ := sp.last(); err == nil || !strings.Contains(err.Error(), "does not verify") {
			t.Fatalf("OnStaple error %v, want a verification failure", err)
		}
		if r.Certificate().OCSPStaple != nil {
			t.Fatal("stapled")
		}
	})
}

// TestStapleFollowsThePair: a new pair drops the old leaf's staple at once
// and gets its own; a staple past its NextUpdate is dropped when it cannot
// be renewed.
func TestStapleFollowsThePair(t *testing.T) {
	t.Parallel()
	ca := testca.New(t, "stapling CA")
	rs := newResponder(t, ca)
	var sp staples
	first := ca.OCSPLeaf(t, rs.srv.URL, "127.0.0.1")
	r, cert, key := stapler(t, first, &sp)
	ctx := context.Background()
	r.staple(ctx, time.Now())
	if r.Certificate().OCSPStaple == nil {
		t.Fatal("no staple for the first pair")
	}
	second := ca.OCSPLeaf(t, rs.srv.URL, "127.0.0.1")
	second.Write(t, cert, key)
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	if r.Certificate().OCSPStaple != nil {
		t.Fatal("the new pair serves the old leaf's staple")
	}
	r.staple(ctx, time.Now())
	raw := r.Certificate().OCSPStaple
	if raw == nil {
		t.Fatal("no staple for the new pair")
	}
	if _, err := ocsp.ParseResponseForCert(raw, leafOf(t, second), ca.Cert()); err != nil {
		t.Fatalf("the staple is not the new leaf's: %v", err)
	}
	// Two hours on, the one-hour response has expired and a renewal
	// (answering as of now) is refused as expired too: the staple goes.
	r.staple(ctx, time.Now().Add(2*time.Hour))
	if r.Certificate().OCSPStaple != nil {
		t.Fatal("an expired staple is still served")
	}
	if err, _ := sp.last(); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("OnStaple error %v, want expired", err)
	}
}

// TestStapleOff: a leaf naming no responder, or a file without the issuer,
// is served without stapling and nothing is asked.
func TestStapleOff(t *testing.T) {
	t.Parallel()
	ca := testca.New(t, "stapling CA")
	rs := newResponder(t, ca)
	noIssuer := ca.OCSPLeaf(t, rs.srv.URL, "127.0.0.1")
	b, _ := pem.Decode(noIssuer.CertPEM)
	noIssuer.CertPEM = pem.EncodeToMemory(b) // the leaf alone
	for _, tc := range []struct {
		desc string
		leaf testca.Leaf
	}{
		{"no responder", ca.Leaf(t, time.Time{}, time.Time{}, "127.0.0.1")},
		{"no issuer in the file", noIssuer},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var sp staples
			r, _, _ := stapler(t, tc.leaf, &sp)
			if next := r.staple(context.Background(), time.Now()); !next.IsZero() {
				t.Fatalf("a stapling step due at %v", next)
			}
			if _, n := sp.last(); n != 0 || r.Certificate().OCSPStaple != nil {
				t.Fatalf("%d OCSP attempts, staple %v", n, r.Certificate().OCSPStaple != nil)
			}
			if handshakeStaple(t, r, ca) != nil {
				t.Fatal("a staple")
			}
		})
	}
	if rs.n.Load() != 0 {
		t.Fatalf("the responder was asked %d times", rs.n.Load())
	}
}
