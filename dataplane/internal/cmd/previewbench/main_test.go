package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
)

const benchRules = `namespace: bench
routes:
  - {id: pv, match: {pathPrefix: /pv}, upstream: {targets: [{url: "http://127.0.0.1:1"}]}}
limits:
  - {id: l0, routes: [pv], key: [ip, "header:X-User"], algorithm: token_bucket, rate: 100000000, period: 1s}
`

// TestPreviewValue: preview writes a value a node accepts (signed by the
// key, decoding to the rules file's limits), and --stop deletes it.
func TestPreviewValue(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t)
	c := e.Client(t)
	dir := t.TempDir()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := api.MarshalPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	keyFile, rulesFile := filepath.Join(dir, "sign.pem"), filepath.Join(dir, "tight.yaml")
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rulesFile, []byte(benchRules), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := previewCmd([]string{"--etcd", e.Addr(), "--namespace", "bench", "--key", keyFile, "--rules", rulesFile}); err != nil {
		t.Fatal(err)
	}
	key := api.Keys{}.Preview("bench")
	res, err := c.Get(context.Background(), key)
	if err != nil || len(res.Kvs) != 1 {
		t.Fatalf("get %s: %v, %d values", key, err, len(res.Kvs))
	}
	v, err := api.NewVerifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	payload, _, err := v.Open(key, res.Kvs[0].Value)
	if err != nil {
		t.Fatalf("the node would refuse the preview's signature: %v", err)
	}
	p, valid, err := api.DecodePreview(payload)
	if err != nil {
		t.Fatalf("the node would refuse the preview: %v", err)
	}
	if p.Change != "bench" || !p.Until.After(time.Now()) || len(valid.Rules().Limits) != 1 || valid.Rules().Limits[0].Rate != 100000000 {
		t.Fatalf("preview %+v with %d limits", p, len(valid.Rules().Limits))
	}
	if err := previewCmd([]string{"--etcd", e.Addr(), "--namespace", "bench", "--stop"}); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Get(context.Background(), key); err != nil || len(res.Kvs) != 0 {
		t.Fatalf("after --stop: %v, %d values", err, len(res.Kvs))
	}
}
