package source

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"sync"
	"testing"

	"github.com/sluicegw/sluice/api"
)

func mustSignKey(tb testing.TB) ed25519.PrivateKey {
	tb.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

func mustSigner(tb testing.TB, keys ...ed25519.PrivateKey) *api.Signer {
	tb.Helper()
	s, err := api.NewSigner(keys...)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func mustTrust(tb testing.TB, keys ...ed25519.PrivateKey) *api.Verifier {
	tb.Helper()
	var pubs []ed25519.PublicKey
	for _, k := range keys {
		pubs = append(pubs, k.Public().(ed25519.PublicKey))
	}
	v, err := api.NewVerifier(pubs...)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

func mustSign(tb testing.TB, s *api.Signer, key string, payload []byte) []byte {
	tb.Helper()
	b, err := s.Sign(key, payload)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// rejections records OnSignatureRejection calls.
type rejections struct {
	mu  sync.Mutex
	got []string
}

func (r *rejections) record(what, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, what+":"+reason)
}

func (r *rejections) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// TestEtcdSignatures follows signed values through a key rotation: the node
// trusts the old and the new key; values of either are applied, values
// unsigned, by an unknown key, or moved to another key are refused and
// counted, and a forged version 1000000 does not block the next real one.
func TestEtcdSignatures(t *testing.T) {
	t.Parallel()
	te := MustEtcd(t)
	c := te.Client(t)
	ns := "shop"
	keys := api.Keys{}
	old, next, mallory := mustSignKey(t), mustSignKey(t), mustSignKey(t)
	before, after := mustSigner(t, old), mustSigner(t, next, old) // the rotation: the new key signs first
	dir := t.TempDir()
	rec := newRecorder(t, ns)
	var rej rejections
	s := testSource(c, ns)
	s.Verifier, s.StateDir, s.OnSignatureRejection = mustTrust(t, old, next), dir, rej.record
	s.Labels = map[string]string{"zone": "a"}

	mustPut(t, c, keys.RuleSet(ns), mustSign(t, before, keys.RuleSet(ns), mustPublished(t, ns, 1, 0)))
	if err := s.Start(context.Background(), rec.apply); err != nil {
		t.Fatal(err)
	}
	rec.wantVersion(1)
	runSource(t, s, rec.apply)

	steps := []struct {
		desc   string
		key    string
		value  []byte
		want   int64  // version applied; 0: refused
		reject string // the rejection recorded
	}{
		{"the new key signs after the rotation", keys.RuleSet(ns), mustSign(t, after, keys.RuleSet(ns), mustPublished(t, ns, 2, 0)), 2, ""},
		{"a key the node does not trust", keys.RuleSet(ns), mustSign(t, mustSigner(t, mallory), keys.RuleSet(ns), mustPublished(t, ns, 3, 0)), 0, "ruleset:unknown-key"},
		{"unsigned, version 1000000", keys.RuleSet(ns), mustPublished(t, ns, 1000000, 0), 0, "ruleset:unsigned"},
		{"signed for the canary key, written to the ruleset key", keys.RuleSet(ns), mustSign(t, after, keys.Canary(ns), mustPublished(t, ns, 4, 0)), 0, "ruleset:bad-signature"},
		{"the old key still signs a value the node takes", keys.RuleSet(ns), mustSign(t, before, keys.RuleSet(ns), mustPublished(t, ns, 5, 0)), 5, ""},
		{"a signed canary", keys.Canary(ns), mustSign(t, after, keys.Canary(ns), mustCanary(t, ns, 6, 0, api.Selector{"zone": "a"})), 6, ""},
		{"an unsigned canary", keys.Canary(ns), mustCanary(t, ns, 7, 0, api.Selector{"zone": "a"}), 0, "canary:unsigned"},
	}
	var wantRej []string
	for _, st := range steps {
		mustPut(t, c, st.key, st.value)
		if st.want != 0 {
			rec.wantApplied(s, st.want)
		} else {
			rec.wantErr("refused")
			wantRej = append(wantRej, st.reject)
		}
		if got := rej.list(); len(got) != len(wantRej) || (len(got) > 0 && got[len(got)-1] != wantRej[len(wantRej)-1]) {
			t.Fatalf("%s: rejections %v, want %v", st.desc, got, wantRej)
		}
	}
	if st := s.Status(); st.SignatureRejections != int64(len(wantRej)) || len(st.TrustedKeys) != 2 || st.Warning != "" {
		t.Fatalf("status %+v", st)
	}

	// The state file holds the signed canary; it verifies, and a node that
	// trusts only the old key refuses it at boot.
	saved, err := LoadState(dir, ns)
	if err != nil || !saved.Canary || saved.Doc.Version != 6 {
		t.Fatalf("state %+v, %v", saved, err)
	}
	if err := VerifyState(saved, mustTrust(t, old, next), keys); err != nil {
		t.Fatalf("VerifyState: %v", err)
	}
	if err := VerifyState(saved, mustTrust(t, old), keys); !errors.Is(err, ErrUnsignedState) || !errors.Is(err, api.ErrUnknownKey) {
		t.Fatalf("VerifyState with the old key only: %v", err)
	}
	forgedFloor := *saved
	forgedFloor.PublishedVersion = 1000000
	if err := VerifyState(&forgedFloor, mustTrust(t, old, next), keys); !errors.Is(err, ErrUnsignedState) {
		t.Fatalf("VerifyState with a forged floor: %v", err)
	}
	unsigned := *saved
	unsigned.Envelope = nil
	if err := VerifyState(&unsigned, mustTrust(t, old, next), keys); !errors.Is(err, api.ErrUnsigned) {
		t.Fatalf("VerifyState without an envelope: %v", err)
	}
}

// TestEtcdRefusesUnsignedStateAtBoot: a state file that is not signed is
// refused like any unsigned value; the node boots from etcd, and without
// etcd it has nothing (not the forged version) to run.
func TestEtcdRefusesUnsignedStateAtBoot(t *testing.T) {
	t.Parallel()
	ns := "shop"
	k := mustSignKey(t)
	for _, tc := range []struct {
		desc string
		etcd bool
	}{
		{"etcd reachable: boots from etcd", true},
		{"etcd unreachable: nothing to run", false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			dir := t.TempDir()
			if err := SaveState(dir, &State{Namespace: ns, Published: mustPublished(t, ns, 1000000, 0), PublishedVersion: 1000000}); err != nil {
				t.Fatal(err)
			}
			rec := newRecorder(t, ns)
			var rej rejections
			var s *Etcd
			if tc.etcd {
				te := MustEtcd(t)
				c := te.Client(t)
				mustPut(t, c, api.Keys{}.RuleSet(ns), mustSign(t, mustSigner(t, k), api.Keys{}.RuleSet(ns), mustPublished(t, ns, 3, 0)))
				s = testSource(c, ns)
			} else {
				s = testSource(unreachableClient(t), ns)
			}
			s.Verifier, s.StateDir, s.OnSignatureRejection = mustTrust(t, k), dir, rej.record
			err := s.Start(context.Background(), rec.apply)
			if got := rej.list(); len(got) != 1 || got[0] != "state:unsigned" {
				t.Fatalf("rejections %v", got)
			}
			if !tc.etcd {
				if !errors.Is(err, ErrNoState) {
					t.Fatalf("Start: %v, want ErrNoState", err)
				}
				rec.none()
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rec.wantVersion(3)
		})
	}
}

// TestEtcdWithoutVerifierWarns: a source without trusted keys says so in
// its status.
func TestEtcdWithoutVerifierWarns(t *testing.T) {
	t.Parallel()
	te := MustEtcd(t)
	c := te.Client(t)
	mustPut(t, c, api.Keys{}.RuleSet("shop"), mustPublished(t, "shop", 1, 0))
	s := testSource(c, "shop")
	rec := newRecorder(t, "shop")
	if err := s.Start(context.Background(), rec.apply); err != nil {
		t.Fatal(err)
	}
	rec.wantVersion(1)
	if st := s.Status(); st.Warning == "" || len(st.TrustedKeys) != 0 {
		t.Fatalf("status %+v, want a warning about unsigned values", st)
	}
}
