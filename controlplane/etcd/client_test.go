package etcd_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/controlplane/etcd"
	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
)

// writePKI writes a test CA, a server certificate for 127.0.0.1 and a
// client certificate (PEM) to dir.
func writePKI(tb testing.TB, dir string) (ca, srvCert, srvKey, cliCert, cliKey string) {
	tb.Helper()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			tb.Fatal(err)
		}
		return p
	}
	newKey := func() (*ecdsa.PrivateKey, []byte) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			tb.Fatal(err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			tb.Fatal(err)
		}
		return k, der
	}
	now := time.Now()
	caKey, _ := newKey()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, usage x509.ExtKeyUsage, ips []net.IP) ([]byte, []byte) {
		k, kder := newKey()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: fmt.Sprint(serial)}, NotBefore: now.Add(-time.Hour),
			NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			tb.Fatal(err)
		}
		return der, kder
	}
	sc, sk := leaf(2, x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")})
	cc, ck := leaf(3, x509.ExtKeyUsageClientAuth, nil)
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", sc), write("server-key.pem", "PRIVATE KEY", sk),
		write("client.pem", "CERTIFICATE", cc), write("client-key.pem", "PRIVATE KEY", ck)
}

// TestClientTLS connects the control plane's client to an embedded etcd
// that serves TLS only and requires client certificates.
func TestClientTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, srvCert, srvKey, cliCert, cliKey := writePKI(t, dir)
	srv := etcdtest.StartTLS(t, etcdtest.TLS{CertFile: srvCert, KeyFile: srvKey, TrustedCAFile: ca})
	for _, tc := range []struct {
		desc string
		c    etcd.ClientConfig
		ok   bool
	}{
		{"CA and client certificate", etcd.ClientConfig{CAFile: ca, CertFile: cliCert, KeyFile: cliKey}, true},
		{"no client certificate", etcd.ClientConfig{CAFile: ca}, false},
		{"no CA", etcd.ClientConfig{CertFile: cliCert, KeyFile: cliKey}, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			tc.c.Endpoints = srv.Endpoints
			c, err := etcd.NewClientConfig(tc.c)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err = c.Put(ctx, "/sluice/v1/ns/shop/ruleset", "x")
			if tc.ok != (err == nil) {
				t.Fatalf("put: %v, want ok %v", err, tc.ok)
			}
			if tc.ok {
				if err := etcd.Ping(ctx, c); err != nil {
					t.Fatalf("ping: %v", err)
				}
			}
		})
	}
	if _, err := etcd.NewClientConfig(etcd.ClientConfig{Endpoints: srv.Endpoints, Username: "sluice-admin"}); err == nil {
		t.Fatal("a user without a password is accepted")
	}
}

// TestClientAuth connects as the control plane's etcd user of docs/control-plane.md's role
// setup (readwrite on the prefix only): publishing and the readiness ping
// work, and nothing outside the prefix is reachable.
func TestClientAuth(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	root, err := etcd.NewClient(srv.Endpoints)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	keys := api.Keys{Prefix: "/sluice/v1"}
	steps := []func() error{
		func() error { _, err := root.RoleAdd(ctx, "root"); return err },
		func() error { _, err := root.UserAdd(ctx, "root", "root-pw"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := root.RoleAdd(ctx, "sluice-admin"); return err },
		func() error {
			_, err := root.RoleGrantPermission(ctx, "sluice-admin", "/sluice/v1/", clientv3.GetPrefixRangeEnd("/sluice/v1/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := root.UserAdd(ctx, "sluice-admin", "admin-pw"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "sluice-admin", "sluice-admin"); return err },
		func() error { _, err := root.AuthEnable(ctx); return err },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	c, err := etcd.NewClientConfig(etcd.ClientConfig{Endpoints: srv.Endpoints, Username: "sluice-admin", Password: "admin-pw", DialTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Put(ctx, keys.RuleSet("shop"), "x"); err != nil {
		t.Fatalf("publishing as sluice-admin: %v", err)
	}
	if err := etcd.PingKeys(ctx, c, keys); err != nil {
		t.Fatalf("ping under the prefix: %v", err)
	}
	if _, err := c.Put(ctx, "/elsewhere", "x"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("writing outside the prefix: %v, want permission denied", err)
	}
	// The client authenticates as it connects: a wrong password fails there.
	if bad, err := etcd.NewClientConfig(etcd.ClientConfig{Endpoints: srv.Endpoints, Username: "sluice-admin", Password: "wrong", DialTimeout: 30 * time.Second}); !errors.Is(err, rpctypes.ErrAuthFailed) {
		if bad != nil {
			bad.Close()
		}
		t.Fatalf("a wrong password: %v, want authentication failed", err)
	}
}
