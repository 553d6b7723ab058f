package snapshot

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/identity/identitytest"
	"github.com/sluicegw/sluice/dataplane/metrics"
)

const idIss, idAud = "https://idp.test", "shop-api"

var (
	idIssuerOnce sync.Once
	idIssuer     *identitytest.Issuer
)

func testIdIssuer(tb testing.TB) *identitytest.Issuer {
	idIssuerOnce.Do(func() { idIssuer = identitytest.NewIssuer(tb, idIss) })
	return idIssuer
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// identityRules is a route with an identity over a JWKS file and a
// per-user limit of 2 per hour on jwt:sub.
func identityRules(tb testing.TB, upstream string, required bool) string {
	tb.Helper()
	file := filepath.Join(tb.TempDir(), "jwks.json")
	if err := os.WriteFile(file, testIdIssuer(tb).JWKS(tb), 0o600); err != nil {
		tb.Fatal(err)
	}
	return fmt.Sprintf(`namespace: t
routes:
  - id: api
    match: {pathPrefix: /api}
    upstream: {targets: [{url: %q}]}
  - id: open
    match: {pathPrefix: /open}
    upstream: {targets: [{url: %q}]}
identities:
  - id: users
    routes: [api]
    jwt:
      jwks: {file: %q}
      issuer: %s
      audiences: [%s]
      algorithms: [RS256, ES256, EdDSA]
      clockSkew: 30s
      required: %v
limits:
  - id: per-user
    routes: [api]
    key: [jwt:sub]
    algorithm: token_bucket
    rate: 2
    period: 1h
`, upstream, upstream, file, idIss, idAud, required)
}

// compileLogged compiles rules with a logger writing to log and the
// metrics returned.
func compileLogged(tb testing.TB, rules string, log *syncBuffer) (*Snapshot, *metrics.Metrics) {
	tb.Helper()
	rs, err := api.Decode([]byte(rules))
	if err != nil {
		tb.Fatal(err)
	}
	v, err := api.Validated(rs)
	if err != nil {
		tb.Fatal(err)
	}
	m := metrics.New()
	s, err := Compile(context.Background(), v, Meta{Version: 1}, nil, Options{Metrics: m, Logger: slog.New(slog.NewJSONHandler(log, nil))})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Retire(nil) })
	return s, m
}

func okUpstream(tb testing.TB) string {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	tb.Cleanup(up.Close)
	return up.URL
}

func serveWith(s *Snapshot, path string, h http.Header) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", path, nil)
	r.RemoteAddr = "192.0.2.7:4000"
	for k, vs := range h {
		r.Header[k] = vs
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

// TestIdentityBadTokensThroughServe sends every shape of bad token through
// the snapshot's serve path: each is answered 401 problem+json with
// WWW-Authenticate: Bearer error="invalid_token" (gRPC: UNAUTHENTICATED),
// logged with its reason and never its text, and none is keyed as an
// anonymous caller: the anonymous bucket is still full afterwards.
func TestIdentityBadTokensThroughServe(t *testing.T) {
	t.Parallel()
	is := testIdIssuer(t)
	var log syncBuffer
	s, m := compileLogged(t, identityRules(t, okUpstream(t), false), &log)
	bad := is.BadTokens(t, idAud, time.Now())
	for _, bt := range bad {
		h := http.Header{"Authorization": {"Bearer " + bt.Token}}
		if bt.Twice {
			h.Add("Authorization", "Bearer "+bt.Token)
		}
		w := serveWith(s, "/api/x", h)
		if w.Code != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", bt.Desc, w.Code)
			continue
		}
		if got := w.Header().Get("Www-Authenticate"); got != `Bearer error="invalid_token"` {
			t.Errorf("%s: WWW-Authenticate %q", bt.Desc, got)
		}
		if ct := w.Header().Get("Content-Type"); ct != api.ContentTypeProblemJSON {
			t.Errorf("%s: content type %q", bt.Desc, ct)
		}
		// gRPC: UNAUTHENTICATED in the Trailers-Only form.
		h.Set("Content-Type", "application/grpc")
		g := serveWith(s, "/api/x", h)
		if g.Code != http.StatusOK || g.Header().Get("Grpc-Status") != "16" {
			t.Errorf("%s: gRPC answer %d grpc-status %q, want 200 and 16", bt.Desc, g.Code, g.Header().Get("Grpc-Status"))
		}
	}
	logs := log.String()
	for _, bt := range bad {
		if len(bt.Token) > 20 && strings.Contains(logs, bt.Token[len(bt.Token)-20:]) {
			t.Errorf("%s: the token's text is in the decision log", bt.Desc)
		}
	}
	for _, reason := range []string{"bad signature", "algorithm not accepted", "no key for the token's kid", "expired", "wrong audience", "token too large"} {
		if !strings.Contains(logs, `"reason":"`+reason+`"`) {
			t.Errorf("no decision line with reason %q", reason)
		}
	}
	if !strings.Contains(logs, "IDENTITY_DECISION") {
		t.Error("no IDENTITY_DECISION line")
	}
	// Bad tokens consumed nothing: the anonymous (missing) bucket still
	// admits its 2, then refuses.
	for i, want := range []int{200, 200, 429} {
		if w := serveWith(s, "/api/x", nil); w.Code != want {
			t.Fatalf("anonymous request %d: status %d, want %d", i, w.Code, want)
		}
	}
	if got := testutil.ToFloat64(m.IdentityDecisions.WithLabelValues("users", "invalid")); got != float64(2*len(bad)) {
		t.Errorf("invalid decisions %v, want %d", got, 2*len(bad))
	}
	if got := testutil.ToFloat64(m.IdentityDecisions.WithLabelValues("users", "missing")); got != 3 {
		t.Errorf("missing decisions %v, want 3", got)
	}
}

