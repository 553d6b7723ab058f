package tlsreload

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicegw/sluice/dataplane/internal/testca"
)

type reloads struct {
	mu   sync.Mutex
	errs []error
	leaf []*x509.Certificate
}

func (r *reloads) on(err error, leaf *x509.Certificate) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
	r.leaf = append(r.leaf, leaf)
}

func (r *reloads) n() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.errs)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// mustReloader writes leaf to a temporary pair of files and loads it.
func mustReloader(tb testing.TB, leaf testca.Leaf, rl *reloads) (*Reloader, string, string) {
	tb.Helper()
	dir := tb.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	leaf.Write(tb, cert, key)
	r, err := New(Settings{CertFile: cert, KeyFile: key, Logger: quiet(), OnReload: rl.on})
	if err != nil {
		tb.Fatal(err)
	}
	return r, cert, key
}

func TestNewRefusesBadPairs(t *testing.T) {
	t.Parallel()
	ca := testca.New(t, "test CA")
	good := ca.Leaf(t, time.Time{}, time.Time{}, "localhost")
	other := ca.Leaf(t, time.Time{}, time.Time{}, "localhost")
	expired := ca.Leaf(t, time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour), "localhost")
	future := ca.Leaf(t, time.Now().Add(24*time.Hour), time.Now().Add(48*time.Hour), "localhost")
	tests := []struct {
		desc      string
		cert, key []byte
		missing   bool
		want      string
	}{
		{desc: "missing files", missing: true, want: "no such file"},
		{desc: "key of another certificate", cert: good.CertPEM, key: other.KeyPEM, want: "private key does not match public key"},
		{desc: "not pem", cert: []byte("hello"), key: good.KeyPEM, want: "failed to find any PEM data in certificate input"},
		{desc: "key file holds a certificate", cert: good.CertPEM, key: good.CertPEM, want: "loading"},
		{desc: "expired", cert: expired.CertPEM, key: expired.KeyPEM, want: "expired at"},
		{desc: "not yet valid", cert: future.CertPEM, key: future.KeyPEM, want: "is not valid before"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cert, key := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
			if !tt.missing {
				if err := os.WriteFile(cert, tt.cert, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(key, tt.key, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := New(Settings{CertFile: cert, KeyFile: key, Logger: quiet()})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want one containing %q", err, tt.want)
			}
		})
	}
	if _, err := New(Settings{CertFile: "x"}); err == nil || !strings.Contains(err.Error(), "both") {
		t.Fatalf("no key file: %v", err)
	}
}

func TestCheckReloadsAndKeepsTheOldPairOnBadInput(t *testing.T) {
	t.Parallel()
	ca := testca.New(t, "test CA")
	first := ca.Leaf(t, time.Time{}, time.Time{}, "localhost")
	var rl reloads
	r, cert, key := mustReloader(t, first, &rl)
	serial := func() string { return r.Certificate().Leaf.SerialNumber.String() }

	if err := r.Check(); err != nil || rl.n() != 0 {
		t.Fatalf("unchanged files: err %v, %d reloads", err, rl.n())
	}
	// A certificate written without its key yet: refused, the first served.
	second := ca.Leaf(t, time.Time{}, time.Time{}, "localhost")
	if err := os.WriteFile(cert, second.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Check(); err == nil || serial() != first.Serial.String() {
		t.Fatalf("half-written pair: err %v, serving %s", err, serial())
	}
	if err := r.Check(); err != nil || rl.n() != 1 {
		t.Fatalf("the refused pair is tried once per change: err %v, %d attempts", err, rl.n())
	}
	// The key follows: loaded.
	if err := os.WriteFile(key, second.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Check(); err != nil || serial() != second.Serial.String() {
		t.Fatalf("whole pair: err %v, serving %s, want %s", err, serial(), second.Serial)
	}
	// A file removed (mid-replace): an error, the pair served stays.
	if err := os.Remove(key); err != nil {
		t.Fatal(err)
	}
	if err := r.Check(); err == nil || serial() != second.Serial.String() {
		t.Fatalf("key removed: err %v, serving %s", err, serial())
	}
	// Replaced atomically by rename (a new inode): loaded.
	third := ca.Leaf(t, time.Time{}, time.Time{}, "localhost")
	third.Write(t, cert, key)
	if err := r.Check(); err != nil || serial() != third.Serial.String() {
		t.Fatalf("renamed pair: err %v, serving %s", err, serial())
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if len(rl.errs) != 3 || rl.errs[0] == nil || rl.errs[1] != nil || rl.errs[2] != nil {
		t.Fatalf("OnReload calls: %v", rl.errs)
	}
	if rl.leaf[0].SerialNumber.Cmp(first.Serial) != 0 || rl.leaf[2].SerialNumber.Cmp(third.Serial) != 0 {
		t.Fatalf("OnReload leaves: %v %v", rl.leaf[0].SerialNumber, rl.leaf[2].SerialNumber)
	}
}

// TestHandshakesFollowReloads serves TLS on a real socket with
// ServerConfig: a connection opened before a reload keeps working with the
// old certificate, new ones get the new one, and the configuration refuses
// TLS 1.1 and offers h2.
func TestHandshakesFollowReloads(t *testing.T) {
	t.Parallel()
	ca := testca.New(t, "test CA")
	first := ca.Leaf(t, time.Time{}, time.Time{}, "localhost", "127.0.0.1")
	var rl reloads
	r, cert, key := mustReloader(t, first, &rl)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", r.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }() // echo
		}
	}()
	dial := func(cfg *tls.Config) (*tls.Conn, error) {
		if cfg == nil {
			cfg = &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", NextProtos: []string{"h2", "http/1.1"}}
		}
		return tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), cfg)
	}
	echo := func(c *tls.Conn) error {
		if _, err := c.Write([]byte("ping")); err != nil {
			return err
		}
		b := make([]byte, 4)
		_, err := io.ReadFull(c, b)
		return err
	}
	old, err := dial(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	st := old.ConnectionState()
	if st.NegotiatedProtocol != "h2" || st.PeerCertificates[0].SerialNumber.Cmp(first.Serial) != 0 {
		t.Fatalf("first: alpn %q serial %v", st.NegotiatedProtocol, st.PeerCertificates[0].SerialNumber)
	}
	second := ca.Leaf(t, time.Time{}, time.Time{}, "localhost")
	second.Write(t, cert, key)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.s.Interval = 10 * time.Millisecond
	go func() { _ = r.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for rl.n() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // waiting for the poller, not for time to pass
	}
	c, err := dial(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(second.Serial) != 0 {
		t.Fatalf("after reload: serial %v, want %v", got, second.Serial)
	}
	if err := echo(old); err != nil {
		t.Fatalf("connection opened before the reload: %v", err)
	}
	if err := echo(c); err != nil {
		t.Fatal(err)
	}
	_, err = dial(&tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11})
	if err == nil || !strings.Contains(err.Error(), "protocol version") {
		t.Fatalf("TLS 1.1 client: %v", err)
	}
	_, err = dial(&tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MaxVersion: tls.VersionTLS12,
		CipherSuites: []uint16{tls.TLS_RSA_WITH_AES_128_GCM_SHA256}})
	var alert tls.AlertError
	if err == nil || !(errors.As(err, &alert) || strings.Contains(err.Error(), "handshake failure")) {
		t.Fatalf("RSA key exchange client: %v", err)
	}
}
