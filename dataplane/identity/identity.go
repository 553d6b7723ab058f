// Package identity verifies callers' JWTs for the gateway (the rule set's
// identities): it reads the token where the identity says (a header with an
// auth scheme, or a cookie), verifies it with go-jose (signature with a key
// of the identity's JWKS, algorithm from the identity's list, issuer,
// audience, exp and nbf within the clock skew), and flattens its claims
// into a reqview.Claims that limits, tiers and classes read.
//
// Nothing here checks a signature by hand: parsing, algorithm
// restriction and verification are go-jose's (jose.ParseSignedCompact with
// the allowed algorithms, which also refuses the JWS JSON serialization,
// so a token with two signatures is malformed).
//
// Verification is cached per token (Cache): a token seen before costs one
// map lookup and no allocation until its exp; a token that failed is
// remembered until the key set changes, so a flood of one bad token costs
// one signature check. Keys are loaded off the request path by a KeySource.
package identity

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/reqview"
)

type (
	rsaPublicKey   = rsa.PublicKey
	ecdsaPublicKey = ecdsa.PublicKey
	edPublicKey    = ed25519.PublicKey
)

// MaxTokenBytes bounds a token: a longer one is refused before it is
// parsed (Result TooLarge).
const MaxTokenBytes = 16 << 10

// Result is the outcome of reading and verifying a request's token.
type Result uint8

// The results of Verifier.Check.
const (
	// Missing: the request carries no token (or a header with another
	// auth scheme).
	Missing Result = iota
	// Valid: the token verified; the claims are set.
	Valid
	// Invalid: a token is present and failed; Reason says why.
	Invalid
)

// Results names each Result as the metric labels it.
var Results = [...]string{Missing: "missing", Valid: "valid", Invalid: "invalid"}

// The reasons a token is refused (logged and counted; never the token).
const (
	ReasonMalformed    = "malformed token"
	ReasonAlgorithm    = "algorithm not accepted"
	ReasonUnknownKey   = "no key for the token's kid"
	ReasonSignature    = "bad signature"
	ReasonExpired      = "expired"
	ReasonNotYetValid  = "not yet valid"
	ReasonIssuedFuture = "issued in the future"
	ReasonIssuer       = "wrong issuer"
	ReasonAudience     = "wrong audience"
	ReasonNoExpiry     = "no exp claim"
	ReasonTooLarge     = "token too large"
	ReasonTwice        = "token sent more than once"
	ReasonClaims       = "claims are not a JSON object"
)

// Verifier verifies the tokens of one identity. It is safe for concurrent
// use and immutable once built, except for its cache and key source.
type Verifier struct {
	id       string
	from     api.TokenSource
	expected jwt.Expected
	algs     []jose.SignatureAlgorithm
	skew     time.Duration
	required bool
	keys     *KeySource
	cache    *Cache
}

// Settings build a Verifier.
type Settings struct {
	// Identity is the validated identity (api.RuleSet.Validate).
	Identity api.Identity
	// Keys is the identity's key source (started by the caller).
	Keys *KeySource
	// CacheEntries bounds the verification cache; 0 means DefaultCacheEntries.
	CacheEntries int
}

// New returns a Verifier for s.
func New(s Settings) *Verifier {
	j := s.Identity.JWT
	v := &Verifier{id: s.Identity.ID, from: j.TokenFrom(), skew: j.ClockSkew.D(), required: j.Required,
		keys: s.Keys, cache: NewCache(s.CacheEntries)}
	v.from.Header = http.CanonicalHeaderKey(v.from.Header)
	v.expected = jwt.Expected{Issuer: j.Issuer, AnyAudience: j.Audiences}
	for _, a := range j.Algorithms {
		v.algs = append(v.algs, jose.SignatureAlgorithm(a))
	}
	return v
}

// ID is the identity's id.
func (v *Verifier) ID() string { return v.id }

// Required reports whether a request without a token is refused.
func (v *Verifier) Required() bool { return v.required }

// Keys returns the verifier's key source.
func (v *Verifier) Keys() *KeySource { return v.keys }

// Token returns the request's token as the identity reads it: ok false when
// there is none; a reason when it is there but unusable (sent twice, too
// large, an empty token after the scheme).
func (v *Verifier) Token(h http.Header) (token string, ok bool, reason string) {
	if v.from.Cookie != "" {
		tok, found := reqview.RawCookiePart(h["Cookie"], v.from.Cookie)
		if !found {
			return "", false, ""
		}
		if cookieCount(h["Cookie"], v.from.Cookie) > 1 {
			return "", true, ReasonTwice
		}
		return checkSize(tok)
	}
	vals := h[v.from.Header]
	if len(vals) == 0 {
		return "", false, ""
	}
	if len(vals) > 1 {
		return "", true, ReasonTwice
	}
	val := vals[0]
	if s := v.from.Scheme; s != "" {
		if len(val) < len(s) || !strings.EqualFold(val[:len(s)], s) || (len(val) > len(s) && val[len(s)] != ' ') {
			return "", false, "" // another auth scheme: not this identity's token
		}
		val = strings.TrimLeft(val[len(s):], " ")
	}
	if val == "" {
		return "", true, ReasonMalformed
	}
	return checkSize(val)
}

// cookieCount is the number of cookies named name in the Cookie lines: a
// token cookie sent twice is refused, as two Authorization lines are
// (which one an upstream reads is its parser's choice).
func cookieCount(lines []string, name string) int {
	n := 0
	for _, line := range lines {
		for line != "" {
			var part string
			part, line, _ = strings.Cut(line, ";")
			if k, _, ok := strings.Cut(strings.TrimSpace(part), "="); ok && k == name {
				n++
			}
		}
	}
	return n
}

