package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/internal/group"
	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
)

// TestNodeIDFlag: with etcd, --node-id must be one the control plane
// accepts (api.ValidateNodeID); the gateway used to start and register an
// id that the control plane never listed.
func TestNodeIDFlag(t *testing.T) {
	for _, tc := range []struct {
		id, want string
	}{
		{"gw-1.eu_west", ""},
		{"gw:1", api.NodeIDRule},
		{"gw/1", api.NodeIDRule},
	} {
		t.Run(tc.id, func(t *testing.T) {
			_, err := parseFlags([]string{"--etcd", "127.0.0.1:2379", "--namespace", "demo", "--insecure-accept-unsigned", "--node-id", tc.id}, io.Discard)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("parseFlags: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestEtcdFlags(t *testing.T) {
	dir := t.TempDir()
	trust := filepath.Join(dir, "trust.pem")
	if err := os.WriteFile(trust, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc string
		args []string
		want string // error substring; "" means accepted
	}{
		{"etcd without trusted keys", []string{"--etcd", "127.0.0.1:2379", "--namespace", "demo"}, "--etcd needs --trust-keys"},
		{"trusted keys", []string{"--etcd", "127.0.0.1:2379", "--namespace", "demo", "--trust-keys", trust}, ""},
		{"insecure, explicitly", []string{"--etcd", "127.0.0.1:2379", "--namespace", "demo", "--insecure-accept-unsigned"}, ""},
		{"both", []string{"--etcd", "127.0.0.1:2379", "--namespace", "demo", "--trust-keys", trust, "--insecure-accept-unsigned"}, "exclusive"},
		{"missing password file", []string{"--etcd", "127.0.0.1:2379", "--namespace", "demo", "--insecure-accept-unsigned", "--etcd-password-file", filepath.Join(dir, "nope")}, "--etcd-password-file"},
		{"standalone needs no keys", []string{"--rules", "rules.yaml"}, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := parseFlags(append(tc.args, "--node-id", "n1"), io.Discard)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("parseFlags: %v, want %q", err, tc.want)
			}
		})
	}
	// A trust file that holds no key fails at dial, naming the flag.
	o, err := parseFlags([]string{"--etcd", "127.0.0.1:1", "--namespace", "demo", "--trust-keys", trust, "--node-id", "n1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dialEtcd(o, slog.New(slog.NewTextHandler(io.Discard, nil)), metrics.New()); err == nil || !strings.Contains(err.Error(), "--trust-keys") {
		t.Fatalf("dialEtcd with a bad trust file: %v", err)
	}
}

// testPKI is a CA with a server certificate for 127.0.0.1 and a client
// certificate, as PEM files in a directory.
type testPKI struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

func mustPKI(tb testing.TB, dir string) testPKI {
	tb.Helper()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			tb.Fatal(err)
		}
		return p
	}
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			tb.Fatal(err)
		}
		return k
	}
	keyDER := func(k *ecdsa.PrivateKey) []byte {
		b, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	now := time.Now()
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, ips []net.IP) ([]byte, *ecdsa.PrivateKey) {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			tb.Fatal(err)
		}
		return der, k
	}
	srvDER, srvKey := leaf(2, "etcd", x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")})
	cliDER, cliKey := leaf(3, "gw-1", x509.ExtKeyUsageClientAuth, nil)
	return testPKI{
		ca:         write("ca.pem", "CERTIFICATE", caDER),
		serverCert: write("server.pem", "CERTIFICATE", srvDER), serverKey: write("server-key.pem", "PRIVATE KEY", keyDER(srvKey)),
		clientCert: write("client.pem", "CERTIFICATE", cliDER), clientKey: write("client-key.pem", "PRIVATE KEY", keyDER(cliKey)),
	}
}

// startEtcd runs the shared test etcd (etcdtest) and returns its endpoint;
// with pki, it serves TLS only and requires client certificates signed by
// the test CA.
func startEtcd(tb testing.TB, pki *testPKI) string {
	tb.Helper()
	if pki == nil {
		return etcdtest.Start(tb).Endpoints[0]
	}
	return etcdtest.StartTLS(tb, etcdtest.TLS{CertFile: pki.serverCert, KeyFile: pki.serverKey, TrustedCAFile: pki.ca}).Endpoints[0]
}

func dialFor(tb testing.TB, args ...string) (*etcdDeps, error) {
	tb.Helper()
	o, err := parseFlags(append(args, "--namespace", "demo", "--node-id", "gw-1", "--insecure-accept-unsigned"), io.Discard)
	if err != nil {
		tb.Fatal(err)
	}
	d, err := dialEtcd(o, slog.New(slog.NewTextHandler(io.Discard, nil)), metrics.New())
	if err == nil {
		tb.Cleanup(d.close)
		// What the node's Run does: run the client's components (the
		// background authentication), stopped before the clients close.
		g := group.New(group.Settings{})
		for _, c := range d.components() {
			g.Go(context.Background(), c.Name, c.Run)
		}
		tb.Cleanup(func() { _ = g.Stop() })
	}
	return d, err
}

