package http_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"testing"

	"github.com/sluicegw/sluice/api"
)

// TestDraftCache: GET draft answers the current revision's document, gzipped
// for clients that accept it and plain for the others, and never a stale one
// after a write.
func TestDraftCache(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	admin := e.login("admin")
	admin.must(http.StatusCreated, "POST", "/api/v1/namespaces", map[string]string{"name": "cache", "description": "x"})
	get := func(encoding string) (*api.RuleSet, string, string) {
		t.Helper()
		r := admin.must(http.StatusOK, "GET", "/api/v1/namespaces/cache/draft", nil, "Accept-Encoding: "+encoding)
		body := r.body
		if r.header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if body, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		rs, err := api.Decode(body)
		if err != nil {
			t.Fatalf("draft with Accept-Encoding %q: %v", encoding, err)
		}
		return rs, r.header.Get("ETag"), r.header.Get("Content-Encoding")
	}
	for round := 0; round < 2; round++ { // the second round is served from the cache
		rs1, etag1, enc1 := get("gzip")
		rs2, etag2, enc2 := get("identity")
		if enc1 != "gzip" || enc2 != "" || etag1 != etag2 || rs1.Checksum() != rs2.Checksum() {
			t.Fatalf("round %d: encodings %q/%q, etags %q/%q", round, enc1, enc2, etag1, etag2)
		}
	}
	rs, etag, _ := get("gzip")
	rs.Routes = []api.Route{route("orders")}
	admin.must(http.StatusOK, "PUT", "/api/v1/namespaces/cache/draft", rs, "If-Match: "+etag)
	for _, enc := range []string{"gzip", "identity"} {
		got, etag2, _ := get(enc)
		if etag2 == etag || len(got.Routes) != 1 || got.Routes[0].ID != "orders" {
			t.Fatalf("after a write (%s): etag %q → %q, routes %+v", enc, etag, etag2, got.Routes)
		}
	}
}
