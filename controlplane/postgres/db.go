// Package postgres implements the control plane's services over Postgres with
// GORM: namespaces, drafts, changes and reviews, versions and the publication
// outbox, users, sessions, API tokens and the HMAC-chained audit log.
//
// Every mutation runs in one transaction together with its audit event, so
// that the log holds exactly what happened. Audit appends are serialized by a
// transaction-scoped advisory lock (auditLockKey) so that each row can carry
// the hash of the one before, and its MAC under Settings.AuditKey; once a
// transaction commits, its newest event is checkpointed outside the database
// (Settings.AuditCheckpoint) by a background writer. Version numbers are serialized per namespace by
// locking the namespace's row. The publisher takes a transaction-scoped
// advisory lock per namespace (publishLockClass, hashtext(namespace)) with
// pg_try_advisory_xact_lock, so that with several sluice-admin replicas
// exactly one writes a namespace's versions to etcd at a time, in order.
package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	gormpg "gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/migrations"
)

// Advisory lock keys (two-int form: class, key).
const (
	auditLockClass   = 0x51_1c_e0_01 // with key 0: the audit chain head
	publishLockClass = 0x51_1c_e0_02 // with hashtext(namespace): the namespace's publisher
)

// NotifyChannel is the Postgres channel on which a publish transaction
// notifies the namespace's name, to wake the publishers of other replicas.
const NotifyChannel = "sluice_publish"

// Settings configures a DB. The zero value of each field has the meaning
// documented on it.
type Settings struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives internal errors; nil means slog.Default().
	Logger *slog.Logger
	// MaxOpenConns bounds the pool; zero means 20.
	MaxOpenConns int
	// SessionTTL is how long a console session lives without activity;
	// zero means 12h. Each use of the session moves its end to SessionTTL
	// from then (sliding), never past SessionMaxAge after sign-in.
	SessionTTL time.Duration
	// SessionMaxAge is the absolute cap on a session's life, however
	// active; zero means 7 days. Smaller than SessionTTL, it is the TTL.
	SessionMaxAge time.Duration
	// Argon2 sets the password hashing cost; the zero value means the
	// defaults of DefaultArgon2.
	Argon2 Argon2Params
	// OnPublish, if set, is called after a transaction that queued a
	// publication commits (to wake the in-process publisher).
	OnPublish func(ns string)
	// AuditKey is the HMAC key of the audit chain (see audit.go); empty
	// writes events without a MAC and verifies the plain sha256 chain only.
	AuditKey []byte
	// AuditCheckpoint, if set, receives the audit chain's head after every
	// committed audited write (written in the background, newest first,
	// retried while it fails), and VerifyAudit compares the chain with it.
	// (SetAuditCheckpoint sets one after Open, anchored at the database's
	// head.)
	AuditCheckpoint sluice.AuditCheckpoint
	// QuotaUsage, if set, returns what the nodes of ns reported of their
	// quotas' usage in the windows holding now (sluice.Fleet.QuotaUsage):
	// the warnings of a draft check and of a change opened (quota-lowered)
	// name it. (SetQuotaUsage sets it after Open.)
	QuotaUsage func(ns string, now time.Time) []api.QuotaUsage
}

// SetQuotaUsage sets Settings.QuotaUsage. Call it before the DB is used
// concurrently.
func (db *DB) SetQuotaUsage(f func(ns string, now time.Time) []api.QuotaUsage) {
	db.settings.QuotaUsage = f
}

// warnContext is what api.WarningsIn knows of ns beyond its rules now.
func (db *DB) warnContext(ns string) api.WarnContext {
	c := api.WarnContext{Now: db.now()}
	if f := db.settings.QuotaUsage; f != nil {
		c.Usage = f(ns, c.Now)
	}
	return c
}

// DB is a connection pool to the control plane's database and the settings
// shared by its services. It is safe for concurrent use.
type DB struct {
	gorm     *gorm.DB
	sql      *sql.DB
	dsn      string
	settings Settings
	diffs    *diffCache
	docs     *byteCache // documents of versions and draft revisions
	// checkpoints writes audit heads to settings.AuditCheckpoint; nil
	// without one.
	checkpoints *checkpointer
}

