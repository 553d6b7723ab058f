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

// BenchmarkDraftCheck measures POST /namespaces/{ns}/draft/check of a
// 1k-rule draft against a published 1k-rule version (what the console asks
// 300 ms after each edit): decode, validate, api.Warnings and the diff,
// nothing stored. The target is 100 ms an edit.
func BenchmarkDraftCheck(b *testing.B) {
	e := newEnv(b, envOptions{})
	admin := e.login("admin")
	admin.must(http.StatusCreated, "POST", "/api/v1/namespaces", map[string]string{"name": "big"})
	ed := e.mustUser(admin, "ed", sluice.RoleEditor)
	ap := e.mustUser(admin, "ap", sluice.RoleApprover)
	rs := bigRuleSet("big", 1_000)
	_, etag := ed.draft("big")
	ed.must(http.StatusOK, "PUT", "/api/v1/namespaces/big/draft", rs, "If-Match: "+etag)
	var ch sluice.Change
	ed.must(http.StatusCreated, "POST", "/api/v1/namespaces/big/changes", map[string]string{"title": "big"}).decode(b, &ch)
	ap.must(http.StatusOK, "POST", fmt.Sprintf("/api/v1/namespaces/big/changes/%d/approve", ch.ID), map[string]string{})
	ap.must(http.StatusCreated, "POST", fmt.Sprintf("/api/v1/namespaces/big/changes/%d/publish", ch.ID), nil)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		b.StopTimer()
		i++
		rs.Limits[0].Rate = int64(1000 + i)
		body := mustMarshal(b, rs)
		b.StartTimer()
		var c sluice.DraftCheck
		ed.must(http.StatusOK, "POST", "/api/v1/namespaces/big/draft/check", body).decode(b, &c)
		if c.Diff == nil || c.Diff.Changed != 1 {
			b.Fatalf("check: %+v", c.Diff)
		}
	}
}
