package postgres

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// TestVersionDocumentSumEvicted: the document and checksum of a version are
// two cache entries; when the checksum is evicted before the document, the
// version must still be returned with its checksum (diffs are cached by it).
func TestVersionDocumentSumEvicted(t *testing.T) {
	t.Parallel()
	admin := os.Getenv("SLUICE_TEST_DATABASE_URL")
	if admin == "" {
		admin = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	ctx := context.Background()
	adb, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatal(err)
	}
	defer adb.Close()
	b := make([]byte, 6)
	rand.Read(b)
	name := "sluice_test_cache_" + hex.EncodeToString(b)
	if _, err := adb.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Skipf("no Postgres: %v", err)
	}
	t.Cleanup(func() { adb.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
	u, _ := url.Parse(admin)
	u.Path = "/" + name
	db, err := Open(ctx, u.String(), Settings{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	doc := `{"namespace":"shop"}`
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{"INSERT INTO namespaces (name, created_at, created_by) VALUES ('shop', $1, 't')", []any{now}},
		{"INSERT INTO versions (namespace, number, document, checksum, created_at, created_by) VALUES ('shop', 1, $1, 'sha256:one', $2, 't')", []any{doc, now}},
	} {
		if _, err := db.SQL().ExecContext(ctx, q.sql, q.args...); err != nil {
			t.Fatal(err)
		}
	}
	db.docs = newByteCache(4 * (len(doc) + 16))
	if ref, err := db.versionDocument(ctx, "shop", 1); err != nil || ref.checksum != "sha256:one" {
		t.Fatalf("first read: %+v %v", ref, err)
	}
	// The document is read again (most recent), then other entries push
	// the least recent, the checksum, out.
	db.docs.get(versionDocKey("shop", 1))
	max := 4 * (len(doc) + 16)
	used := len(doc) + len("sha256:one")
	for i := 0; used+max/4 <= max; i++ {
		db.docs.put(string(rune('a'+i)), make([]byte, max/4))
		used += max / 4
	}
	db.docs.put("last", make([]byte, max-used+1)) // one byte over: the checksum goes
	if _, ok := db.docs.get(versionDocKey("shop", 1)); !ok {
		t.Fatal("the test evicted the document too")
	}
	ref, err := db.versionDocument(ctx, "shop", 1)
	if err != nil {
		t.Fatal(err)
	}
	if ref.checksum != "sha256:one" || string(ref.doc) != doc {
		t.Fatalf("after eviction: checksum %q doc %q", ref.checksum, ref.doc)
	}
}