func checkSize(tok string) (string, bool, string) {
	if len(tok) > MaxTokenBytes {
		return "", true, ReasonTooLarge
	}
	return tok, true, ""
}

// Check reads and verifies the request's token at now (Unix nanoseconds):
// Valid with its claims, Missing, or Invalid with the reason. A token
// verified before answers from the cache.
func (v *Verifier) Check(h http.Header, now int64) (Result, *reqview.Claims, string) {
	tok, ok, reason := v.Token(h)
	switch {
	case !ok:
		return Missing, nil, ""
	case reason != "":
		return Invalid, nil, reason
	}
	return v.Verify(tok, now)
}

// Verify verifies one token at now (Unix nanoseconds), through the cache.
func (v *Verifier) Verify(tok string, now int64) (Result, *reqview.Claims, string) {
	gen := v.keys.set.Load().gen
	if e, ok := v.cache.get(tok); ok {
		switch {
		case e.claims != nil && now < e.until:
			return Valid, e.claims, ""
		case e.claims != nil:
			return Invalid, nil, ReasonExpired
		case e.gen == gen && now < e.until:
			if e.reason == ReasonUnknownKey {
				// The loader may have declined the first ask (within
				// refresh/10): ask again, or a token signed by a new
				// key would wait out the negative entry after the
				// refetch became due.
				v.keys.Refetch()
			}
			return Invalid, nil, e.reason
		}
	}
	claims, until, reason := v.verify(tok, now)
	if claims != nil {
		v.cache.put(tok, entry{claims: claims, until: until})
		return Valid, claims, ""
	}
	if reason != ReasonMalformed && reason != ReasonAlgorithm {
		// Remember the failure while the key set stays as it is (a
		// token that is refused before any key is looked at is cheap to
		// refuse again, and not cached, so that garbage cannot fill the
		// cache).
		v.cache.put(tok, entry{reason: reason, gen: gen, until: now + int64(negativeTTL)})
	}
	return Invalid, nil, reason
}

// negativeTTL is how long a failed verification is remembered at most.
const negativeTTL = time.Minute

// verify verifies tok without the cache: the claims and the instant
// (exp + skew) until which they hold, or the reason it failed.
func (v *Verifier) verify(tok string, now int64) (*reqview.Claims, int64, string) {
	parsed, err := jwt.ParseSigned(tok, v.algs)
	if err != nil {
		var alg *jose.ErrUnexpectedSignatureAlgorithm
		if errors.As(err, &alg) {
			return nil, 0, ReasonAlgorithm
		}
		return nil, 0, ReasonMalformed
	}
	if len(parsed.Headers) != 1 {
		return nil, 0, ReasonMalformed
	}
	hdr := parsed.Headers[0]
	var buf [4]jose.JSONWebKey
	keys := v.keys.set.Load().find(hdr.KeyID, hdr.Algorithm, buf[:0])
	if len(keys) == 0 {
		v.keys.Refetch()
		return nil, 0, ReasonUnknownKey
	}
	var std jwt.Claims
	var raw map[string]json.RawMessage
	verified := false
	for _, k := range keys {
		if err := parsed.Claims(k.Key, &std, &raw); err == nil {
			verified = true
			break
		} else if !errors.Is(err, jose.ErrCryptoFailure) {
			return nil, 0, ReasonClaims
		}
	}
	if !verified {
		return nil, 0, ReasonSignature
	}
	exp := v.expected
	exp.Time = time.Unix(0, now)
	if err := std.ValidateWithLeeway(exp, v.skew); err != nil {
		switch {
		case errors.Is(err, jwt.ErrInvalidIssuer):
			return nil, 0, ReasonIssuer
		case errors.Is(err, jwt.ErrInvalidAudience):
			return nil, 0, ReasonAudience
		case errors.Is(err, jwt.ErrExpired):
			return nil, 0, ReasonExpired
		case errors.Is(err, jwt.ErrNotValidYet):
			return nil, 0, ReasonNotYetValid
		case errors.Is(err, jwt.ErrIssuedInTheFuture):
			return nil, 0, ReasonIssuedFuture
		}
		return nil, 0, ReasonClaims
	}
	if std.Expiry == nil {
		return nil, 0, ReasonNoExpiry
	}
	until := std.Expiry.Time().Add(v.skew).UnixNano()
	flat := make(map[string]string, len(raw))
	for name, val := range raw {
		flatten(flat, name, val, 0)
	}
	return reqview.NewClaims(v.id, flat), until, ""
}

// flatten adds the claim at path with JSON value val to flat (see
// reqview.Claims), and the members of an object under dotted paths.
func flatten(flat map[string]string, path string, val json.RawMessage, depth int) {
	var x any
	dec := json.NewDecoder(strings.NewReader(string(val)))
	dec.UseNumber()
	if dec.Decode(&x) != nil {
		return
	}
	switch t := x.(type) {
	case nil:
	case string:
		flat[path] = t
	case json.Number:
		flat[path] = t.String()
	case bool:
		flat[path] = strconv.FormatBool(t)
	default:
		canon, err := json.Marshal(x) // object keys sorted
		if err == nil {
			flat[path] = string(canon)
		}
		if obj, ok := val2obj(val); ok && depth < 8 {
			for k, sub := range obj {
				flatten(flat, path+"."+k, sub, depth+1)
			}
		}
	}
}

func val2obj(val json.RawMessage) (map[string]json.RawMessage, bool) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(val, &obj); err != nil {
		return nil, false
	}
	return obj, true
}