// TestIdentityKeysOnVerifiedSubject checks that jwt:sub keys each verified
// caller apart (alice's 2 do not touch bob's), with tokens of every
// algorithm, and that a route without an identity is not checked.
func TestIdentityKeysOnVerifiedSubject(t *testing.T) {
	t.Parallel()
	is := testIdIssuer(t)
	s, m := compileLogged(t, identityRules(t, okUpstream(t), false), &syncBuffer{})
	now := time.Now()
	alice := http.Header{"Authorization": {"Bearer " + is.Sign(t, "rsa1", is.Claims("alice", idAud, now, nil))}}
	alice2 := http.Header{"Authorization": {"bearer " + is.Sign(t, "ed1", is.Claims("alice", idAud, now, nil))}}
	bob := http.Header{"Authorization": {"Bearer " + is.Sign(t, "ec1", is.Claims("bob", idAud, now, nil))}}
	for i, c := range []struct {
		h    http.Header
		want int
	}{{alice, 200}, {alice2, 200}, {alice, 429}, {bob, 200}, {bob, 200}, {bob, 429}} {
		if w := serveWith(s, "/api/x", c.h); w.Code != c.want {
			t.Fatalf("request %d: status %d, want %d", i, w.Code, c.want)
		}
	}
	// The open route has no identity: a bad token there is not judged.
	if w := serveWith(s, "/open/x", http.Header{"Authorization": {"Bearer nonsense"}}); w.Code != 200 {
		t.Fatalf("open route: %d", w.Code)
	}
	if got := testutil.ToFloat64(m.IdentityDecisions.WithLabelValues("users", "valid")); got != 6 {
		t.Errorf("valid decisions %v, want 6", got)
	}
}

// TestIdentityRequired checks that a required identity answers 401 to a
// request without a token.
func TestIdentityRequired(t *testing.T) {
	t.Parallel()
	is := testIdIssuer(t)
	s, _ := compileLogged(t, identityRules(t, okUpstream(t), true), &syncBuffer{})
	w := serveWith(s, "/api/x", nil)
	if w.Code != http.StatusUnauthorized || !strings.HasPrefix(w.Header().Get("Www-Authenticate"), "Bearer") {
		t.Fatalf("no token: %d %q", w.Code, w.Header().Get("Www-Authenticate"))
	}
	tok := is.Sign(t, "rsa1", is.Claims("alice", idAud, time.Now(), nil))
	if w := serveWith(s, "/api/x", http.Header{"Authorization": {"Bearer " + tok}}); w.Code != 200 {
		t.Fatalf("valid token: %d", w.Code)
	}
}

// TestIdentityCarriedOverSwap checks that an unchanged identity keeps its
// verifier (keys, cache) across a swap, and that a retired one's key
// source stops.
func TestIdentityCarriedOverSwap(t *testing.T) {
	t.Parallel()
	rules := identityRules(t, okUpstream(t), false)
	rs, _ := api.Decode([]byte(rules))
	v, err := api.Validated(rs)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Metrics: metrics.New(), Logger: slog.New(slog.NewJSONHandler(&syncBuffer{}, nil))}
	a, err := Compile(context.Background(), v, Meta{Version: 1}, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Compile(context.Background(), v, Meta{Version: 2}, a, opts)
	if err != nil {
		t.Fatal(err)
	}
	if a.identities["users"].verifier != b.identities["users"].verifier {
		t.Fatal("an unchanged identity got a new verifier")
	}
	a.Retire(b)
	if b.identities["users"].verifier.Keys().Status().Keys == 0 {
		t.Fatal("the carried key source lost its keys")
	}
	b.Retire(nil)
}

// TestIdentityClassByClaims checks the serve path's order: the identity
// step sets the claims before the request is classified, so a class that
// matches claims (here gold, with a reserve) takes a verified gold caller
// from an untrusted peer, and no caller whose token says otherwise.
func TestIdentityClassByClaims(t *testing.T) {
	t.Parallel()
	is := testIdIssuer(t)
	rules := identityRules(t, okUpstream(t), false) + `  - id: in-flight
    routes: [api]
    algorithm: concurrency
    rate: 10
    reserve: {gold: 0.3}
classes:
  - id: gold
    match: {claims: {tier: gold}}
`
	s, m := compileLogged(t, rules, &syncBuffer{})
	now := time.Now()
	gold := is.Sign(t, "rsa1", is.Claims("gina", idAud, now, map[string]any{"tier": "gold"}))
	silver := is.Sign(t, "rsa1", is.Claims("sam", idAud, now, map[string]any{"tier": "silver"}))
	for _, tok := range []string{gold, silver, silver} {
		if w := serveWith(s, "/api/x", http.Header{"Authorization": {"Bearer " + tok}}); w.Code != 200 {
			t.Fatalf("status %d", w.Code)
		}
	}
	if got := testutil.ToFloat64(m.LimitDecision("in-flight", metrics.DecisionAllow, "gold", "", "")); got != 1 {
		t.Errorf("gold admissions %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.LimitDecision("in-flight", metrics.DecisionAllow, "default", "", "")); got != 2 {
		t.Errorf("default admissions %v, want 2", got)
	}
}
