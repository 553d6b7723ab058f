package http_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/controlplane/etcd"
	sluicehttp "github.com/sluicegw/sluice/controlplane/http"
)

// TestNodesShowOnlyWhatNodesHold: the node list shows as live only
// registrations bound to a lease, and as overrides only those in force:
// signed by the control plane, not expired, on a node that exists.
func TestNodesShowOnlyWhatNodesHold(t *testing.T) {
	t.Parallel()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := api.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{settings: func(s *sluicehttp.Settings) { s.Nodes.(*etcd.NodeService).Signer = signer }})
	_, _, ap := e.mustShop()
	ctx := context.Background()
	put := func(key string, value []byte, opts ...clientv3.OpOption) {
		t.Helper()
		if _, err := e.etcd.Put(ctx, key, string(value), opts...); err != nil {
			t.Fatal(err)
		}
	}
	signed := func(key string, v any) []byte {
		t.Helper()
		b, _ := json.Marshal(v)
		env, err := signer.Sign(key, b)
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	e.register("shop", api.NodeStatus{NodeID: "n1", Address: "10.0.0.1:9000"})
	e.register("shop", api.NodeStatus{NodeID: "n2", Address: "10.0.0.2:9000"})
	e.register("shop", api.NodeStatus{NodeID: "n3", Address: "10.0.0.3:9000"})
	// A registration written without a lease is not a node.
	st, _ := json.Marshal(api.NodeStatus{NodeID: "forged", Namespace: "shop", Address: "6.6.6.6:9000"})
	put(e.keys.Node("shop", "forged"), st)
	past := time.Now().Add(-time.Minute).UTC()
	future := time.Now().Add(time.Hour).UTC()
	put(e.keys.Override("shop", "n1"), signed(e.keys.Override("shop", "n1"), api.Override{Drain: true, Expires: &future, By: "ap"}))
	put(e.keys.Override("shop", "n2"), signed(e.keys.Override("shop", "n2"), api.Override{Drain: true, Expires: &past, By: "ap"}))
	put(e.keys.Override("shop", "n3"), []byte(`{"drain":true,"by":"mallory"}`))
	put(e.keys.Override("shop", "ghost"), signed(e.keys.Override("shop", "ghost"), api.Override{Drain: true, By: "ap"}))

	got := ap.nodes("shop")
	for _, tc := range []struct {
		desc     string
		node     string
		listed   bool
		override bool
	}{
		{"override in force", "n1", true, true},
		{"expired override", "n2", true, false},
		{"unsigned override", "n3", true, false},
		{"registration without a lease", "forged", false, false},
		{"override of a node that does not exist", "ghost", false, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			n, ok := got[tc.node]
			if ok != tc.listed || (ok && !n.Live) || (n.Override != nil) != tc.override {
				t.Fatalf("node %s: listed %v %+v", tc.node, ok, n)
			}
		})
	}
	if len(got) != 3 {
		t.Fatalf("nodes %+v", got)
	}
	// An override written through the API is signed, and shown.
	ap.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/nodes/n2/override", map[string]any{"drain": true, "ttl": "5m"})
	res, err := e.etcd.Get(ctx, e.keys.Override("shop", "n2"))
	if err != nil || len(res.Kvs) != 1 {
		t.Fatal(err)
	}
	if _, _, err := signer.Verifier().Open(e.keys.Override("shop", "n2"), res.Kvs[0].Value); err != nil {
		t.Fatalf("the override written is not signed: %v", err)
	}
	if n := ap.nodes("shop")["n2"]; n.Override == nil || !n.Override.Drain {
		t.Fatalf("node n2 %+v", n)
	}
}
