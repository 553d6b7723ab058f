package api

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Signed publications.
//
// Every value the control plane writes under a namespace's etcd keys (the
// rule set, the canary, the overrides) is an envelope:
//
//	{"payload": <the value's JSON, verbatim>,
//	 "signatures": [{"kid": "3f1c9a0b2d4e6f70", "alg": "Ed25519", "sig": "<base64>"}]}
//
// Each signature is Ed25519 over
//
//	"sluice-signed-v1\n" + <the etcd key the value is stored under> + "\n" + <payload bytes>
//
// where the payload bytes are exactly those between `"payload":` and the
// next member, as stored: the signature covers everything the value carries
// (version number, checksum, publishedBy, rules, selector, expiry) and binds
// it to its key, so that a signed value cannot be replayed under another
// key (a canary as the rule set, one node's override on another node). kid
// is KeyID of the public key. A verifier accepts the value when one
// signature is by a key it trusts and is valid; it never looks at the
// payload before that.

// SignatureAlg is the only signature algorithm: Ed25519.
const SignatureAlg = "Ed25519"

// signedDomain starts every signed message.
const signedDomain = "sluice-signed-v1\n"

// Errors of Verifier.Open, for errors.Is; SignatureReason names them.
var (
	// ErrUnsigned: the value is not a signed envelope, or carries no signature.
	ErrUnsigned = errors.New("the value is not signed")
	// ErrUnknownKey: no signature is by a trusted key.
	ErrUnknownKey = errors.New("the value is signed by no trusted key")
	// ErrBadSignature: a signature by a trusted key does not match the value.
	ErrBadSignature = errors.New("the signature does not match the value")
)

// SignatureReason is the metric label of a refusal by Verifier.Open:
// "unsigned", "unknown-key" or "bad-signature", and "" for any other error.
func SignatureReason(err error) string {
	switch {
	case errors.Is(err, ErrUnsigned):
		return "unsigned"
	case errors.Is(err, ErrUnknownKey):
		return "unknown-key"
	case errors.Is(err, ErrBadSignature):
		return "bad-signature"
	}
	return ""
}

// Signature is one signature of an envelope.
type Signature struct {
	KeyID string `json:"kid"`
	Alg   string `json:"alg"`
	Sig   string `json:"sig"`
}

// envelope is the stored shape; Payload keeps the exact bytes.
type envelope struct {
	Payload    json.RawMessage `json:"payload"`
	Signatures []Signature     `json:"signatures"`
}

// KeyID names a public key: the first 8 bytes of the SHA-256 of its 32
// bytes, in hex (16 characters).
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

func signedMessage(key string, payload []byte) []byte {
	msg := make([]byte, 0, len(signedDomain)+len(key)+1+len(payload))
	msg = append(msg, signedDomain...)
	msg = append(msg, key...)
	msg = append(msg, '\n')
	return append(msg, payload...)
}

// Signer signs values with the first of its keys; the others are kept for
// verification during a rotation (see Verifier). The zero value cannot sign.
// Safe for concurrent use.
type Signer struct {
	keys []ed25519.PrivateKey
	ids  []string
}

// NewSigner returns a signer whose first key signs. It fails without keys.
func NewSigner(keys ...ed25519.PrivateKey) (*Signer, error) {
	if len(keys) == 0 {
		return nil, errors.New("no signing key")
	}
	s := &Signer{}
	seen := map[string]bool{}
	for _, k := range keys {
		if len(k) != ed25519.PrivateKeySize {
			return nil, fmt.Errorf("signing key has %d bytes, want an Ed25519 key", len(k))
		}
		id := KeyID(k.Public().(ed25519.PublicKey))
		if seen[id] {
			return nil, fmt.Errorf("signing key %s given twice", id)
		}
		seen[id] = true
		s.keys, s.ids = append(s.keys, k), append(s.ids, id)
	}
	return s, nil
}

// KeyID is the id of the key that signs.
func (s *Signer) KeyID() string { return s.ids[0] }

