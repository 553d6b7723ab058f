package etcd_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/etcd"
	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
)

// outbox is an in-memory sluice.Outbox: a queue of operations per namespace.
type outbox struct {
	mu       sync.Mutex
	queue    map[string][]*claim
	outcomes []sluice.PublishOutcome
}

type claim struct {
	o   *outbox
	ns  string
	v   *sluice.Version
	pub *sluice.Publication
}

func (c *claim) Publication() *sluice.Publication { return c.pub }
func (c *claim) Version() *sluice.Version         { return c.v }
func (c *claim) Abort()                           {}
func (c *claim) Finish(_ context.Context, out sluice.PublishOutcome) error {
	c.o.mu.Lock()
	defer c.o.mu.Unlock()
	c.o.outcomes = append(c.o.outcomes, out)
	if out.Err == nil || out.Final {
		c.o.queue[c.ns] = c.o.queue[c.ns][1:]
	} else {
		c.pub.Attempts++
	}
	return nil
}

func (o *outbox) add(v *sluice.Version, kind sluice.PublicationKind, sel map[string]string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.queue == nil {
		o.queue = map[string][]*claim{}
	}
	o.queue[v.Namespace] = append(o.queue[v.Namespace], &claim{o: o, ns: v.Namespace, v: v, pub: &sluice.Publication{Kind: kind, Selector: sel}})
}

func (o *outbox) last() sluice.PublishOutcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.outcomes[len(o.outcomes)-1]
}

func (o *outbox) PendingNamespaces(context.Context) ([]string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for ns, q := range o.queue {
		if len(q) > 0 {
			out = append(out, ns)
		}
	}
	return out, nil
}

func (o *outbox) ClaimPublication(_ context.Context, ns string) (sluice.OutboxClaim, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.queue[ns]) == 0 {
		return nil, nil
	}
	return o.queue[ns][0], nil
}

func (o *outbox) OutboxStats(context.Context) (int64, time.Duration, error) { return 0, 0, nil }

func version(tb testing.TB, ns string, n, rate int64) *sluice.Version {
	tb.Helper()
	doc := fmt.Sprintf(`{"namespace":%q,"routes":[{"id":"a","upstream":{"targets":[{"url":"http://127.0.0.1:1"}]}}],"limits":[{"id":"l","algorithm":"token_bucket","rate":%d}]}`, ns, rate)
	rs, err := api.Decode([]byte(doc))
	if err != nil {
		tb.Fatal(err)
	}
	return &sluice.Version{Namespace: ns, Number: n, Checksum: rs.Checksum(), CreatedAt: time.Now(), CreatedBy: "alice", Document: rs.Canonical()}
}

func newSigner(tb testing.TB, n int) ([]ed25519.PrivateKey, *api.Signer) {
	tb.Helper()
	var keys []ed25519.PrivateKey
	for range n {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			tb.Fatal(err)
		}
		keys = append(keys, k)
	}
	s, err := api.NewSigner(keys...)
	if err != nil {
		tb.Fatal(err)
	}
	return keys, s
}