// TestEtcdTLS dials an etcd that requires TLS client certificates with the
// gateway's flags.
func TestEtcdTLS(t *testing.T) {
	dir := t.TempDir()
	pki := mustPKI(t, dir)
	other := mustPKI(t, t.TempDir()) // another CA
	ep := startEtcd(t, &pki)
	for _, tc := range []struct {
		desc string
		args []string
		ok   bool
	}{
		{"CA and client certificate", []string{"--etcd-ca", pki.ca, "--etcd-cert", pki.clientCert, "--etcd-key", pki.clientKey}, true},
		{"no client certificate", []string{"--etcd-ca", pki.ca}, false},
		{"a certificate of another CA", []string{"--etcd-ca", pki.ca, "--etcd-cert", other.clientCert, "--etcd-key", other.clientKey}, false},
		{"server not trusted", []string{"--etcd-ca", other.ca, "--etcd-cert", pki.clientCert, "--etcd-key", pki.clientKey}, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			d, err := dialFor(t, append(tc.args, "--etcd", ep)...)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err = d.client.Put(ctx, "/sluice/v1/ns/demo/nodes/gw-1", "x")
			if tc.ok != (err == nil) {
				t.Fatalf("put over TLS: %v, want ok %v", err, tc.ok)
			}
		})
	}
	if _, err := dialFor(t, "--etcd", ep, "--etcd-cert", pki.clientCert); err == nil || !strings.Contains(err.Error(), "both") {
		t.Fatalf("a certificate without its key: %v", err)
	}
}

// TestEtcdAuthRoles sets up etcd's auth as docs/control-plane.md shows (a role per node that
// reads the namespace and writes only its own registration) and checks what
// a node's user may do.
// slowAuth lengthens the dial timeout: the embedded etcd checks passwords
// (bcrypt) slowly under -race.
func slowAuth(t *testing.T) {
	old := etcdDialTimeout
	etcdDialTimeout = 30 * time.Second
	t.Cleanup(func() { etcdDialTimeout = old })
}

