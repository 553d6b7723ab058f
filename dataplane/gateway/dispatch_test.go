package gateway

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/sluicegw/sluice/dataplane/source"
)

// testCert returns a certificate for 127.0.0.1 signed by a CA made for the
// test, and a pool holding that CA.
func testCert(tb testing.TB) (tls.Certificate, *x509.CertPool) {
	tb.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

// startTLS starts a node serving rules on a cleartext and a TLS listener;
// stop cancels it and returns Serve's error.
func startTLS(tb testing.TB, rules string) (plain, secure string, roots *x509.CertPool, stop func() error) {
	tb.Helper()
	n := New(Config{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", ShutdownTimeout: 5 * time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	if err := n.Apply(context.Background(), source.Update{Data: []byte(rules), Version: 1, Source: "test"}); err != nil {
		tb.Fatal(err)
	}
	ls, err := n.Listen()
	if err != nil {
		tb.Fatal(err)
	}
	cert, roots := testCert(tb)
	if ls.TLS, err = n.ListenTLS("127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Serve(ctx, ls) }()
	var once sync.Once
	var serveErr error
	stop = func() error {
		once.Do(func() { cancel(); serveErr = <-done })
		return serveErr
	}
	tb.Cleanup(func() { _ = stop() })
	return "http://" + ls.Traffic.Addr().String(), "https://" + ls.TLS.Addr().String(), roots, stop
}

// TestDispatchByProtocol: one node serves HTTP/1.1 and h2c on its cleartext
// listener and HTTP/1.1 and HTTP/2 (by ALPN) on its TLS listener, every
// request through the same request path.
func TestDispatchByProtocol(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok "+r.Header.Get("X-Forwarded-Proto"))
	}))
	t.Cleanup(up.Close)
	plain, secure, roots, _ := startTLS(t, fmt.Sprintf(`namespace: dispatch
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}
`, up.URL))
	h2c := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	tlsH2 := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}
	tlsH1 := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, NextProtos: []string{"http/1.1"}}}
	noALPN := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
	tests := []struct {
		desc      string
		rt        http.RoundTripper
		base      string
		wantProto string
		wantBody  string
	}{
		{"cleartext HTTP/1.1", &http.Transport{}, plain, "HTTP/1.1", "ok http"},
		{"h2c with prior knowledge", h2c, plain, "HTTP/2.0", "ok http"},
		{"TLS, ALPN h2", tlsH2, secure, "HTTP/2.0", "ok https"},
		{"TLS, ALPN http/1.1", tlsH1, secure, "HTTP/1.1", "ok https"},
		{"TLS without ALPN", noALPN, secure, "HTTP/1.1", "ok https"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			c := &http.Client{Transport: tc.rt, Timeout: 10 * time.Second}
			for i := range 3 { // the same connection, kept alive
				resp, err := c.Get(tc.base + "/x")
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.Proto != tc.wantProto || resp.StatusCode != 200 || string(body) != tc.wantBody {
					t.Fatalf("request %d: %s %d %q, want %s 200 %q", i, resp.Proto, resp.StatusCode, body, tc.wantProto, tc.wantBody)
				}
				if resp.Header.Get("X-Request-Id") == "" {
					t.Fatal("no X-Request-Id: not served by the request path")
				}
			}
			if ci, ok := tc.rt.(interface{ CloseIdleConnections() }); ok {
				ci.CloseIdleConnections()
			}
		})
	}
}

// TestDrainEveryProtocol: requests in flight on HTTP/1.1, h2c and TLS h2
// when the node is told to stop all complete, and Serve returns nil.
func TestDrainEveryProtocol(t *testing.T) {
	started := make(chan struct{}, 3)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		time.Sleep(500 * time.Millisecond)
		_, _ = io.WriteString(w, "done")
	}))
	t.Cleanup(up.Close)
	plain, secure, roots, stop := startTLS(t, fmt.Sprintf(`namespace: drain
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}
`, up.URL))
	h2c := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	clients := []struct {
		desc string
		rt   http.RoundTripper
		url  string
	}{
		{"HTTP/1.1", &http.Transport{}, plain + "/slow"},
		{"h2c", h2c, plain + "/slow"},
		{"TLS h2", &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}, secure + "/slow"},
	}
	// A client that connected but sent nothing yet is not waited for: the
	// drain closes its connection.
	silent, err := net.Dial("tcp", strings.TrimPrefix(plain, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	errs := make(chan error, len(clients))
	for _, c := range clients {
		go func() {
			resp, err := (&http.Client{Transport: c.rt, Timeout: 10 * time.Second}).Get(c.url)
			if err != nil {
				errs <- fmt.Errorf("%s: %w", c.desc, err)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != "done" {
				errs <- fmt.Errorf("%s: %d %q", c.desc, resp.StatusCode, body)
				return
			}
			errs <- nil
		}()
	}
	for range clients {
		<-started
	}
	if err := stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	_ = silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the silent connection after the drain: %v, want EOF", err)
	}
}

// TestForeignTLSListener: a Listeners.TLS the node did not make
// (tls.NewListener's) serves HTTP/2, and closes an HTTP/1.1 connection,
// which the event loops cannot take over, with one warning in the log for
// any number of them.
func TestForeignTLSListener(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok "+r.Proto)
	}))
	t.Cleanup(up.Close)
	var logs lockedBuffer
	n := New(Config{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", ShutdownTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	rules := fmt.Sprintf("namespace: foreign\nroutes:\n  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}\n", up.URL)
	if err := n.Apply(context.Background(), source.Update{Data: []byte(rules), Version: 1, Source: "test"}); err != nil {
		t.Fatal(err)
	}
	ls, err := n.Listen()
	if err != nil {
		t.Fatal(err)
	}
	cert, roots := testCert(t)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ls.TLS = tls.NewListener(raw, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Serve(ctx, ls) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	base := "https://" + raw.Addr().String()
	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}, Timeout: 10 * time.Second}
	resp, err := h2.Get(base + "/x")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Proto != "HTTP/2.0" || string(b) != "ok HTTP/1.1" {
		t.Fatalf("HTTP/2: %s %q", resp.Proto, b)
	}
	h1 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, NextProtos: []string{"http/1.1"}}, DisableKeepAlives: true}, Timeout: 10 * time.Second}
	for range 3 {
		if resp, err := h1.Get(base + "/x"); err == nil {
			resp.Body.Close()
			t.Fatalf("HTTP/1.1 on a foreign listener: %s, want the connection closed", resp.Status)
		}
	}
	warned := 0
	for _, l := range logs.lines(t, "a TLS connection chose HTTP/1.1 on a listener not made by Node.ListenTLS: the event loops cannot take it over, so it is closed (HTTP/2 is served); make the listener with Node.ListenTLS") {
		if l["level"] == "WARN" {
			warned++
		}
	}
	if warned != 1 {
		t.Fatalf("%d warnings, want 1", warned)
	}
}
