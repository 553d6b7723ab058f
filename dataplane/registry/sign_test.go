package registry

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
)

// TestOverridesVerifySignatures: with a Verifier, only overrides signed by a
// trusted key for this node's key are taken up; the others are refused,
// counted, and the override in force stays.
func TestOverridesVerifySignatures(t *testing.T) {
	t.Parallel()
	te := MustEtcd(t)
	c := te.Client(t)
	keys := api.Keys{}
	key := keys.Override("shop", "n1")
	_, k, _ := ed25519.GenerateKey(rand.Reader)
	_, mallory, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := api.NewSigner(k)
	malSigner, _ := api.NewSigner(mallory)
	verifier := signer.Verifier()
	sign := func(s *api.Signer, key string, ov api.Override) string {
		t.Helper()
		b, _ := json.Marshal(ov)
		env, err := s.Sign(key, b)
		if err != nil {
			t.Fatal(err)
		}
		return string(env)
	}
	got := make(chan api.Override, 10)
	var mu sync.Mutex
	var reasons []string
	o := &Overrides{
		Client: c, Namespace: "shop", NodeID: "n1", Verifier: verifier,
		OnChange:             func(ov api.Override) { got <- ov },
		OnSignatureRejection: func(r string) { mu.Lock(); reasons = append(reasons, r); mu.Unlock() },
		Heartbeat:            100 * time.Millisecond, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		Logger: testLogger(),
	}
	runUntilCleanup(t, o.Run)
	waitFor(t, "connected", func() bool { return o.Status().Connected })
	put := func(v string) {
		t.Helper()
		if _, err := c.Put(context.Background(), key, v); err != nil {
			t.Fatal(err)
		}
	}
	put(sign(signer, key, api.Override{DegradeLevels: map[string]int{"coupon": 1}, By: "ap"}))
	select {
	case ov := <-got:
		if ov.DegradeLevels["coupon"] != 1 || ov.By != "ap" {
			t.Fatalf("override %+v", ov)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("signed override not taken up")
	}
	for i, tc := range []struct {
		desc, value, reason string
	}{
		{"unsigned drain", `{"drain": true, "by": "mallory"}`, "unsigned"},
		{"signed by another key", sign(malSigner, key, api.Override{Drain: true}), "unknown-key"},
		{"another node's signed override", sign(signer, keys.Override("shop", "n2"), api.Override{Drain: true}), "bad-signature"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			put(tc.value)
			waitFor(t, "refused", func() bool { return o.Status().SignatureRejections == int64(i+1) })
			mu.Lock()
			last := reasons[len(reasons)-1]
			mu.Unlock()
			if last != tc.reason {
				t.Fatalf("reason %q, want %q", last, tc.reason)
			}
			if cur := o.Current(); cur.Drain || cur.DegradeLevels["coupon"] != 1 {
				t.Fatalf("override in force %+v", cur)
			}
		})
	}
	select {
	case ov := <-got:
		t.Fatalf("a refused override was delivered: %+v", ov)
	default:
	}
}