func TestEtcdAuthRoles(t *testing.T) {
	slowAuth(t)
	ep := startEtcd(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	setupAuth(t, ep)
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("node-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := dialFor(t, "--etcd", ep, "--etcd-username", "gw-1"); err == nil || !strings.Contains(err.Error(), "password") {
		t.Fatalf("a user without a password: %v", err)
	}
	wrong := filepath.Join(t.TempDir(), "wrong")
	if err := os.WriteFile(wrong, []byte("nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := dialFor(t, "--etcd", ep, "--etcd-username", "gw-1", "--etcd-password-file", wrong); !errors.Is(err, rpctypes.ErrAuthFailed) {
		t.Fatalf("a wrong password: %v", err)
	}
	d, err := dialFor(t, "--etcd", ep, "--etcd-username", "gw-1", "--etcd-password-file", pw)
	if err != nil {
		t.Fatal(err)
	}
	// (Under -race the embedded etcd may take longer than the dial timeout
	// to check a password: the client is then made in the background.)
	c := d.wait(ctx)
	if c == nil {
		t.Fatal("not authenticated")
	}
	checkNodeUser(t, ctx, c, ep)
}

// TestEtcdAuthAtStart starts a node with a user while etcd is down: it
// does not fail, and authenticates once etcd is there.
func TestEtcdAuthAtStart(t *testing.T) {
	srv := etcdtest.Start(t)
	srv.Stop() // down until the node has started; Restart keeps the address
	ep := srv.Endpoints[0]
	old := etcdDialTimeout
	etcdDialTimeout = time.Second // etcd is down: fail fast, then authenticate in the background
	t.Cleanup(func() { etcdDialTimeout = old })
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("node-pw"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := dialFor(t, "--etcd", ep, "--etcd-username", "gw-1", "--etcd-password-file", pw)
	if err != nil {
		t.Fatalf("dial while etcd is down: %v", err)
	}
	select {
	case <-d.ready:
		t.Fatal("authenticated while etcd is down")
	default:
	}
	srv.Restart()
	setupAuth(t, ep)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := d.wait(ctx)
	if c == nil {
		t.Fatal("not authenticated within a minute of etcd starting")
	}
	checkNodeUser(t, ctx, c, ep)
}

// setupAuth creates docs/control-plane.md's users and roles (root, sluice-admin, the node
// gw-1 of namespace demo: read on the namespace, write on its own
// registration and report) and enables auth.
func setupAuth(t *testing.T, ep string) {
	t.Helper()
	root := etcdtest.MustClient(t, []string{ep})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	keys := api.Keys{}
	nsPrefix := keys.Namespace("demo")
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// etcdctl role add sluice-admin; grant readwrite on the prefix.
	must(root.RoleAdd(ctx, "root"))
	must(root.UserAdd(ctx, "root", "root-pw"))
	must(root.UserGrantRole(ctx, "root", "root"))
	must(root.RoleAdd(ctx, "sluice-admin"))
	must(root.RoleGrantPermission(ctx, "sluice-admin", api.DefaultEtcdPrefix+"/", clientv3.GetPrefixRangeEnd(api.DefaultEtcdPrefix+"/"), clientv3.PermissionType(clientv3.PermReadWrite)))
	must(root.UserAdd(ctx, "sluice-admin", "admin-pw"))
	must(root.UserGrantRole(ctx, "sluice-admin", "sluice-admin"))
	must(root.RoleAdd(ctx, "sluice-node-gw-1"))
	must(root.RoleGrantPermission(ctx, "sluice-node-gw-1", nsPrefix, clientv3.GetPrefixRangeEnd(nsPrefix), clientv3.PermissionType(clientv3.PermRead)))
	must(root.RoleGrantPermission(ctx, "sluice-node-gw-1", keys.Node("demo", "gw-1"), "", clientv3.PermissionType(clientv3.PermReadWrite)))
	must(root.RoleGrantPermission(ctx, "sluice-node-gw-1", keys.Report("demo", "gw-1"), "", clientv3.PermissionType(clientv3.PermReadWrite)))
	must(root.UserAdd(ctx, "gw-1", "node-pw"))
	must(root.UserGrantRole(ctx, "gw-1", "sluice-node-gw-1"))
	must(root.AuthEnable(ctx))
}

// checkNodeUser checks what gw-1's client may and may not do.
func checkNodeUser(t *testing.T, ctx context.Context, c *clientv3.Client, ep string) {
	t.Helper()
	keys := api.Keys{}
	denied := func(err error) bool { return errors.Is(err, rpctypes.ErrPermissionDenied) }
	// What the node does: list the rule set and canary, watch, register on a lease.
	if _, err := c.Txn(ctx).Then(clientv3.OpGet(keys.RuleSet("demo")), clientv3.OpGet(keys.Canary("demo"))).Commit(); err != nil {
		t.Fatalf("node lists its rule set: %v", err)
	}
	if _, err := c.Get(ctx, keys.Nodes("demo"), clientv3.WithPrefix()); err != nil {
		t.Fatalf("node counts the live nodes: %v", err)
	}
	lease, err := c.Grant(ctx, 10)
	if err != nil {
		t.Fatalf("node grants a lease: %v", err)
	}
	if _, err := c.Put(ctx, keys.Node("demo", "gw-1"), "{}", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatalf("node registers: %v", err)
	}
	// It reports, bound to its registration's lease.
	if _, err := c.Put(ctx, keys.Report("demo", "gw-1"), "{}", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatalf("node reports: %v", err)
	}
	// What it may not do: write the rule set, a canary, overrides, another
	// node's registration or report (with or without a lease), a key under
	// its own id's prefix, another namespace; nor delete another node's
	// report.
	for key, what := range map[string]string{
		keys.RuleSet("demo"):               "the rule set",
		keys.Canary("demo"):                "the canary",
		keys.Override("demo", "gw-1"):      "its override",
		keys.Override("demo", "gw-2"):      "another node's override",
		keys.Node("demo", "gw-2"):          "another node's registration",
		keys.Report("demo", "gw-2"):        "another node's report",
		keys.Report("demo", "gw-zz"):       "a report of a node that never registered",
		keys.Report("demo", "gw-1x"):       "a report under its id as a prefix",
		keys.Report("demo", "gw-1") + "/x": "a key below its report",
		keys.Namespace("demo") + "x":       "a key of its own making",
		keys.RuleSet("other"):              "another namespace",
		keys.Report("other", "gw-1"):       "its id's report in another namespace",
	} {
		if _, err := c.Put(ctx, key, "forged"); !denied(err) {
			t.Errorf("node writes %s: %v, want permission denied", what, err)
		}
		if _, err := c.Put(ctx, key, "forged", clientv3.WithLease(lease.ID)); !denied(err) {
			t.Errorf("node writes %s under its lease: %v, want permission denied", what, err)
		}
	}
	if _, err := c.Delete(ctx, keys.Report("demo", "gw-2")); !denied(err) {
		t.Errorf("node deletes another node's report: %v, want permission denied", err)
	}
	if _, err := c.Delete(ctx, keys.Reports("demo"), clientv3.WithPrefix()); !denied(err) {
		t.Errorf("node deletes every report: %v, want permission denied", err)
	}
	if _, err := c.Revoke(ctx, lease.ID); err != nil {
		t.Fatalf("node revokes its lease: %v", err)
	}
	if _, err := c.Get(ctx, keys.RuleSet("other")); !denied(err) {
		t.Errorf("node reads another namespace: %v, want permission denied", err)
	}
	// The control plane's user writes the rule set.
	admin, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, Username: "sluice-admin", Password: "admin-pw", DialTimeout: 20 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Put(ctx, keys.RuleSet("demo"), "x"); err != nil {
		t.Fatalf("control plane writes the rule set: %v", err)
	}
}