// KeyIDs lists the ids of every key, the signing one first.
func (s *Signer) KeyIDs() []string { return append([]string(nil), s.ids...) }

// Verifier trusts the public keys of every key of the signer, so that the
// control plane recognises its own values signed before a rotation.
func (s *Signer) Verifier() *Verifier {
	pubs := make([]ed25519.PublicKey, len(s.keys))
	for i, k := range s.keys {
		pubs[i] = k.Public().(ed25519.PublicKey)
	}
	v, _ := NewVerifier(pubs...) // the keys are distinct: NewSigner checked
	return v
}

// Sign returns the envelope of payload (a JSON value, stored verbatim) for
// the etcd key it will be written under. payload must be valid JSON.
func (s *Signer) Sign(key string, payload []byte) ([]byte, error) {
	if !json.Valid(payload) {
		return nil, errors.New("signing: the payload is not valid JSON")
	}
	sig := ed25519.Sign(s.keys[0], signedMessage(key, payload))
	sigs, err := json.Marshal([]Signature{{KeyID: s.ids[0], Alg: SignatureAlg, Sig: base64.StdEncoding.EncodeToString(sig)}})
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	// Built by hand so that the payload is stored byte for byte.
	out := make([]byte, 0, len(payload)+len(sigs)+32)
	out = append(out, `{"payload":`...)
	out = append(out, payload...)
	out = append(out, `,"signatures":`...)
	out = append(out, sigs...)
	return append(out, '}'), nil
}

// Verifier checks envelopes against a set of trusted public keys. A nil
// *Verifier trusts nothing and checks nothing: Open then accepts unsigned
// values (the node's --insecure-accept-unsigned). Safe for concurrent use.
type Verifier struct {
	keys map[string]ed25519.PublicKey
}

// NewVerifier trusts keys; it fails without keys or with one given twice.
func NewVerifier(keys ...ed25519.PublicKey) (*Verifier, error) {
	if len(keys) == 0 {
		return nil, errors.New("no trusted key")
	}
	v := &Verifier{keys: map[string]ed25519.PublicKey{}}
	for _, k := range keys {
		if len(k) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("trusted key has %d bytes, want an Ed25519 public key", len(k))
		}
		id := KeyID(k)
		if _, dup := v.keys[id]; dup {
			return nil, fmt.Errorf("trusted key %s given twice", id)
		}
		v.keys[id] = k
	}
	return v, nil
}

