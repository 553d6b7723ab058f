package api

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// MustKey is a fresh Ed25519 key.
func MustKey(tb testing.TB) ed25519.PrivateKey {
	tb.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

func mustSigner(tb testing.TB, keys ...ed25519.PrivateKey) *Signer {
	tb.Helper()
	s, err := NewSigner(keys...)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func mustVerifier(tb testing.TB, keys ...ed25519.PrivateKey) *Verifier {
	tb.Helper()
	var pubs []ed25519.PublicKey
	for _, k := range keys {
		pubs = append(pubs, k.Public().(ed25519.PublicKey))
	}
	v, err := NewVerifier(pubs...)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

func TestSignAndOpen(t *testing.T) {
	t.Parallel()
	key := Keys{}.RuleSet("shop")
	payload := publish(t, 7, []byte(minimalJSON), "")
	k := MustKey(t)
	s := mustSigner(t, k)
	env, err := s.Sign(key, payload)
	if err != nil {
		t.Fatal(err)
	}
	got, kid, err := mustVerifier(t, k).Open(key, env)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, payload) || kid != s.KeyID() || len(kid) != 16 {
		t.Fatalf("Open: payload %s kid %q", got, kid)
	}
	// The payload is stored verbatim, readable with etcdctl.
	if !bytes.Contains(env, payload) {
		t.Fatalf("envelope %s does not hold the payload verbatim", env)
	}
	if _, err := DecodePublished(got); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRefusals(t *testing.T) {
	t.Parallel()
	key := Keys{}.RuleSet("shop")
	payload := publish(t, 7, []byte(minimalJSON), "")
	k, other := MustKey(t), MustKey(t)
	v := mustVerifier(t, k)
	env, err := mustSigner(t, k).Sign(key, payload)
	if err != nil {
		t.Fatal(err)
	}
	byOther, err := mustSigner(t, other).Sign(key, payload)
	if err != nil {
		t.Fatal(err)
	}
	var parsed envelope
	if err := json.Unmarshal(env, &parsed); err != nil {
		t.Fatal(err)
	}
	rewrap := func(payload []byte, sigs []Signature) []byte {
		b, err := json.Marshal(map[string]any{"payload": json.RawMessage(payload), "signatures": sigs})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	forged := bytes.Replace(payload, []byte(`"version":7`), []byte(`"version":1000000`), 1)
	mallory := bytes.Replace(payload, []byte(`"alice"`), []byte(`"mallory"`), 1)
	if bytes.Equal(forged, payload) || bytes.Equal(mallory, payload) {
		t.Fatal("test payload not rewritten")
	}
	badAlg := parsed.Signatures[0]
	badAlg.Alg = "none"
	short := parsed.Signatures[0]
	short.Sig = base64.StdEncoding.EncodeToString([]byte("short"))
	for _, tc := range []struct {
		desc   string
		key    string
		data   []byte
		want   error
		reason string
	}{
		{"plain published value", key, payload, ErrUnsigned, "unsigned"},
		{"not JSON", key, []byte("garbage"), ErrUnsigned, "unsigned"},
		{"no signatures", key, rewrap(payload, nil), ErrUnsigned, "unsigned"},
		{"signed by an unknown key", key, byOther, ErrUnknownKey, "unknown-key"},
		{"forged version under a real signature", key, rewrap(forged, parsed.Signatures), ErrBadSignature, "bad-signature"},
		{"forged publishedBy under a real signature", key, rewrap(mallory, parsed.Signatures), ErrBadSignature, "bad-signature"},
		{"whitespace added to the payload", key, bytes.Replace(env, []byte(`{"payload":{`), []byte(`{"payload":{ `), 1), ErrBadSignature, "bad-signature"},
		{"replayed under the canary key", Keys{}.Canary("shop"), env, ErrBadSignature, "bad-signature"},
		{"replayed under another namespace's key", Keys{}.RuleSet("other"), env, ErrBadSignature, "bad-signature"},
		{"another algorithm", key, rewrap(payload, []Signature{badAlg}), ErrBadSignature, "bad-signature"},
		{"a signature of the wrong size", key, rewrap(payload, []Signature{short}), ErrBadSignature, "bad-signature"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, _, err := v.Open(tc.key, tc.data)
			if !errors.Is(err, tc.want) || got != nil {
				t.Fatalf("Open: %q, %v; want %v", got, err, tc.want)
			}
			if r := SignatureReason(err); r != tc.reason {
				t.Fatalf("reason %q, want %q", r, tc.reason)
			}
		})
	}
	// A value carrying an unknown signature and a good one is accepted.
	var both envelope
	_ = json.Unmarshal(byOther, &both)
	if _, kid, err := v.Open(key, rewrap(payload, append(both.Signatures, parsed.Signatures...))); err != nil || kid != KeyID(k.Public().(ed25519.PublicKey)) {
		t.Fatalf("two signatures: %v %q", err, kid)
	}
}

// TestKeyRotation: the control plane signs with its first key and trusts
// all of them; nodes trusting the old and the new key accept both.
func TestKeyRotation(t *testing.T) {
	t.Parallel()
	key := Keys{}.RuleSet("shop")
	payload := publish(t, 7, []byte(minimalJSON), "")
	old, next := MustKey(t), MustKey(t)
	before, _ := mustSigner(t, old).Sign(key, payload)
	s := mustSigner(t, next, old)
	after, _ := s.Sign(key, payload)
	if s.KeyID() != KeyID(next.Public().(ed25519.PublicKey)) || len(s.KeyIDs()) != 2 {
		t.Fatalf("signing key %s of %v", s.KeyID(), s.KeyIDs())
	}
	for _, tc := range []struct {
		desc       string
		v          *Verifier
		data       []byte
		wantKid    ed25519.PrivateKey
		wantRefuse bool
	}{
		{"control plane recognises values of the old key", s.Verifier(), before, old, false},
		{"control plane recognises values of the new key", s.Verifier(), after, next, false},
		{"node trusting both takes the old key's value", mustVerifier(t, old, next), before, old, false},
		{"node trusting both takes the new key's value", mustVerifier(t, old, next), after, next, false},
		{"node trusting only the old key refuses the new one's", mustVerifier(t, old), after, nil, true},
		{"node trusting only the new key refuses the old one's", mustVerifier(t, next), before, nil, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, kid, err := tc.v.Open(key, tc.data)
			if tc.wantRefuse {
				if !errors.Is(err, ErrUnknownKey) {
					t.Fatalf("Open: %v, want ErrUnknownKey", err)
				}
				return
			}
			if err != nil || kid != KeyID(tc.wantKid.Public().(ed25519.PublicKey)) {
				t.Fatalf("Open: kid %q, %v", kid, err)
			}
		})
	}
}

func TestOpenWithoutVerifier(t *testing.T) {
	t.Parallel()
	var v *Verifier
	key := Keys{}.RuleSet("shop")
	payload := publish(t, 7, []byte(minimalJSON), "")
	env, _ := mustSigner(t, MustKey(t)).Sign(key, payload)
	for _, data := range [][]byte{payload, env} {
		got, kid, err := v.Open(key, data)
		if err != nil || kid != "" || !bytes.Equal(got, payload) {
			t.Fatalf("nil verifier: %q %q %v", got, kid, err)
		}
	}
}

func TestKeyFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := MustKey(t), MustKey(t)
	write := func(name string, blocks ...[]byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, bytes.Join(blocks, nil), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pem1, _ := MarshalPrivateKey(a)
	pem2, _ := MarshalPrivateKey(b)
	pub1, _ := MarshalPublicKey(a.Public().(ed25519.PublicKey))
	pub2, _ := MarshalPublicKey(b.Public().(ed25519.PublicKey))
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ec)
	ecPub, _ := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	ecPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER})
	ecPubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: ecPub})

	s, err := ReadSigner(write("both.pem", pem1, pem2))
	if err != nil || s.KeyID() != KeyID(a.Public().(ed25519.PublicKey)) || len(s.KeyIDs()) != 2 {
		t.Fatalf("ReadSigner: %v %v", s, err)
	}
	v, err := ReadVerifier(write("pub1.pem", pub1), write("pub2.pem", pub2))
	if err != nil || len(v.KeyIDs()) != 2 {
		t.Fatalf("ReadVerifier: %v %v", v, err)
	}
	for _, tc := range []struct {
		desc string
		read func() error
		msg  string
	}{
		{"public key as signing key", func() error { _, err := ReadSigner(write("p.pem", pub1)); return err }, `is "PUBLIC KEY", want "PRIVATE KEY"`},
		{"private key as trusted key", func() error { _, err := ReadVerifier(write("k.pem", pem1)); return err }, `is "PRIVATE KEY", want "PUBLIC KEY"`},
		{"ECDSA signing key", func() error { _, err := ReadSigner(write("ec.pem", ecPEM)); return err }, "want an Ed25519 key"},
		{"ECDSA trusted key", func() error { _, err := ReadVerifier(write("ecpub.pem", ecPubPEM)); return err }, "want an Ed25519 key"},
		{"empty file", func() error { _, err := ReadVerifier(write("empty.pem")); return err }, `no "PUBLIC KEY" PEM block`},
		{"missing file", func() error { _, err := ReadSigner(filepath.Join(dir, "nope")); return err }, "no such file"},
		{"same key twice", func() error { _, err := ReadVerifier(write("dup.pem", pub1, pub1)); return err }, "given twice"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if err := tc.read(); err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want %q", err, tc.msg)
			}
		})
	}
}