// forged is an unsigned, well-formed published value by mallory.
func forged(tb testing.TB, v *sluice.Version) string {
	tb.Helper()
	b, err := json.Marshal(map[string]any{"version": v.Number, "checksum": v.Checksum, "publishedAt": time.Now().UTC(),
		"publishedBy": "mallory", "rules": json.RawMessage(v.Document)})
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// TestPublisherSignsAndRepairs: every value is signed for its key; a forged
// value with a huge version neither blocks the next publication nor stays:
// the publisher rewrites the current version over it.
func TestPublisherSignsAndRepairs(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	c, err := etcd.NewClient(srv.Endpoints)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	keys := api.Keys{Prefix: "/test-publisher"}
	_, signer := newSigner(t, 1)
	ob := &outbox{}
	var current *sluice.Version
	p := etcd.NewPublisher(etcd.Settings{Client: c, Outbox: ob, Keys: keys, Signer: signer, PollInterval: time.Nanosecond,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Namespaces: func(context.Context) ([]string, error) { return []string{"shop"}, nil },
		Current:    func(context.Context, string) (*sluice.Version, error) { return current, nil }})
	verifier := signer.Verifier()
	read := func(key string) (int64, error) {
		t.Helper()
		res, err := c.Get(ctx, key)
		if err != nil || len(res.Kvs) == 0 {
			t.Fatalf("reading %s: %v", key, err)
		}
		payload, _, err := verifier.Open(key, res.Kvs[0].Value)
		if err != nil {
			return 0, err
		}
		var head struct{ Version int64 }
		if err := json.Unmarshal(payload, &head); err != nil {
			t.Fatal(err)
		}
		return head.Version, nil
	}
	mustHold := func(key string, want int64) {
		t.Helper()
		if got, err := read(key); err != nil || got != want {
			t.Fatalf("%s holds version %d (%v), want %d signed", key, got, err, want)
		}
	}
	rkey := keys.RuleSet("shop")

	v1 := version(t, "shop", 1, 1)
	ob.add(v1, sluice.PublishRuleSet, nil)
	p.RunOnce(ctx)
	mustHold(rkey, 1)
	current = v1

	// A forged version 1000000, then a real publication: it lands.
	if _, err := c.Put(ctx, rkey, forged(t, version(t, "shop", 1000000, 9))); err != nil {
		t.Fatal(err)
	}
	v2 := version(t, "shop", 2, 2)
	ob.add(v2, sluice.PublishRuleSet, nil)
	p.RunOnce(ctx)
	if out := ob.last(); out.Err != nil {
		t.Fatalf("publication over a forged value: %v", out.Err)
	}
	mustHold(rkey, 2)
	current = v2

	// Forged again, with nothing to publish: the publisher repairs the key.
	if _, err := c.Put(ctx, rkey, forged(t, version(t, "shop", 1000000, 9))); err != nil {
		t.Fatal(err)
	}
	if _, err := read(rkey); err == nil {
		t.Fatal("the forged value verifies")
	}
	p.RunOnce(ctx)
	mustHold(rkey, 2)
	res, _ := c.Get(ctx, rkey)
	rev := res.Kvs[0].ModRevision
	p.RunOnce(ctx) // a verified value is left alone
	if res, _ := c.Get(ctx, rkey); res.Kvs[0].ModRevision != rev {
		t.Fatal("a verified value was rewritten")
	}

	// A canary is signed for the canary key.
	v3 := version(t, "shop", 3, 3)
	ob.add(v3, sluice.PublishCanary, map[string]string{"zone": "a"})
	p.RunOnce(ctx)
	mustHold(keys.Canary("shop"), 3)
	ob.add(v3, sluice.PublishPromote, nil)
	p.RunOnce(ctx)
	mustHold(rkey, 3)
	if res, _ := c.Get(ctx, keys.Canary("shop"), clientv3.WithCountOnly()); res.Count != 0 {
		t.Fatal("the promotion left the canary key")
	}
}

// TestPublisherKeyRotation: after the rotation (new key first, old key
// kept), values signed by the old key are the control plane's own, not
// forgeries: a version already written is not written again.
func TestPublisherKeyRotation(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	c, err := etcd.NewClient(srv.Endpoints)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	keys := api.Keys{Prefix: "/test-rotation"}
	old, before := newSigner(t, 1)
	fresh, _ := newSigner(t, 1)
	next, err := api.NewSigner(fresh[0], old[0])
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	ob := &outbox{}
	v1 := version(t, "shop", 1, 1)
	ob.add(v1, sluice.PublishRuleSet, nil)
	etcd.NewPublisher(etcd.Settings{Client: c, Outbox: ob, Keys: keys, Signer: before, Logger: logger}).RunOnce(ctx)
	res, _ := c.Get(ctx, keys.RuleSet("shop"))
	rev := res.Kvs[0].ModRevision

	// The same version again (an outcome that was not recorded), by the
	// rotated control plane: already there.
	ob.add(v1, sluice.PublishRuleSet, nil)
	etcd.NewPublisher(etcd.Settings{Client: c, Outbox: ob, Keys: keys, Signer: next, Logger: logger}).RunOnce(ctx)
	if out := ob.last(); out.Err != nil || out.Revision != rev {
		t.Fatalf("re-publication after the rotation: %+v, want revision %d untouched", out, rev)
	}
	v2 := version(t, "shop", 2, 2)
	ob.add(v2, sluice.PublishRuleSet, nil)
	etcd.NewPublisher(etcd.Settings{Client: c, Outbox: ob, Keys: keys, Signer: next, Logger: logger}).RunOnce(ctx)
	res, _ = c.Get(ctx, keys.RuleSet("shop"))
	if _, kid, err := next.Verifier().Open(keys.RuleSet("shop"), res.Kvs[0].Value); err != nil || kid != next.KeyID() {
		t.Fatalf("version 2 signed by %q (%v), want the new key %s", kid, err, next.KeyID())
	}
}
