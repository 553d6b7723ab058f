package snapshot

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicegw/sluice/dataplane/reqview"
)

// BenchmarkDecideIdentity is the decision of a request on a route with an
// identity and a limit keyed on jwt:sub with tiers' worth of claims, for a
// token verified before (a cache hit), against its peer: the same route
// keyed on ip without an identity.
func BenchmarkDecideIdentity(b *testing.B) {
	is := testIdIssuer(b)
	file := filepath.Join(b.TempDir(), "jwks.json")
	if err := os.WriteFile(file, is.JWKS(b), 0o600); err != nil {
		b.Fatal(err)
	}
	s := MustCompile(b, fmt.Sprintf(`namespace: bench
routes:
  - {id: jwt, match: {pathPrefix: /jwt}, upstream: {targets: [{url: "http://127.0.0.1:1"}]}}
  - {id: ip, match: {pathPrefix: /ip}, upstream: {targets: [{url: "http://127.0.0.1:1"}]}}
identities:
  - id: users
    routes: [jwt]
    jwt: {jwks: {file: %q}, issuer: %s, audiences: [%s], algorithms: [RS256]}
limits:
  - {id: per-user, routes: [jwt], key: [jwt:sub], algorithm: token_bucket, rate: 1000000000, period: 1s}
  - {id: per-ip, routes: [ip], key: [ip], algorithm: token_bucket, rate: 1000000000, period: 1s}
`, file, idIss, idAud), func() int64 { return time.Now().UnixNano() })
	tok := is.Sign(b, "rsa1", is.Claims("alice", idAud, time.Now(), map[string]any{"plan": "pro"}))
	for _, tc := range []struct{ name, path string }{{"jwt", "/jwt/x"}, {"ip", "/ip/x"}} {
		b.Run(tc.name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodGet, tc.path, nil)
			r.Header.Set("Authorization", "Bearer "+tok)
			x := &nopExchange{h: http.Header{}}
			base := reqview.FromRequest(r)
			base.RequestID = "bench-1"
			base.ClientIP = netip.MustParseAddr("192.0.2.1")
			v := base
			serve(s, x, &v) // the first verification
			if v.Claims == nil && tc.name == "jwt" {
				b.Fatal("the token did not verify")
			}
			b.ReportAllocs()
			for b.Loop() {
				v := base
				clear(x.h)
				serve(s, x, &v)
			}
		})
	}
}
