// Package testenv gives the control plane's tests a real Postgres: a fresh
// database per test, created from a migrated template made once per test
// binary and dropped when the test ends. The embedded etcd the tests run is
// package etcdwatch/etcdtest's, which the gateway's tests share.
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/sluicegw/sluice/controlplane/postgres"
)

// AdminURL is the maintenance database used to create and drop test
// databases: $SLUICE_TEST_DATABASE_URL or the local trust-auth server.
func AdminURL() string {
	if u := os.Getenv("SLUICE_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

func withDatabase(raw, name string) string {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	u.Path = "/" + name
	return u.String()
}

func randomName(prefix string) string {
	b := make([]byte, 6)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
	adminOnce    sync.Once
	admin        *sql.DB
)

func adminDB(tb testing.TB) *sql.DB {
	adminOnce.Do(func() {
		var err error
		admin, err = sql.Open("pgx", AdminURL())
		if err == nil {
			admin.SetMaxOpenConns(4)
		}
	})
	return admin
}

// Template returns the name of a migrated template database, created once
// per test binary. Dropping it is left to DropTemplate (call from TestMain).
func template(tb testing.TB) string {
	templateOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := randomName("sluice_test_tmpl_")
		if _, err := adminDB(tb).ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
			templateErr = fmt.Errorf("creating template database: %w", err)
			return
		}
		db, err := sql.Open("pgx", withDatabase(AdminURL(), name))
		if err != nil {
			templateErr = err
			return
		}
		defer db.Close()
		if err := postgres.Migrate(ctx, db); err != nil {
			templateErr = err
			return
		}
		db.Close()
		templateName = name
	})
	if templateErr != nil {
		tb.Fatalf("test database template: %v (is Postgres running at %s?)", templateErr, AdminURL())
	}
	return templateName
}

// Cleanup drops the template database; call it at the end of TestMain.
func Cleanup() {
	if templateName == "" || admin == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+templateName+" WITH (FORCE)")
	admin.Close()
}

// MustDatabase creates a fresh, migrated database sluice_test_<random> and
// returns its URL; it is dropped when the test ends.
func MustDatabase(tb testing.TB) string {
	tb.Helper()
	tmpl := template(tb)
	name := randomName("sluice_test_")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var err error
	for range 20 { // CREATE DATABASE ... TEMPLATE fails while another copy is being made
		if _, err = adminDB(tb).ExecContext(ctx, "CREATE DATABASE "+name+" TEMPLATE "+tmpl); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		tb.Fatalf("creating test database: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := adminDB(tb).ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Logf("dropping test database: %v", err)
		}
	})
	return withDatabase(AdminURL(), name)
}

// FastArgon2 keeps password hashing cheap in tests.
var FastArgon2 = postgres.Argon2Params{Time: 1, Memory: 1024, Threads: 1}

// MustOpen opens a fresh database with fast password hashing.
func MustOpen(tb testing.TB, s postgres.Settings) *postgres.DB {
	tb.Helper()
	if s.Argon2 == (postgres.Argon2Params{}) {
		s.Argon2 = FastArgon2
	}
	db, err := postgres.Open(context.Background(), MustDatabase(tb), s)
	if err != nil {
		tb.Fatalf("opening test database: %v", err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}
