package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicegw/sluice/dataplane/internal/testca"
)

func TestTLSFlags(t *testing.T) {
	for _, tc := range []struct {
		desc string
		args []string
		want string // error substring; "" means accepted
	}{
		{"all three", []string{"--listen-tls", ":9443", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, ""},
		{"no key", []string{"--listen-tls", ":9443", "--tls-cert", "c.pem"}, "--listen-tls needs --tls-cert FILE and --tls-key FILE"},
		{"no pair", []string{"--listen-tls", ":9443"}, "--listen-tls needs"},
		{"pair without address", []string{"--tls-cert", "c.pem", "--tls-key", "k.pem"}, "--tls-cert and --tls-key need --listen-tls ADDR"},
		{"staple without address", []string{"--tls-ocsp-staple"}, "--tls-ocsp-staple needs --listen-tls ADDR"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := parseFlags(append([]string{"--rules", "rules.yaml", "--node-id", "n1"}, tc.args...), io.Discard)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("parseFlags: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestTLSProcess runs the binary with --listen-tls: HTTP/1.1 and h2 over
// TLS reach the upstream, cleartext --listen still serves, and a new pair
// written over the files is served to the next handshake.
func TestTLSProcess(t *testing.T) {
	ca := testca.New(t, "process test CA")
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.Leaf(t, time.Time{}, time.Time{}, "127.0.0.1").Write(t, cert, key)
	up := upstream(t)
	g := startGateway(t, fmt.Sprintf(rulesTemplate, up.URL, 1000000, 1000000),
		"--listen-tls", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key)
	tlsAddr := g.tls
	for _, proto := range []string{"h1", "h2"} {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}, Protocols: new(http.Protocols)}
		if proto == "h2" {
			tr.Protocols.SetHTTP2(true)
		} else {
			tr.Protocols.SetHTTP1(true)
		}
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("https://" + tlsAddr + "/api/x")
		if err != nil {
			t.Fatalf("%s: %v", proto, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "ok" || resp.Header.Get("X-Upstream-Path") != "/api/x" {
			t.Fatalf("%s: %d %q", proto, resp.StatusCode, body)
		}
		tr.CloseIdleConnections()
	}
	resp, err := http.Get("http://" + g.addr + "/api/x")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("cleartext listener: %v", err)
	}
	resp.Body.Close()

	next := ca.Leaf(t, time.Time{}, time.Time{}, "127.0.0.1")
	next.Write(t, cert, key)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := tls.Dial("tcp", tlsAddr, &tls.Config{RootCAs: ca.Pool()})
		if err != nil {
			t.Fatal(err)
		}
		got := c.ConnectionState().PeerCertificates[0].SerialNumber
		c.Close()
		if got.Cmp(next.Serial) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still serving serial %v, want %v", got, next.Serial)
		}
		time.Sleep(100 * time.Millisecond) // the node checks the files every second
	}
	if !strings.Contains(g.stderr.String(), "tls certificate reloaded") {
		t.Fatalf("no reload logged:\n%s", g.stderr.String())
	}
	// SIGTERM drains both listeners and exits 0.
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-g.done:
		g.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, g.stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit within 10s of SIGTERM")
	}
}
