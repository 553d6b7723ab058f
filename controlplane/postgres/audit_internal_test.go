package postgres

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/etcd"
	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
)

// mustRawDB opens a fresh migrated database as its owner, dropped when the
// test ends.
func mustRawDB(t *testing.T, s Settings) *DB {
	t.Helper()
	admin := os.Getenv("SLUICE_TEST_DATABASE_URL")
	if admin == "" {
		admin = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	ctx := context.Background()
	adb, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { adb.Close() })
	b := make([]byte, 6)
	rand.Read(b)
	name := "sluice_test_audit_" + hex.EncodeToString(b)
	if _, err := adb.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Skipf("no Postgres: %v", err)
	}
	t.Cleanup(func() { adb.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
	u, _ := url.Parse(admin)
	u.Path = "/" + name
	s.Argon2 = Argon2Params{Time: 1, Memory: 1024, Threads: 1}
	s.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	db, err := Open(ctx, u.String(), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return db
}

// exec runs statements as the database's owner, with the append-only
// triggers disabled: what someone holding the owner's rights can do.
func ownerExec(t *testing.T, db *DB, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	all := append([]string{"ALTER TABLE audit_events DISABLE TRIGGER USER"}, stmts...)
	all = append(all, "ALTER TABLE audit_events ENABLE TRIGGER USER")
	for _, q := range all {
		if _, err := db.SQL().ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// rechain recomputes the plain sha256 chain over the table as it now is,
// the way the attacker did.
func rechain(t *testing.T, db *DB, stripMACs bool) {
	t.Helper()
	var rows []auditRow
	if err := db.gorm.Order("id").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	var stmts []string
	prev := ""
	for i := range rows {
		r := &rows[i]
		r.PrevHash = prev
		r.Hash = r.hash()
		prev = r.Hash
		mac := "mac"
		if stripMACs {
			mac = "''"
		}
		stmts = append(stmts, fmt.Sprintf("UPDATE audit_events SET prev_hash = '%s', hash = '%s', mac = %s WHERE id = %d", r.PrevHash, r.Hash, mac, r.ID))
	}
	ownerExec(t, db, stmts...)
}

// TestAuditTamperDetected: someone with the database owner's rights disables
// the append-only trigger, deletes or edits events and recomputes the sha256
// chain. The plain chain (what /audit/verify checked before) still verifies;
// the keyed chain and the checkpoint in etcd do not.
func TestAuditTamperDetected(t *testing.T) {
	e := etcdtest.Start(t)
	client, err := etcd.NewClient(e.Endpoints)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	key := []byte(strings.Repeat("k", 32))

	for i, tc := range []struct {
		desc   string
		tamper func(t *testing.T, db *DB, cp *etcd.AuditCheckpoint, ids []int64)
		// plainOK: the unkeyed sha256 chain still verifies after tampering.
		plainOK    bool
		checkpoint string
		reason     string
	}{
		{desc: "untouched", plainOK: true, checkpoint: "matched",
			tamper: func(*testing.T, *DB, *etcd.AuditCheckpoint, []int64) {}},
		{desc: "middle event deleted, sha256 chain recomputed", plainOK: true, checkpoint: "not compared", reason: "MAC does not match",
			tamper: func(t *testing.T, db *DB, _ *etcd.AuditCheckpoint, ids []int64) {
				ownerExec(t, db, fmt.Sprintf("DELETE FROM audit_events WHERE id = %d", ids[2]))
				rechain(t, db, false)
			}},
		{desc: "event edited, sha256 chain recomputed", plainOK: true, reason: "MAC does not match",
			tamper: func(t *testing.T, db *DB, _ *etcd.AuditCheckpoint, ids []int64) {
				ownerExec(t, db, fmt.Sprintf("UPDATE audit_events SET actor = 'mallory' WHERE id = %d", ids[3]))
				rechain(t, db, false)
			}},
		{desc: "every MAC stripped, sha256 chain recomputed", plainOK: true, checkpoint: "mismatched", reason: "differs from the head checkpointed",
			tamper: func(t *testing.T, db *DB, _ *etcd.AuditCheckpoint, ids []int64) {
				rechain(t, db, true)
			}},
		{desc: "tail deleted (the chain still links)", plainOK: true, checkpoint: "mismatched", reason: "events were deleted from the end",
			tamper: func(t *testing.T, db *DB, _ *etcd.AuditCheckpoint, ids []int64) {
				ownerExec(t, db, fmt.Sprintf("DELETE FROM audit_events WHERE id >= %d", ids[len(ids)-2]))
			}},
		{desc: "tail deleted and the checkpoint moved back without the key", plainOK: true, checkpoint: "mismatched", reason: "not signed with the audit key",
			tamper: func(t *testing.T, db *DB, cp *etcd.AuditCheckpoint, ids []int64) {
				ownerExec(t, db, fmt.Sprintf("DELETE FROM audit_events WHERE id >= %d", ids[len(ids)-2]))
				var r auditRow
				if err := db.gorm.Where("id = ?", ids[len(ids)-3]).Take(&r).Error; err != nil {
					t.Fatal(err)
				}
				b, _ := json.Marshal(sluice.AuditHead{ID: r.ID, MAC: r.MAC, At: r.At, Sig: strings.Repeat("0", 64)})
				if _, err := cp.Client.Put(context.Background(), etcd.AuditHeadKey(cp.Keys), string(b)); err != nil {
					t.Fatal(err)
				}
			}},
		{desc: "checkpoint deleted", plainOK: true, checkpoint: "missing", reason: "no chain head is checkpointed",
			tamper: func(t *testing.T, db *DB, cp *etcd.AuditCheckpoint, ids []int64) {
				if _, err := cp.Client.Delete(context.Background(), etcd.AuditHeadKey(cp.Keys)); err != nil {
					t.Fatal(err)
				}
			}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cp := &etcd.AuditCheckpoint{Client: client, Keys: api.Keys{Prefix: fmt.Sprintf("/audit-test-%d", i)}}
			db := mustRawDB(t, Settings{AuditKey: key, AuditCheckpoint: cp})
			audit := NewAuditService(db)
			ctx := sluice.NewContextWithActor(context.Background(), sluice.Actor{User: &sluice.User{ID: 1, Username: "alice"}, Role: sluice.RoleAdmin})
			var ids []int64
			for j := range 6 {
				if err := audit.RecordAuditEvent(ctx, &sluice.AuditEvent{Action: sluice.ActionLogin, Object: fmt.Sprintf("user/u%d", j),
					After: json.RawMessage(`{"n":1}`)}); err != nil {
					t.Fatal(err)
				}
				evs, _, err := audit.FindAuditEvents(ctx, sluice.AuditFilter{Limit: 1})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, evs[0].ID)
				if evs[0].MAC == "" {
					t.Fatalf("event %d has no MAC", evs[0].ID)
				}
			}
			if err := db.SyncAuditCheckpoint(context.Background()); err != nil {
				t.Fatal(err)
			}
			tc.tamper(t, db, cp, ids)

			v, err := audit.VerifyAudit(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.reason == ""; v.OK != want || !v.Keyed || !strings.Contains(v.Reason, tc.reason) {
				t.Fatalf("verify = %+v, want ok %v and a reason containing %q", v, want, tc.reason)
			}
			if tc.checkpoint != "" && v.Checkpoint != tc.checkpoint {
				t.Fatalf("checkpoint %q, want %q (%+v)", v.Checkpoint, tc.checkpoint, v)
			}
			// The plain chain alone, as verified before audit keys: no key
			// and no checkpoint.
			plain := &DB{gorm: db.gorm, settings: Settings{Logger: db.settings.Logger}}
			pv, err := NewAuditService(plain).VerifyAudit(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if pv.OK != tc.plainOK || pv.Keyed {
				t.Fatalf("plain verify = %+v, want ok %v", pv, tc.plainOK)
			}
		})
	}
}

// TestAuditKeyIntroducedLater: events written before the key was configured
// are counted as unkeyed and covered by the plain chain; an event written
// without the key after keyed ones fails verification (a downgrade).
func TestAuditKeyIntroducedLater(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	unkeyed := mustRawDB(t, Settings{})
	keyed, err := Open(context.Background(), unkeyed.DSN(), Settings{AuditKey: key, Logger: unkeyed.settings.Logger, Argon2: unkeyed.settings.Argon2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keyed.Close() })
	ctx := sluice.NewContextWithActor(context.Background(), sluice.Actor{User: &sluice.User{ID: 1, Username: "alice"}, Role: sluice.RoleAdmin})
	record := func(db *DB, n int) {
		t.Helper()
		for range n {
			if err := NewAuditService(db).RecordAuditEvent(ctx, &sluice.AuditEvent{Action: sluice.ActionLogin, Object: "user/alice"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, step := range []struct {
		desc      string
		db        *DB
		write     int
		ok        bool
		unkeyedN  int64
		reasonHas string
	}{
		{desc: "three events before the key", db: unkeyed, write: 3, ok: true, unkeyedN: 3},
		{desc: "two with the key", db: keyed, write: 2, ok: true, unkeyedN: 3},
		{desc: "one without it again", db: unkeyed, write: 1, ok: false, reasonHas: "no MAC although events before it have one"},
	} {
		t.Run(step.desc, func(t *testing.T) {
			record(step.db, step.write)
			v, err := NewAuditService(keyed).VerifyAudit(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if v.OK != step.ok || !v.Keyed || (step.ok && v.Unkeyed != step.unkeyedN) || !strings.Contains(v.Reason, step.reasonHas) {
				t.Fatalf("verify %+v", v)
			}
		})
	}
}

// TestAuditCheckpointAnchoredAtStart: a checkpoint store that is empty when
// sluice-admin starts (new, or reset) gets the database's head at once, so
// verification does not fail until the next write; one that is ahead of the
// database (events deleted while sluice-admin was down) keeps its head.
func TestAuditCheckpointAnchoredAtStart(t *testing.T) {
	e := etcdtest.Start(t)
	client, err := etcd.NewClient(e.Endpoints)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	key := []byte(strings.Repeat("k", 32))
	ctx := sluice.NewContextWithActor(context.Background(), sluice.Actor{User: &sluice.User{ID: 1, Username: "alice"}, Role: sluice.RoleAdmin})
	db := mustRawDB(t, Settings{AuditKey: key}) // written without a checkpoint store
	for range 4 {
		if err := NewAuditService(db).RecordAuditEvent(ctx, &sluice.AuditEvent{Action: sluice.ActionLogin}); err != nil {
			t.Fatal(err)
		}
	}
	start := func() *DB {
		t.Helper()
		d, err := Open(context.Background(), db.DSN(), Settings{AuditKey: key, Logger: db.settings.Logger})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.SetAuditCheckpoint(context.Background(), &etcd.AuditCheckpoint{Client: client, Keys: api.Keys{Prefix: "/anchor"}}); err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, step := range []struct {
		desc       string
		before     func()
		ok         bool
		checkpoint string
	}{
		{desc: "empty store anchored", ok: true, checkpoint: "matched"},
		{desc: "tail deleted while down", ok: false, checkpoint: "mismatched", before: func() {
			ownerExec(t, db, "DELETE FROM audit_events WHERE id = (SELECT max(id) FROM audit_events)")
		}},
	} {
		t.Run(step.desc, func(t *testing.T) {
			if step.before != nil {
				step.before()
			}
			d := start()
			defer d.Close()
			v, err := NewAuditService(d).VerifyAudit(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if v.OK != step.ok || v.Checkpoint != step.checkpoint {
				t.Fatalf("verify %+v", v)
			}
		})
	}
}
