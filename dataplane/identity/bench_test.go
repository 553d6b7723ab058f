package identity

import (
	"testing"
	"time"
)

// BenchmarkCachedToken is the request-path cost of a token seen before:
// reading it from the header and one cache lookup (target ≤ 300 ns, 0
// allocations), against its floor in the same run: one lookup of the
// token in a plain map.
func BenchmarkCachedToken(b *testing.B) {
	is := testIssuer(b)
	v := newVerifier(b, nil)
	now := time.Now()
	tok := is.Sign(b, "rsa1", is.Claims("alice", testAud, now, map[string]any{"plan": "pro"}))
	h := bearer(tok)
	ns := now.UnixNano()
	if res, _, r := v.Check(h, ns); res != Valid {
		b.Fatal(r)
	}
	b.Run("check", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				res, c, _ := v.Check(h, ns)
				if res != Valid {
					b.Fatal("not valid")
				}
				if s, _ := c.Get("sub"); s == "" {
					b.Fatal("no sub")
				}
			}
		})
	})
	b.Run("peer-map-lookup", func(b *testing.B) {
		m := map[string]int{tok: 1}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if m[h["Authorization"][0][len("Bearer "):]] != 1 {
					b.Fatal("missing")
				}
			}
		})
	})
}

// BenchmarkFirstVerification is the cost of a token never seen: parsing,
// the signature check (the crypto) and flattening the claims, per
// algorithm.
func BenchmarkFirstVerification(b *testing.B) {
	is := testIssuer(b)
	v := newVerifier(b, nil)
	now := time.Now()
	for _, kid := range []string{"rsa1", "ec1", "ed1"} {
		tok := is.Sign(b, kid, is.Claims("alice", testAud, now, map[string]any{"plan": "pro"}))
		alg := map[string]string{"rsa1": "RS256", "ec1": "ES256", "ed1": "EdDSA"}[kid]
		b.Run(alg, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if c, _, r := v.verify(tok, now.UnixNano()); c == nil {
					b.Fatal(r)
				}
			}
		})
	}
}
