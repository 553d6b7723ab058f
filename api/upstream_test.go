package api

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"
)

// mustCAPEM returns a fresh self-signed CA certificate as PEM.
func mustCAPEM(tb testing.TB) string {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "upstream test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestValidateUpstreamProtocolAndTLS(t *testing.T) {
	t.Parallel()
	ca := mustCAPEM(t)
	tg := func(urls ...string) []Target {
		var ts []Target
		for _, u := range urls {
			ts = append(ts, Target{URL: u})
		}
		return ts
	}
	tests := []struct {
		desc  string
		up    Upstream
		msg   string   // part of the first error; "" for valid
		paths []string // every path expected
	}{
		{desc: "no protocol, http", up: Upstream{Targets: tg("http://a")}},
		{desc: "http1 over https", up: Upstream{Targets: tg("https://a"), Protocol: ProtocolHTTP1}},
		{desc: "h2 with tls", up: Upstream{Targets: tg("https://a", "HTTPS://b:8443"), Protocol: ProtocolH2, TLS: &UpstreamTLS{CA: ca, ServerName: "svc.example"}}},
		{desc: "h2c to http", up: Upstream{Targets: tg("http://a", "h2c://b"), Protocol: ProtocolH2C}},
		{desc: "tls ca with two certificates", up: Upstream{Targets: tg("https://a"), TLS: &UpstreamTLS{CA: ca + "\n" + ca}}},
		{desc: "unknown protocol", up: Upstream{Targets: tg("http://a"), Protocol: "http3"},
			msg: "must be http1, h2 or h2c", paths: []string{"routes[0].upstream.protocol"}},
		{desc: "h2 to http", up: Upstream{Targets: tg("https://a", "http://b"), Protocol: ProtocolH2},
			msg: "protocol h2 needs https://", paths: []string{"routes[0].upstream.targets[1].url"}},
		{desc: "h2c to https", up: Upstream{Targets: tg("https://a"), Protocol: ProtocolH2C},
			msg: "protocol h2c needs http:// or h2c://", paths: []string{"routes[0].upstream.targets[0].url"}},
		{desc: "http1 to h2c", up: Upstream{Targets: tg("h2c://a"), Protocol: ProtocolHTTP1},
			msg: "protocol http1 needs http:// or https://", paths: []string{"routes[0].upstream.targets[0].url"}},
		{desc: "tls on http target", up: Upstream{Targets: tg("https://a", "http://b"), TLS: &UpstreamTLS{ServerName: "a"}},
			msg: "every target of an upstream with tls must be https://", paths: []string{"routes[0].upstream.targets[1].url"}},
		{desc: "serverName with space", up: Upstream{Targets: tg("https://a"), TLS: &UpstreamTLS{ServerName: "a b"}},
			msg: "is not a DNS name", paths: []string{"routes[0].upstream.tls.serverName"}},
		{desc: "serverName too long", up: Upstream{Targets: tg("https://a"), TLS: &UpstreamTLS{ServerName: strings.Repeat("a.", 127)}},
			msg: "is not a DNS name", paths: []string{"routes[0].upstream.tls.serverName"}},
		{desc: "ca not pem", up: Upstream{Targets: tg("https://a"), TLS: &UpstreamTLS{CA: "hello"}},
			msg: "holds no PEM CERTIFICATE block", paths: []string{"routes[0].upstream.tls.ca"}},
		{desc: "ca is a key", up: Upstream{Targets: tg("https://a"), TLS: &UpstreamTLS{CA: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}},
			msg: `PEM block 1 is a "PRIVATE KEY", not a CERTIFICATE`, paths: []string{"routes[0].upstream.tls.ca"}},
		{desc: "ca bad der", up: Upstream{Targets: tg("https://a"), TLS: &UpstreamTLS{CA: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}},
			msg: "PEM block 1: not an X.509 certificate", paths: []string{"routes[0].upstream.tls.ca"}},
		{desc: "ca trailing junk", up: Upstream{Targets: tg("https://a"), TLS: &UpstreamTLS{CA: ca + "junk"}},
			msg: "has text after PEM block 1", paths: []string{"routes[0].upstream.tls.ca"}},
		{desc: "ca non-ascii", up: Upstream{Targets: tg("https://a"), TLS: &UpstreamTLS{CA: "é" + ca}},
			msg: "must be PEM text", paths: []string{"routes[0].upstream.tls.ca"}},
		{desc: "ca too big", up: Upstream{Targets: tg("https://a"), TLS: &UpstreamTLS{CA: strings.Repeat(ca, MaxUpstreamCABytes/len(ca)+1)}},
			msg: "the limit is 65536", paths: []string{"routes[0].upstream.tls.ca"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			rs := &RuleSet{Namespace: "shop", Routes: []Route{{ID: "a", Upstream: tt.up}}}
			err := rs.Validate()
			if tt.msg == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			wantErrors(t, err, tt.msg, tt.paths...)
		})
	}
}

