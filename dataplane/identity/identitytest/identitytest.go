// Package identitytest makes signing keys, JWKS documents and tokens for
// tests of the gateway's identities: good tokens, and each shape of bad one
// (BadTokens). It signs with go-jose; nothing here is for production use.
package identitytest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Issuer is a test identity provider: keys by kid and their algorithms.
type Issuer struct {
	URL  string // the iss claim
	Keys []Key
}

// Key is one signing key.
type Key struct {
	ID      string
	Alg     jose.SignatureAlgorithm
	Private crypto.Signer
}

// NewIssuer returns an issuer with an RS256 key "rsa1", an ES256 key
// "ec1" and an EdDSA key "ed1".
func NewIssuer(tb testing.TB, iss string) *Issuer {
	tb.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	_, dk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return &Issuer{URL: iss, Keys: []Key{{"rsa1", jose.RS256, rk}, {"ec1", jose.ES256, ek}, {"ed1", jose.EdDSA, dk}}}
}

// Key returns the key with kid, or fails the test.
func (i *Issuer) Key(tb testing.TB, kid string) Key {
	for _, k := range i.Keys {
		if k.ID == kid {
			return k
		}
	}
	tb.Fatalf("no key %q", kid)
	return Key{}
}

// JWKS returns the public JWKS of the issuer's keys (or of kids only).
func (i *Issuer) JWKS(tb testing.TB, kids ...string) []byte {
	tb.Helper()
	var set jose.JSONWebKeySet
	for _, k := range i.Keys {
		if len(kids) > 0 && !contains(kids, k.ID) {
			continue
		}
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.Private.Public(), KeyID: k.ID, Algorithm: string(k.Alg), Use: "sig"})
	}
	b, err := json.Marshal(set)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// Claims returns standard claims for sub: iss, aud, exp in an hour, iat
// and nbf now, plus extra.
func (i *Issuer) Claims(sub, aud string, now time.Time, extra map[string]any) map[string]any {
	c := map[string]any{"iss": i.URL, "sub": sub, "aud": aud, "iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

// Sign signs claims with the key kid, as a compact JWS.
func (i *Issuer) Sign(tb testing.TB, kid string, claims map[string]any) string {
	tb.Helper()
	k := i.Key(tb, kid)
	return SignWith(tb, k.Alg, k.Private, kid, claims)
}

// SignWith signs claims with key under alg and kid.
func SignWith(tb testing.TB, alg jose.SignatureAlgorithm, key any, kid string, claims map[string]any) string {
	tb.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader(jose.HeaderKey("kid"), kid)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		tb.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		tb.Fatal(err)
	}
	obj, err := s.Sign(payload)
	if err != nil {
		tb.Fatal(err)
	}
	out, err := obj.CompactSerialize()
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// BadToken is one shape of a token that must be refused.
type BadToken struct {
	Desc  string
	Token string
	// Twice sends the token in two Authorization headers.
	Twice bool
}

// BadTokens returns every shape of bad token the gateway must refuse with
// 401 (and never key as an anonymous caller), against an identity of
// issuer i, audience aud, algorithms RS256/ES256/EdDSA, at now.
func (i *Issuer) BadTokens(tb testing.TB, aud string, now time.Time) []BadToken {
	tb.Helper()
	good := i.Claims("alice", aud, now, nil)
	with := func(k string, v any) map[string]any {
		c := i.Claims("alice", aud, now, nil)
		c[k] = v
		return c
	}
	rsa1 := i.Key(tb, "rsa1")
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(rsa1.Private.Public())
	if err != nil {
		tb.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	b64 := base64.RawURLEncoding.EncodeToString
	payload, _ := json.Marshal(good)
	none := b64([]byte(`{"alg":"none","kid":"rsa1","typ":"JWT"}`)) + "." + b64(payload) + "."
	// Two signatures: the JWS JSON serialization, signed by two keys.
	multi, err := jose.NewMultiSigner([]jose.SigningKey{{Algorithm: jose.RS256, Key: rsa1.Private}, {Algorithm: jose.ES256, Key: i.Key(tb, "ec1").Private}}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	mobj, err := multi.Sign(payload)
	if err != nil {
		tb.Fatal(err)
	}
	twoSigs := mobj.FullSerialize()
	goodTok := i.Sign(tb, "rsa1", good)
	parts := strings.Split(goodTok, ".")
	return []BadToken{
		{Desc: "bad signature", Token: SignWith(tb, jose.RS256, other, "rsa1", good)},
		{Desc: "tampered payload", Token: parts[0] + "." + b64([]byte(strings.Replace(string(payload), "alice", "admin", 1))) + "." + parts[2]},
		{Desc: "alg confusion RS256 to HS256 with the public key as secret", Token: SignWith(tb, jose.HS256, pubPEM, "rsa1", good)},
		{Desc: "alg none", Token: none},
		{Desc: "unknown kid", Token: SignWith(tb, jose.RS256, other, "rsa9", good)},
		{Desc: "expired", Token: i.Sign(tb, "rsa1", with("exp", now.Add(-time.Hour).Unix()))},
		{Desc: "not yet valid", Token: i.Sign(tb, "ec1", with("nbf", now.Add(time.Hour).Unix()))},
		{Desc: "wrong issuer", Token: i.Sign(tb, "ed1", with("iss", "https://evil.example"))},
		{Desc: "wrong audience", Token: i.Sign(tb, "rsa1", with("aud", "other-api"))},
		{Desc: "no exp", Token: i.Sign(tb, "rsa1", with("exp", nil))},
		{Desc: "malformed base64", Token: parts[0] + ".!!not-base64!!." + parts[2]},
		{Desc: "not a JWT", Token: "hello"},
		{Desc: "two signatures (JWS JSON serialization)", Token: twoSigs},
		{Desc: "huge token", Token: strings.Repeat("a", 17<<10)},
		{Desc: "two Authorization headers", Token: goodTok, Twice: true},
	}
}
