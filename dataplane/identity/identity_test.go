package identity

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/identity/identitytest"
)

const testIss, testAud = "https://idp.test", "shop-api"

var (
	issOnce sync.Once
	iss     *identitytest.Issuer
)

// testIssuer is one issuer shared by the package's tests (RSA key
// generation is slow).
func testIssuer(tb testing.TB) *identitytest.Issuer {
	issOnce.Do(func() { iss = identitytest.NewIssuer(tb, testIss) })
	return iss
}

// newVerifier returns a verifier over a JWKS file holding the issuer's
// keys, loaded.
func newVerifier(tb testing.TB, mutate func(*api.Identity)) *Verifier {
	tb.Helper()
	is := testIssuer(tb)
	file := filepath.Join(tb.TempDir(), "jwks.json")
	if err := os.WriteFile(file, is.JWKS(tb), 0o600); err != nil {
		tb.Fatal(err)
	}
	id := api.Identity{ID: "users", JWT: &api.JWTSettings{JWKS: api.JWKSSource{File: file}, Issuer: testIss,
		Audiences: []string{testAud}, Algorithms: []api.JWTAlgorithm{"RS256", "ES256", "EdDSA"}, ClockSkew: api.Duration(30 * time.Second)}}
	if mutate != nil {
		mutate(&id)
	}
	ks := NewKeySource(KeySettings{Source: id.JWT.JWKS})
	if err := ks.Load(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return New(Settings{Identity: id, Keys: ks})
}

func bearer(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }

func TestVerifyGoodTokens(t *testing.T) {
	t.Parallel()
	is := testIssuer(t)
	v := newVerifier(t, nil)
	now := time.Now()
	for _, kid := range []string{"rsa1", "ec1", "ed1"} {
		t.Run(kid, func(t *testing.T) {
			tok := is.Sign(t, kid, is.Claims("alice", testAud, now, map[string]any{
				"plan": "pro", "n": 42, "ok": true, "org": map[string]any{"id": "acme", "size": 7}, "roles": []any{"b", "a"}}))
			for range 2 { // the second from the cache
				res, c, reason := v.Check(bearer(tok), now.UnixNano())
				if res != Valid {
					t.Fatalf("result %s (%s)", Results[res], reason)
				}
				for path, want := range map[string]string{"sub": "alice", "plan": "pro", "n": "42", "ok": "true",
					"org.id": "acme", "org.size": "7", "org": `{"id":"acme","size":7}`, "roles": `["b","a"]`} {
					if got, _ := c.Get(path); got != want {
						t.Errorf("claim %s = %q, want %q", path, got, want)
					}
				}
			}
		})
	}
	if res, _, _ := v.Check(http.Header{}, now.UnixNano()); res != Missing {
		t.Errorf("no header: %s", Results[res])
	}
	if res, _, _ := v.Check(http.Header{"Authorization": {"Basic YTpi"}}, now.UnixNano()); res != Missing {
		t.Errorf("another scheme: %s", Results[res])
	}
	if res, _, _ := v.Check(http.Header{"Authorization": {"bearer " + is.Sign(t, "ed1", is.Claims("a", testAud, now, nil))}}, now.UnixNano()); res != Valid {
		t.Errorf("scheme in lower case: %s", Results[res])
	}
}

// TestVerifyBadTokens runs every shape of bad token: each is Invalid, with
// the reason it failed for, never Missing.
func TestVerifyBadTokens(t *testing.T) {
	t.Parallel()
	is := testIssuer(t)
	v := newVerifier(t, nil)
	now := time.Now()
	want := map[string]string{
		"bad signature": ReasonSignature, "tampered payload": ReasonSignature,
		"alg confusion RS256 to HS256 with the public key as secret": ReasonAlgorithm,
		"alg none": ReasonAlgorithm, "unknown kid": ReasonUnknownKey, "expired": ReasonExpired,
		"not yet valid": ReasonNotYetValid, "wrong issuer": ReasonIssuer, "wrong audience": ReasonAudience,
		"no exp": ReasonNoExpiry, "malformed base64": ReasonMalformed, "not a JWT": ReasonMalformed,
		"two signatures (JWS JSON serialization)": ReasonMalformed, "huge token": ReasonTooLarge,
		"two Authorization headers": ReasonTwice,
	}
	for _, bt := range is.BadTokens(t, testAud, now) {
		t.Run(bt.Desc, func(t *testing.T) {
			h := bearer(bt.Token)
			if bt.Twice {
				h.Add("Authorization", "Bearer "+bt.Token)
			}
			for i := range 2 { // the second may come from the cache
				res, c, reason := v.Check(h, now.UnixNano())
				if res != Invalid || c != nil {
					t.Fatalf("try %d: result %s, claims %v", i, Results[res], c)
				}
				if reason != want[bt.Desc] {
					t.Errorf("try %d: reason %q, want %q", i, reason, want[bt.Desc])
				}
			}
		})
	}
}

// TestVerifyClockSkewAndCachedExpiry checks exp and nbf within the skew,
// and that a cached token stops being valid at its exp + skew.
func TestVerifyClockSkewAndCachedExpiry(t *testing.T) {
	t.Parallel()
	is := testIssuer(t)
	v := newVerifier(t, nil)
	now := time.Now().Truncate(time.Second)
	c := is.Claims("bob", testAud, now, nil)
	c["exp"] = now.Add(10 * time.Second).Unix()
	c["nbf"] = now.Add(20 * time.Second).Unix() // within the 30s skew
	tok := is.Sign(t, "ec1", c)
	if res, _, r := v.Verify(tok, now.UnixNano()); res != Valid {
		t.Fatalf("within skew: %s %s", Results[res], r)
	}
	if res, _, _ := v.Verify(tok, now.Add(39*time.Second).UnixNano()); res != Valid {
		t.Fatalf("cached, before exp+skew: %s", Results[res])
	}
	if res, _, r := v.Verify(tok, now.Add(41*time.Second).UnixNano()); res != Invalid || r != ReasonExpired {
		t.Fatalf("cached, after exp+skew: %s %s", Results[res], r)
	}
}

func TestVerifyCookieAndRequired(t *testing.T) {
	t.Parallel()
	is := testIssuer(t)
	v := newVerifier(t, func(id *api.Identity) { id.JWT.From = &api.TokenSource{Cookie: "session"}; id.JWT.Required = true })
	now := time.Now()
	tok := is.Sign(t, "rsa1", is.Claims("carol", testAud, now, nil))
	res, c, _ := v.Check(http.Header{"Cookie": {"a=b; session=" + tok}}, now.UnixNano())
	if sub, _ := c.Get("sub"); res != Valid || sub != "carol" {
		t.Fatalf("cookie: %s %q", Results[res], sub)
	}
	if res, _, r := v.Check(http.Header{"Cookie": {"session=" + tok, "session=" + tok}}, now.UnixNano()); res != Invalid || r != ReasonTwice {
		t.Fatalf("the token cookie twice: %s %s", Results[res], r)
	}
	if res, _, _ := v.Check(bearer(tok), now.UnixNano()); res != Missing || !v.Required() {
		t.Fatalf("header on a cookie identity: %s", Results[res])
	}
}

// TestCacheBounded checks that the cache never holds more than its bound.
func TestCacheBounded(t *testing.T) {
	t.Parallel()
	c := NewCache(64)
	for i := range 10000 {
		c.put(string(rune('a'+i%26))+string(rune('A'+i/26%26))+string(rune('0'+i/676)), entry{until: 1})
	}
	if n := c.Len(); n > 64 {
		t.Fatalf("%d entries, bound 64", n)
	}
}

// TestJWKSURLRotation serves a JWKS from an HTTP server and rotates keys:
// a token of a new kid is accepted once the set is refetched (an unknown
// kid asks for it, at most once per refresh/10), the old kid until it is
// removed, and a failed fetch keeps the keys.
func TestJWKSURLRotation(t *testing.T) {
	t.Parallel()
	is := testIssuer(t)
	var doc atomic.Pointer[[]byte]
	var fail atomic.Bool
	var fetches atomic.Int64
	first := is.JWKS(t, "rsa1")
	doc.Store(&first)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		if fail.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		w.Write(*doc.Load())
	}))
	defer srv.Close()
	clock := time.Unix(1_000_000, 0)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	src := api.JWKSSource{URL: srv.URL, Refresh: api.Duration(time.Hour)}
	ks := NewKeySource(KeySettings{Source: src, Now: now})
	ks.Start(context.Background(), 5*time.Second)
	defer ks.Close()
	id := api.Identity{ID: "u", JWT: &api.JWTSettings{JWKS: src, Issuer: testIss, Algorithms: []api.JWTAlgorithm{"RS256", "ES256"}}}
	v := New(Settings{Identity: id, Keys: ks})
	tnow := time.Now()
	rsaTok := is.Sign(t, "rsa1", is.Claims("a", testAud, tnow, nil))
	ecTok := is.Sign(t, "ec1", is.Claims("b", testAud, tnow, nil))
	if res, _, r := v.Verify(rsaTok, tnow.UnixNano()); res != Valid {
		t.Fatalf("rsa1 first: %s %s", Results[res], r)
	}
	// Rotation: ec1 added. The unknown kid asks for a refetch; the
	// loader fetched less than refresh/10 ago, so it waits.
	both := is.JWKS(t, "rsa1", "ec1")
	doc.Store(&both)
	before := fetches.Load()
	if res, _, r := v.Verify(ecTok, tnow.UnixNano()); res != Invalid || r != ReasonUnknownKey {
		t.Fatalf("ec1 before refetch: %s %s", Results[res], r)
	}
	waitFor(t, func() bool { return len(ks.refetch) == 0 })
	if got := fetches.Load(); got != before {
		t.Fatalf("refetched %d times within refresh/10", got-before)
	}
	advance(6 * time.Minute) // past refresh/10
	v.Verify(ecTok, tnow.UnixNano())
	waitFor(t, func() bool { return ks.Status().Keys == 2 })
	if res, _, r := v.Verify(ecTok, tnow.UnixNano()); res != Valid {
		t.Fatalf("ec1 after refetch: %s %s", Results[res], r)
	}
	// A flood of unknown kids within refresh/10 fetches at most once.
	before = fetches.Load()
	other := identitytest.SignWith(t, "ES256", is.Key(t, "ec1").Private, "nope", is.Claims("c", testAud, tnow, nil))
	for range 100 {
		v.Verify(other, tnow.UnixNano())
	}
	time.Sleep(50 * time.Millisecond) // let the loader drain its channel (no window waited for)
	if got := fetches.Load() - before; got > 1 {
		t.Fatalf("%d fetches for 100 unknown-kid tokens within refresh/10", got)
	}
	// A failed fetch keeps the keys.
	fail.Store(true)
	if err := ks.Load(context.Background()); err == nil {
		t.Fatal("a 500 loaded")
	}
	if res, _, _ := v.Verify(rsaTok, tnow.UnixNano()); res != Valid || ks.Status().Keys != 2 {
		t.Fatalf("after a failed fetch: %s, %d keys", Results[res], ks.Status().Keys)
	}
	// rsa1 removed: a token verified before is still cached (until exp),
	// a new one of that kid is refused.
	fail.Store(false)
	only := is.JWKS(t, "ec1")
	doc.Store(&only)
	if err := ks.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	fresh := is.Sign(t, "rsa1", is.Claims("d", testAud, tnow, nil))
	if res, _, r := v.Verify(fresh, tnow.UnixNano()); res != Invalid || r != ReasonUnknownKey {
		t.Fatalf("removed kid: %s %s", Results[res], r)
	}
}

// TestJWKSFileReload checks that a changed file is read again by the
// loader, and that a broken file keeps the keys.
func TestJWKSFileReload(t *testing.T) {
	t.Parallel()
	is := testIssuer(t)
	file := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(file, is.JWKS(t, "rsa1"), 0o600); err != nil {
		t.Fatal(err)
	}
	ks := NewKeySource(KeySettings{Source: api.JWKSSource{File: file}, FilePoll: 10 * time.Millisecond})
	ks.Start(context.Background(), 5*time.Second)
	defer ks.Close()
	if ks.Status().Keys != 1 {
		t.Fatalf("%+v", ks.Status())
	}
	if err := os.WriteFile(file, is.JWKS(t, "rsa1", "ed1", "ec1"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return ks.Status().Keys == 3 })
	if err := os.WriteFile(file, []byte("{not json, and longer than before........................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................}"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return ks.Status().Failures > 0 })
	if ks.Status().Keys != 3 {
		t.Fatalf("a broken file dropped the keys: %+v", ks.Status())
	}
}

// waitFor polls cond (a goroutine's progress, not a time window).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