func TestNormalizeUpstreamProtocolAndTLS(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc      string
		up        Upstream
		wantProto UpstreamProtocol
		wantTLS   *UpstreamTLS
	}{
		{"http1 to http is the default", Upstream{Targets: []Target{{URL: "http://a"}}, Protocol: ProtocolHTTP1}, "", nil},
		{"http1 to https is not", Upstream{Targets: []Target{{URL: "https://a"}}, Protocol: ProtocolHTTP1}, ProtocolHTTP1, nil},
		{"h2c to h2c:// is the default", Upstream{Targets: []Target{{URL: "H2C://a"}}, Protocol: ProtocolH2C}, "", nil},
		{"h2c to http:// is not", Upstream{Targets: []Target{{URL: "http://a"}, {URL: "h2c://b"}}, Protocol: ProtocolH2C}, ProtocolH2C, nil},
		{"h2 stays", Upstream{Targets: []Target{{URL: "https://a"}}, Protocol: ProtocolH2}, ProtocolH2, nil},
		{"empty tls is left out", Upstream{Targets: []Target{{URL: "https://a"}}, TLS: &UpstreamTLS{}}, "", nil},
		{"serverName lower case", Upstream{Targets: []Target{{URL: "https://a"}}, TLS: &UpstreamTLS{ServerName: "Svc.Example"}}, "", &UpstreamTLS{ServerName: "svc.example"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			rs := &RuleSet{Namespace: "shop", Routes: []Route{{ID: "a", Upstream: tt.up}}}
			if err := rs.Validate(); err != nil {
				t.Fatal(err)
			}
			n := rs.Normalize()
			up := n.Routes[0].Upstream
			if up.Protocol != tt.wantProto {
				t.Errorf("protocol %q, want %q", up.Protocol, tt.wantProto)
			}
			if (up.TLS == nil) != (tt.wantTLS == nil) || (up.TLS != nil && *up.TLS != *tt.wantTLS) {
				t.Errorf("tls %+v, want %+v", up.TLS, tt.wantTLS)
			}
			if again := n.Normalize(); string(again.Canonical()) != string(n.Canonical()) {
				t.Errorf("normalize is not idempotent")
			}
		})
	}
}

func TestUpstreamTLSClientConfig(t *testing.T) {
	t.Parallel()
	ca := mustCAPEM(t)
	var none *UpstreamTLS
	cfg, err := none.ClientConfig()
	if err != nil || cfg.RootCAs != nil || cfg.ServerName != "" || cfg.MinVersion != 0x0303 {
		t.Fatalf("nil: %+v, %v", cfg, err)
	}
	cfg, err = (&UpstreamTLS{CA: ca, ServerName: "svc.example"}).ClientConfig()
	if err != nil || cfg.RootCAs == nil || cfg.ServerName != "svc.example" {
		t.Fatalf("with ca: %+v, %v", cfg, err)
	}
	if _, err := (&UpstreamTLS{CA: "nope"}).ClientConfig(); err == nil || !strings.Contains(err.Error(), "upstream tls ca") {
		t.Fatalf("bad ca: %v", err)
	}
}