// largePublished is a published value of n limits.
func largePublished(tb testing.TB, n int) []byte {
	tb.Helper()
	var b strings.Builder
	b.WriteString(`{"namespace":"shop","routes":[{"id":"r","match":{"pathPrefix":"/"},"upstream":{"targets":[{"url":"http://127.0.0.1:1"}]}}],"limits":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"l%d","key":["ip"],"algorithm":"token_bucket","rate":%d,"period":"1s","burst":%d}`, i, i+1, i+1)
	}
	b.WriteString(`]}`)
	return publish(tb, 7, []byte(b.String()), "")
}

// BenchmarkOpen measures verifying a published value of 1,000 limits against
// decoding it (DecodePublished, which every node does anyway): the ratio is
// what signing adds to a node's apply.
func BenchmarkOpen(b *testing.B) {
	key := Keys{}.RuleSet("shop")
	payload := largePublished(b, 1000)
	k := MustKey(b)
	env, err := mustSigner(b, k).Sign(key, payload)
	if err != nil {
		b.Fatal(err)
	}
	v := mustVerifier(b, k)
	b.Logf("payload %d bytes", len(payload))
	b.Run("open", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(env)))
		for b.Loop() {
			if _, _, err := v.Open(key, env); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode-published", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(payload)))
		for b.Loop() {
			if _, err := DecodePublished(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sign", func(b *testing.B) {
		s := mustSigner(b, k)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Sign(key, payload); err != nil {
				b.Fatal(err)
			}
		}
	})
}
