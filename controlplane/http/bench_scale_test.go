package http_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	sluice "github.com/sluicegw/sluice/controlplane"
)

// BenchmarkPutDraft measures PUT /namespaces/{ns}/draft of a whole rule set
// of 1k, 10k and 20k rules (bigRuleSet: half routes, half limits), through
// the HTTP server and Postgres: decode, validate, canonical form, checksum,
// storing the draft. Each iteration changes one limit's rate, so that every
// PUT stores a new revision.
func BenchmarkPutDraft(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 20_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			e := newEnv(b, envOptions{})
			admin := e.login("admin")
			admin.must(http.StatusCreated, "POST", "/api/v1/namespaces", map[string]string{"name": "big"})
			ed := e.token(e.mustUser(admin, "ed", sluice.RoleEditor), sluice.RoleEditor)
			rs := bigRuleSet("big", n)
			_, etag := ed.draft("big")
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				b.StopTimer()
				i++
				rs.Limits[0].Rate = int64(1000 + i)
				body, err := json.Marshal(rs)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				r := ed.must(http.StatusOK, "PUT", "/api/v1/namespaces/big/draft", body, "If-Match: "+etag)
				etag = r.header.Get("ETag")
			}
			b.ReportMetric(float64(len(mustMarshal(b, rs))), "body-bytes")
		})
	}
}

func mustMarshal(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
