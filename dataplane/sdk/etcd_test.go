package sdk

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
)

// publish puts version v of a service rule set (rate calls an hour on
// resource "x") at the namespace's ruleset key, signed by signer.
func publish(tb testing.TB, c *clientv3.Client, signer *api.Signer, v, rate int64) {
	tb.Helper()
	rs, err := api.Decode(fmt.Appendf(nil, "namespace: orders-svc\nkind: service\nlimits:\n  - {id: l%d, resources: [x], algorithm: token_bucket, rate: %d, period: 1h}\n", v, rate))
	if err != nil {
		tb.Fatal(err)
	}
	data, err := json.Marshal(api.Published{Version: v, Checksum: rs.Checksum(), PublishedAt: time.Now().UTC(), PublishedBy: "test", Rules: rs})
	if err != nil {
		tb.Fatal(err)
	}
	key := api.Keys{}.RuleSet("orders-svc")
	signed, err := signer.Sign(key, data)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, key, string(signed)); err != nil {
		tb.Fatal(err)
	}
}

func signer(tb testing.TB) (*api.Signer, ed25519.PrivateKey) {
	tb.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := api.NewSigner(k)
	if err != nil {
		tb.Fatal(err)
	}
	return s, k
}

// waitFor polls cond (an event in another process: etcd's watch) until it
// holds or 10 s pass.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFollowEtcd runs the SDK against a real etcd: it takes the signed
// published rule set and enforces it, takes a new version as it lands,
// refuses a forged one (counted, not applied), and with etcd down boots
// from its state dir.
func TestFollowEtcd(t *testing.T) {
	t.Parallel()
	te := etcdtest.Start(t)
	c := te.Client(t)
	good, key := signer(t)
	forger, _ := signer(t)
	pub, err := api.MarshalPublicKey(key.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	trust := filepath.Join(t.TempDir(), "trust.pem")
	if err := os.WriteFile(trust, pub, 0o600); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	publish(t, c, good, 1, 1)
	cfg := Config{Namespace: "orders-svc", NodeID: "orders-1", Etcd: te.Endpoints, TrustKeys: trust, StateDir: state, Logger: discard()}
	g, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx := context.Background()
	if st := g.Status(); st.Version != 1 {
		t.Fatalf("after New: %+v", st)
	}
	if err := g.Do(ctx, "x", nil, ok); err != nil {
		t.Fatal(err)
	}
	if rej := rejected(t, g.Do(ctx, "x", nil, ok)); rej.Rule != "l1" {
		t.Fatalf("%+v", rej)
	}

	publish(t, c, forger, 2, 100)
	waitFor(t, "the forged value refused", func() bool { return g.Status().SignatureRejections == 1 })
	if st := g.Status(); st.Version != 1 {
		t.Fatalf("a forged version was applied: %+v", st)
	}

	start := time.Now()
	publish(t, c, good, 3, 2)
	waitFor(t, "version 3", func() bool { return g.Status().Version == 3 })
	t.Logf("version 3 enforced %v after its put", time.Since(start))
	if err := g.Do(ctx, "x", nil, ok); err != nil {
		t.Fatalf("version 3's limit l3 is new: %v", err)
	}

	// One fleet: the instance registers as a node of kind sdk, and an
	// operator's (signed) drain override refuses every guarded call.
	var reg api.NodeStatus
	waitFor(t, "the registration", func() bool {
		resp, err := c.Get(ctx, api.Keys{}.Node("orders-svc", "orders-1"))
		if err != nil || len(resp.Kvs) == 0 {
			return false
		}
		reg, err = api.DecodeRegistration("orders-1", resp.Kvs[0].Value)
		return err == nil && reg.Version == 3
	})
	if reg.Kind != api.NodeKindSDK || reg.Service != "orders-svc" || reg.NodeID != "orders-1" {
		t.Fatalf("registration %+v", reg)
	}
	ovKey := api.Keys{}.Override("orders-svc", "orders-1")
	ov, err := good.Sign(ovKey, []byte(`{"drain": true, "by": "op", "reason": "test"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, ovKey, string(ov)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the drain", func() bool { return g.Drained() })
	if rej := rejected(t, g.Do(ctx, "x", nil, ok)); rej.Rule != RuleDrained || rej.Status != 503 {
		t.Fatalf("drained: %+v", rej)
	}

	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if resp, err := c.Get(ctx, api.Keys{}.Node("orders-svc", "orders-1")); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("the registration outlived Close: %v %v", resp, err)
	}
	te.Stop()
	g2, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("boot with etcd down: %v", err)
	}
	defer g2.Close()
	if st := g2.Status(); st.Version != 3 || st.Etcd == nil || st.Etcd.State != "booted-from-cache" {
		t.Fatalf("booted from the state dir: %+v %+v", st, st.Etcd)
	}
	for range 2 {
		if err := g2.Do(ctx, "x", nil, ok); err != nil {
			t.Fatal(err)
		}
	}
	if rej := rejected(t, g2.Do(ctx, "x", nil, ok)); rej.Rule != "l3" {
		t.Fatalf("%+v", rej)
	}
}
