package gateway

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/dataplane/internal/testca"
)

// tlsNode starts a node serving TLS on loopback with a leaf of ca for
// 127.0.0.1 (files in a temporary directory), and an upstream that echoes
// the protocol the gateway forwarded with and X-Forwarded-Proto.
func tlsNode(tb testing.TB, ca *testca.CA, extra Config) (n *Node, ls *Listeners, certFile, keyFile string) {
	tb.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, "proto=%s xfp=%s", r.Proto, r.Header.Get("X-Forwarded-Proto"))
	}))
	tb.Cleanup(up.Close)
	dir := tb.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.Leaf(tb, time.Time{}, time.Time{}, "127.0.0.1", "localhost").Write(tb, certFile, keyFile)
	extra.ListenTLS, extra.TLSCertFile, extra.TLSKeyFile = "127.0.0.1:0", certFile, keyFile
	rules := fmt.Sprintf("namespace: tls\nroutes:\n  - id: all\n    upstream: {targets: [{url: %q}]}\n", up.URL)
	n, ls = MustStartListeners(tb, rules, extra)
	return n, ls, certFile, keyFile
}

// tlsClient trusts ca only; protocols: "h1" or "h2".
func tlsClient(ca *testca.CA, proto string, keepAlive bool) *http.Client {
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12},
		DisableKeepAlives: !keepAlive,
		Protocols:         new(http.Protocols),
	}
	if proto == "h2" {
		tr.Protocols.SetHTTP2(true)
	} else {
		tr.Protocols.SetHTTP1(true)
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func TestTLSListenerServesHTTP1AndH2(t *testing.T) {
	t.Parallel()
	ca := testca.New(t, "gateway test CA")
	_, ls, _, _ := tlsNode(t, ca, Config{})
	url := "https://" + ls.TLSAddr().String() + "/x"
	tests := []struct {
		desc, proto, wantProto string
	}{
		{"ALPN http/1.1", "h1", "HTTP/1.1"},
		{"ALPN h2", "h2", "HTTP/2.0"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			c := tlsClient(ca, tt.proto, true)
			resp, err := c.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.Proto != tt.wantProto || !strings.Contains(string(body), "xfp=https") {
				t.Fatalf("status %d proto %s body %q", resp.StatusCode, resp.Proto, body)
			}
			if v := resp.TLS.Version; v < tls.VersionTLS12 {
				t.Fatalf("TLS version %x", v)
			}
		})
	}
	// An untrusting client fails the handshake; the gateway's certificate
	// is the test CA's, not a system root.
	if _, err := http.Get(url); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("client without the test CA: %v", err)
	}
}

// TestTLSCertificateRotatedUnderLoad rotates the certificate files five
// times (and writes one bad pair between) while clients send requests over
// fresh TLS connections and over kept-alive HTTP/1.1 and h2 connections:
// no request fails, new handshakes see each new certificate, and the bad
// pair is refused while the previous one serves.
func TestTLSCertificateRotatedUnderLoad(t *testing.T) {
	t.Parallel()
	ca := testca.New(t, "gateway test CA")
	_, ls, certFile, keyFile := tlsNode(t, ca, Config{TLSReloadInterval: 20 * time.Millisecond})
	url := "https://" + ls.TLSAddr().String() + "/load"

	var ok, failed atomic.Int64
	var firstErr atomic.Value
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, c := range []struct {
		proto     string
		keepAlive bool
	}{{"h1", false}, {"h1", false}, {"h1", true}, {"h2", true}, {"h2", false}} {
		client := tlsClient(ca, c.proto, c.keepAlive)
		wg.Go(func() {
			for ctx.Err() == nil {
				resp, err := client.Get(url)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != 200 {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				ok.Add(1)
			}
		})
	}
	served := func() *big.Int {
		conn, err := tls.Dial("tcp", ls.TLSAddr().String(), &tls.Config{RootCAs: ca.Pool()})
		if err != nil {
			t.Errorf("probe handshake: %v", err)
			return nil
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber
	}
	waitServed := func(want *big.Int) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := served()
			if got == nil || got.Cmp(want) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("served serial %v, want %v", got, want)
				return
			}
			time.Sleep(10 * time.Millisecond) // the reloader polls every 20ms
		}
	}
	for i := range 5 {
		time.Sleep(100 * time.Millisecond) // load runs on the current certificate
		leaf := ca.Leaf(t, time.Time{}, time.Time{}, "127.0.0.1")
		leaf.Write(t, certFile, keyFile)
		waitServed(leaf.Serial)
		if i == 2 {
			// A pair whose key is another certificate's: refused.
			other := ca.Leaf(t, time.Time{}, time.Time{}, "127.0.0.1")
			if err := os.WriteFile(certFile, other.CertPEM, 0o600); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // several polls
			if got := served(); got == nil || got.Cmp(leaf.Serial) != 0 {
				t.Errorf("after a bad pair: serial %v, want the previous %v", got, leaf.Serial)
			}
		}
	}
	time.Sleep(100 * time.Millisecond)
	cancel()
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d of %d requests failed during rotation; first: %v", failed.Load(), failed.Load()+ok.Load(), firstErr.Load())
	}
	if ok.Load() < 50 {
		t.Fatalf("only %d requests ran", ok.Load())
	}
	resp, err := http.Get("http://" + ls.Admin.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// Each rotation loads (waitServed saw each one served), at least once:
	// a rename that lands between the reloader's stat and its read loads
	// the same pair again at the next poll (tlsreload.Check records the
	// stamps it read before the files, so it never marks a pair seen that
	// it did not load). The bad pair is refused at least once (a poll
	// between the two renames of a rotation is refused too).
	if m := regexp.MustCompile(`sluice_tls_cert_reloads_total\{result="ok"\} ([0-9]+)`).FindSubmatch(metrics); m == nil {
		t.Errorf("no successful reload counted")
	} else if k, _ := strconv.Atoi(string(m[1])); k < 5 {
		t.Errorf("%d successful reloads, want at least one per rotation (5)", k)
	}
	if !strings.Contains(string(metrics), "sluice_tls_cert_not_after_seconds ") {
		t.Errorf("metrics lack sluice_tls_cert_not_after_seconds")
	}
	if m := regexp.MustCompile(`sluice_tls_cert_reloads_total\{result="error"\} ([0-9]+)`).FindSubmatch(metrics); m == nil || string(m[1]) == "0" {
		t.Errorf("no refused reload counted: %q", m)
	}
	t.Logf("%d requests, none failed, across 5 rotations", ok.Load())
}

// TestTLSConfigErrors: a TLS listener needs a loadable pair, and a pair
// needs a TLS listener.
func TestTLSConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "missing.pem")
	tests := []struct {
		desc string
		cfg  Config
		want string
	}{
		{"missing files", Config{ListenTLS: "127.0.0.1:0", TLSCertFile: bad, TLSKeyFile: bad}, "no such file"},
		{"no key", Config{ListenTLS: "127.0.0.1:0", TLSCertFile: bad}, "both a certificate file and a key file"},
		{"pair without address", Config{TLSCertFile: bad, TLSKeyFile: bad}, "need a TLS address"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			tt.cfg.Listen, tt.cfg.Admin = "127.0.0.1:0", "127.0.0.1:0"
			n := New(tt.cfg)
			ls, err := n.Listen()
			if err == nil {
				ls.Traffic.Close()
				ls.Admin.Close()
				t.Fatal("Listen succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
		})
	}
}