// KeyIDs lists the trusted keys' ids, sorted; nil for a nil Verifier.
func (v *Verifier) KeyIDs() []string {
	if v == nil {
		return nil
	}
	ids := make([]string, 0, len(v.keys))
	for id := range v.keys {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Open checks the envelope data stored under the etcd key and returns its
// payload and the id of the key that signed it. It returns an error wrapping
// ErrUnsigned, ErrUnknownKey or ErrBadSignature, and names the key ids
// involved. A nil Verifier returns the payload of an envelope unchecked, or
// data itself when it is not an envelope (kid "").
func (v *Verifier) Open(key string, data []byte) (payload []byte, kid string, err error) {
	env, isEnv := parseEnvelope(data)
	if v == nil {
		if isEnv {
			return env.Payload, "", nil
		}
		return data, "", nil
	}
	if !isEnv {
		return nil, "", ErrUnsigned
	}
	if len(env.Signatures) == 0 {
		return nil, "", fmt.Errorf("%w: the envelope carries no signature", ErrUnsigned)
	}
	msg := signedMessage(key, env.Payload)
	var unknown []string
	var bad error
	for _, s := range env.Signatures {
		pub, ok := v.keys[s.KeyID]
		if !ok {
			unknown = append(unknown, s.KeyID)
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(s.Sig)
		switch {
		case s.Alg != SignatureAlg:
			bad = fmt.Errorf("%w: key %s: algorithm %q, want %s", ErrBadSignature, s.KeyID, s.Alg, SignatureAlg)
		case err != nil || len(sig) != ed25519.SignatureSize:
			bad = fmt.Errorf("%w: key %s: the signature is not %d bytes of base64", ErrBadSignature, s.KeyID, ed25519.SignatureSize)
		case !ed25519.Verify(pub, msg, sig):
			bad = fmt.Errorf("%w (key %s, etcd key %s)", ErrBadSignature, s.KeyID, key)
		default:
			return env.Payload, s.KeyID, nil
		}
	}
	if bad != nil {
		return nil, "", bad
	}
	return nil, "", fmt.Errorf("%w: signed by %s; trusted: %s", ErrUnknownKey, strings.Join(unknown, ", "), strings.Join(v.KeyIDs(), ", "))
}

// parseEnvelope reads data as an envelope; ok is false when it is not one
// (not a JSON object with a payload member).
func parseEnvelope(data []byte) (envelope, bool) {
	var env envelope
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(trimmed, &env) != nil || len(env.Payload) == 0 {
		return envelope{}, false
	}
	return env, true
}

// ParsePrivateKeys reads every PKCS#8 "PRIVATE KEY" PEM block of data (as
// `openssl genpkey -algorithm ed25519` or `sluice-admin keygen` writes it);
// each must be an Ed25519 key. It fails when there is none.
func ParsePrivateKeys(data []byte) ([]ed25519.PrivateKey, error) {
	var out []ed25519.PrivateKey
	for i := 1; ; i++ {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "PRIVATE KEY" {
			return nil, fmt.Errorf("PEM block %d is %q, want \"PRIVATE KEY\" (PKCS#8)", i, b.Type)
		}
		k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", i, err)
		}
		ek, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("PEM block %d is a %T, want an Ed25519 key", i, k)
		}
		out = append(out, ek)
	}
	if len(out) == 0 {
		return nil, errors.New("no \"PRIVATE KEY\" PEM block")
	}
	return out, nil
}

// ParsePublicKeys reads every PKIX "PUBLIC KEY" PEM block of data; each must
// be an Ed25519 key. It fails when there is none.
func ParsePublicKeys(data []byte) ([]ed25519.PublicKey, error) {
	var out []ed25519.PublicKey
	for i := 1; ; i++ {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("PEM block %d is %q, want \"PUBLIC KEY\" (PKIX)", i, b.Type)
		}
		k, err := x509.ParsePKIXPublicKey(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", i, err)
		}
		ek, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("PEM block %d is a %T, want an Ed25519 key", i, k)
		}
		out = append(out, ek)
	}
	if len(out) == 0 {
		return nil, errors.New("no \"PUBLIC KEY\" PEM block")
	}
	return out, nil
}

// MarshalPrivateKey is k as a PKCS#8 "PRIVATE KEY" PEM block.
func MarshalPrivateKey(k ed25519.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("encoding private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// MarshalPublicKey is k as a PKIX "PUBLIC KEY" PEM block.
func MarshalPublicKey(k ed25519.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		return nil, fmt.Errorf("encoding public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// ReadSigner reads the PKCS#8 PEM files (each may hold several keys) in
// order: the first key of the first file signs, every key is trusted by
// Signer.Verifier. Errors name the file.
func ReadSigner(files ...string) (*Signer, error) {
	var keys []ed25519.PrivateKey
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading signing key: %w", err)
		}
		ks, err := ParsePrivateKeys(data)
		if err != nil {
			return nil, fmt.Errorf("signing key %s: %w", f, err)
		}
		keys = append(keys, ks...)
	}
	return NewSigner(keys...)
}

// ReadVerifier reads the PKIX PEM files (each may hold several keys) and
// trusts every key in them. Errors name the file.
func ReadVerifier(files ...string) (*Verifier, error) {
	var keys []ed25519.PublicKey
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading trusted keys: %w", err)
		}
		ks, err := ParsePublicKeys(data)
		if err != nil {
			return nil, fmt.Errorf("trusted keys %s: %w", f, err)
		}
		keys = append(keys, ks...)
	}
	return NewVerifier(keys...)
}