// Open connects to the database at dsn (a postgres:// URL or key=value DSN)
// and checks the connection. It does not migrate: call Migrate. Open returns
// EUNAVAILABLE when the database cannot be reached.
func Open(ctx context.Context, dsn string, s Settings) (*DB, error) {
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	if s.MaxOpenConns == 0 {
		s.MaxOpenConns = 20
	}
	if s.SessionTTL == 0 {
		s.SessionTTL = 12 * time.Hour
	}
	if s.SessionMaxAge == 0 {
		s.SessionMaxAge = 7 * 24 * time.Hour
	}
	if s.SessionTTL > s.SessionMaxAge {
		s.SessionTTL = s.SessionMaxAge
	}
	if s.Argon2 == (Argon2Params{}) {
		s.Argon2 = DefaultArgon2
	}
	g, err := gorm.Open(gormpg.New(gormpg.Config{DSN: dsn}), &gorm.Config{
		Logger:                 logger.Default.LogMode(logger.Silent),
		SkipDefaultTransaction: true,
		NowFunc:                func() time.Time { return s.Now().UTC() },
	})
	if err != nil {
		return nil, dbErr(fmt.Errorf("opening database: %w", err))
	}
	sqlDB, err := g.DB()
	if err != nil {
		return nil, fmt.Errorf("opening database: %w", err)
	}
	sqlDB.SetMaxOpenConns(s.MaxOpenConns)
	sqlDB.SetMaxIdleConns(s.MaxOpenConns)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	sqlDB.SetConnMaxLifetime(30 * time.Minute)
	db := &DB{gorm: g, sql: sqlDB, dsn: dsn, settings: s, diffs: newDiffCache(64), docs: newByteCache(128 << 20)}
	if err := db.Ping(ctx); err != nil {
		sqlDB.Close()
		return nil, err
	}
	if s.AuditCheckpoint != nil {
		db.checkpoints = startCheckpointer(s.AuditCheckpoint, s.Logger)
	}
	return db, nil
}

// Close stops the audit checkpointer (a head not yet written stays behind
// the database's, which verification accepts) and closes the pool.
func (db *DB) Close() error {
	if db.checkpoints != nil {
		db.checkpoints.close()
	}
	return db.sql.Close()
}

// SQL returns the underlying pool, for tests and health checks.
func (db *DB) SQL() *sql.DB { return db.sql }

// DSN returns the connection string the DB was opened with.
func (db *DB) DSN() string { return db.dsn }

// Ping checks that the database answers; EUNAVAILABLE when it does not.
func (db *DB) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := db.sql.PingContext(ctx); err != nil {
		return &sluice.Error{Code: sluice.EUNAVAILABLE, Message: "the database is unavailable"}
	}
	return nil
}

// Migrate applies every pending migration from the migrations module. It
// takes a Postgres session lock, so replicas starting together migrate once.
func (db *DB) Migrate(ctx context.Context) error {
	return Migrate(ctx, db.sql)
}

// Migrate applies every pending migration to the database behind sqlDB,
// holding goose's Postgres session lock.
func Migrate(ctx context.Context, sqlDB *sql.DB) error {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS, goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("loading migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return dbErr(fmt.Errorf("migrating: %w", err))
	}
	return nil
}

func (db *DB) now() time.Time { return db.settings.Now().UTC().Truncate(time.Microsecond) }

// tx runs fn in a transaction, translating database errors to domain codes.
// After commit it checkpoints the audit chain head the transaction wrote.
func (db *DB) tx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	ctx, head := withPendingHead(ctx)
	if err := db.gorm.WithContext(ctx).Transaction(fn); err != nil {
		return dbErr(err)
	}
	db.checkpointAudit(head)
	return nil
}

// dbErr translates a database error into a domain error: unreachable
// database → EUNAVAILABLE, unique violation → ECONFLICT, serialization
// failure → ECONFLICT; domain errors pass through; anything else is returned
// as is (EINTERNAL to callers).
func dbErr(err error) error {
	if err == nil {
		return nil
	}
	var se *sluice.Error
	if errors.As(err, &se) {
		return err
	}
	// A failed connection attempt is unavailability whatever the server
	// said (a database not accepting connections, 55000, comes as a
	// PgError inside the ConnectError).
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return &sluice.Error{Code: sluice.EUNAVAILABLE, Message: "the database is unavailable"}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "23505":
			return &sluice.Error{Code: sluice.ECONFLICT, Message: "it already exists"}
		case pgErr.Code == "40001" || pgErr.Code == "40P01":
			return &sluice.Error{Code: sluice.ECONFLICT, Message: "a concurrent update interfered; retry"}
		case strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P") || pgErr.Code == "53300":
			return &sluice.Error{Code: sluice.EUNAVAILABLE, Message: "the database is unavailable"}
		}
		return err
	}
	if unavailable(err) {
		return &sluice.Error{Code: sluice.EUNAVAILABLE, Message: "the database is unavailable"}
	}
	return err
}

func unavailable(err error) bool {
	var netErr net.Error
	var connErr *pgconn.ConnectError
	switch {
	case errors.As(err, &connErr), errors.As(err, &netErr),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, context.DeadlineExceeded), pgconn.Timeout(err), pgconn.SafeToRetry(err):
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "connection reset") ||
		strings.Contains(msg, "broken pipe") || strings.Contains(msg, "failed to connect")
}

func notFound(format string, args ...any) error {
	return sluice.Errorf(sluice.ENOTFOUND, format, args...)
}

func ptr[T any](v T) *T { return &v }
