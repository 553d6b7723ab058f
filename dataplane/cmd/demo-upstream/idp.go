package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// The demo identity provider: with --jwt-key the upstream serves the
// public half of an Ed25519 key as a JWKS at /.well-known/jwks.json, and
// --print-tokens mints two tokens signed by it, for the demo rules'
// identity (deploy/rules/demo.yaml). It is a demo: the key sits in a file
// next to the demo's other state.
const (
	demoIssuer   = "https://idp.demo.sluice"
	demoAudience = "demo"
	demoKeyID    = "demo-1"
	jwksPath     = "/.well-known/jwks.json"
)

// loadOrCreateKey reads the Ed25519 private key at path (PKCS#8 PEM), or
// creates it (mode 0600) when the file does not exist.
func loadOrCreateKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		der, err := x509.MarshalPKCS8PrivateKey(priv)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			return nil, err
		}
		return priv, nil
	}
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%s: not a PEM PRIVATE KEY", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an Ed25519 key", path)
	}
	return priv, nil
}

// jwksHandler serves the key's public half as a JWKS.
func jwksHandler(priv ed25519.PrivateKey) http.Handler {
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: priv.Public(), KeyID: demoKeyID, Algorithm: string(jose.EdDSA), Use: "sig"}}}
	b, _ := json.Marshal(set)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(b)
	})
}

// withJWKS serves jwks at jwksPath and everything else with next (no
// ServeMux: it would clean and redirect the odd paths tests send).
func withJWKS(next, jwks http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == jwksPath {
			jwks.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// mintToken signs a demo token for sub on plan, valid for 30 days from now.
func mintToken(priv ed25519.PrivateKey, sub, plan string, now time.Time) (string, error) {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: priv},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), demoKeyID))
	if err != nil {
		return "", err
	}
	payload, _ := json.Marshal(map[string]any{"iss": demoIssuer, "aud": demoAudience, "sub": sub, "plan": plan,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(30 * 24 * time.Hour).Unix()})
	obj, err := s.Sign(payload)
	if err != nil {
		return "", err
	}
	return obj.CompactSerialize()
}

// printTokens writes the two demo tokens, one per line: NAME PLAN TOKEN.
func printTokens(w io.Writer, priv ed25519.PrivateKey, now time.Time) error {
	for _, u := range [][2]string{{"alice", "pro"}, {"bob", "free"}} {
		tok, err := mintToken(priv, u[0], u[1], now)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s %s %s\n", u[0], u[1], tok)
	}
	return nil
}
