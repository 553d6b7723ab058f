package postgres

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"gorm.io/gorm"

	sluice "github.com/sluicegw/sluice/controlplane"
)

type auditRow struct {
	ID         int64 `gorm:"primaryKey"`
	At         time.Time
	Actor      string
	Action     string
	Object     string
	Namespace  string
	Before     *string
	After      *string
	RequestID  string
	ClientAddr string
	Emergency  bool
	PrevHash   string
	Hash       string
	MAC        string `gorm:"column:mac"`
}

func (auditRow) TableName() string { return "audit_events" }

func (r *auditRow) event() *sluice.AuditEvent {
	e := &sluice.AuditEvent{ID: r.ID, At: r.At.UTC(), Actor: r.Actor, Action: r.Action, Object: r.Object,
		Namespace: r.Namespace, RequestID: r.RequestID, ClientAddr: r.ClientAddr, Emergency: r.Emergency,
		PrevHash: r.PrevHash, Hash: r.Hash, MAC: r.MAC}
	if r.Before != nil {
		e.Before = json.RawMessage(*r.Before)
	}
	if r.After != nil {
		e.After = json.RawMessage(*r.After)
	}
	return e
}

// hash is the sha256 of the row's fields (not its id) and the previous hash,
// encoded as a JSON array so that no two rows share an encoding.
func (r *auditRow) hash() string {
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	b, _ := json.Marshal([]any{r.PrevHash, r.At.UTC().Format(time.RFC3339Nano), r.Actor, r.Action, r.Object,
		r.Namespace, str(r.Before), str(r.After), r.RequestID, r.ClientAddr, r.Emergency})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// mac is the HMAC-SHA256 under key of the row's id, fields and the MAC of
// the row before, encoded as a JSON array after a version tag. Unlike hash,
// it cannot be recomputed without the key, which the database never sees.
func (r *auditRow) mac(key []byte, prevMAC string) string {
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	b, _ := json.Marshal([]any{"sluice-audit-v1", r.ID, prevMAC, r.At.UTC().Format(time.RFC3339Nano), r.Actor, r.Action, r.Object,
		r.Namespace, str(r.Before), str(r.After), r.RequestID, r.ClientAddr, r.Emergency})
	m := hmac.New(sha256.New, key)
	m.Write(b)
	return hex.EncodeToString(m.Sum(nil))
}

// headSig signs a checkpointed head with the audit key.
func headSig(key []byte, id int64, mac string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("sluice-audit-head-v1\x00" + strconv.FormatInt(id, 10) + "\x00" + mac))
	return hex.EncodeToString(m.Sum(nil))
}

// auditHeadKey carries, in a transaction's context, the newest keyed event
// the transaction appended; DB.tx checkpoints it once the transaction has
// committed.
type auditHeadKey struct{}

type pendingHead struct{ head *sluice.AuditHead }

func withPendingHead(ctx context.Context) (context.Context, *pendingHead) {
	p := &pendingHead{}
	return context.WithValue(ctx, auditHeadKey{}, p), p
}

// checkpointAudit records a committed head: in the log at once, and with
// the AuditCheckpoint through the checkpointer, which writes the newest
// head in the background (so that a slow or unreachable etcd never holds up
// a request) and retries until it is written. Verification accepts keyed
// events after the checkpointed one, so a checkpoint that lags is no alarm;
// only events missing up to it are.
func (db *DB) checkpointAudit(p *pendingHead) {
	if p == nil || p.head == nil {
		return
	}
	h := *p.head
	db.settings.Logger.Info("audit chain head", "id", h.ID, "mac", h.MAC)
	if db.checkpoints != nil {
		db.checkpoints.offer(h)
	}
}

// checkpointer writes the newest audit head to the AuditCheckpoint. Safe
// for concurrent use; its goroutine runs from Open to Close.
type checkpointer struct {
	cp     sluice.AuditCheckpoint
	logger *slog.Logger
	mu     sync.Mutex
	head   *sluice.AuditHead // the newest head not yet written
	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

func startCheckpointer(cp sluice.AuditCheckpoint, logger *slog.Logger) *checkpointer {
	ctx, cancel := context.WithCancel(context.Background())
	c := &checkpointer{cp: cp, logger: logger, wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go c.run(ctx)
	return c
}

func (c *checkpointer) offer(h sluice.AuditHead) {
	c.mu.Lock()
	if c.head == nil || h.ID > c.head.ID {
		c.head = &h
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run(ctx context.Context) {
	defer close(c.done)
	defer func() {
		if r := recover(); r != nil {
			c.logger.Error("audit checkpointer panicked", "panic", r)
		}
	}()
	var retry <-chan time.Time
	backoff, failing := time.Duration(0), false
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		case <-retry:
		}
		c.mu.Lock()
		h := c.head
		c.mu.Unlock()
		if h == nil {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := c.cp.SaveAuditHead(sctx, *h)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failing {
				c.logger.Warn("checkpointing the audit chain head failed; retrying", "id", h.ID, "err", err)
			}
			failing = true
			backoff = min(max(2*backoff, 200*time.Millisecond), 10*time.Second)
			retry = time.After(backoff)
			continue
		}
		if failing {
			c.logger.Info("audit chain head checkpointed again", "id", h.ID)
		}
		failing, backoff, retry = false, 0, nil
		c.mu.Lock()
		if c.head != nil && c.head.ID == h.ID {
			c.head = nil
		}
		c.mu.Unlock()
	}
}

// sync waits until every offered head is written, or ctx ends.
func (c *checkpointer) sync(ctx context.Context) error {
	for {
		c.mu.Lock()
		pending := c.head != nil
		c.mu.Unlock()
		if !pending {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("checkpointing the audit chain head: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (c *checkpointer) close() {
	c.cancel()
	<-c.done
}

// SetAuditCheckpoint starts checkpointing the audit chain head with cp
// (as Settings.AuditCheckpoint does from Open), beginning with the
// database's current head, so call it after Migrate: cp keeps it unless it holds a newer one, so a
// checkpoint store that is empty (new, or reset) is anchored at once, and
// one that is ahead of the database still exposes the events deleted since.
// Call it before the DB is used concurrently, at most once.
func (db *DB) SetAuditCheckpoint(ctx context.Context, cp sluice.AuditCheckpoint) error {
	if db.checkpoints != nil || cp == nil {
		return nil
	}
	db.settings.AuditCheckpoint = cp
	db.checkpoints = startCheckpointer(cp, db.settings.Logger)
	var rows []auditRow
	if err := db.gorm.WithContext(ctx).Raw("SELECT id, mac FROM audit_events ORDER BY id DESC LIMIT 1").Scan(&rows).Error; err != nil {
		return dbErr(fmt.Errorf("reading the audit chain head: %w", err))
	}
	if len(rows) == 1 && rows[0].MAC != "" && len(db.settings.AuditKey) > 0 {
		r := rows[0]
		db.checkpoints.offer(sluice.AuditHead{ID: r.ID, MAC: r.MAC, At: db.now(), Sig: headSig(db.settings.AuditKey, r.ID, r.MAC)})
	}
	return nil
}

// SyncAuditCheckpoint waits until the audit chain head of every committed
// write is checkpointed (immediately without an AuditCheckpoint).
func (db *DB) SyncAuditCheckpoint(ctx context.Context) error {
	if db.checkpoints == nil {
		return nil
	}
	return db.checkpoints.sync(ctx)
}

// audit describes one event to append; the actor comes from the context.
type audit struct {
	Action    string
	Object    string
	Namespace string
	Before    any
	After     any
	Emergency bool
	// Revision is the draft's new revision, for a draft action's event
	// (its ETag); not stored in the audit row.
	Revision int64
}

func jsonText(v any) (*string, error) {
	if v == nil {
		return nil, nil
	}
	if raw, ok := v.(json.RawMessage); ok {
		if raw == nil {
			return nil, nil
		}
		s := string(raw)
		return &s, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding audit value: %w", err)
	}
	s := string(b)
	return &s, nil
}

// appendAudit appends an event inside tx, after taking the chain lock: the
// lock is held until tx ends, so appends are serialized and each links to the
// previous row.
func (db *DB) appendAudit(ctx context.Context, tx *gorm.DB, a audit) error {
	actor := sluice.ActorFromContext(ctx)
	row := auditRow{At: db.now(), Actor: actor.Name(), Action: a.Action, Object: a.Object, Namespace: a.Namespace,
		RequestID: actor.RequestID, ClientAddr: actor.ClientAddr, Emergency: a.Emergency}
	if actor.TokenID != 0 {
		row.Actor = fmt.Sprintf("%s (token %d)", actor.Name(), actor.TokenID)
	}
	var err error
	if row.Before, err = jsonText(a.Before); err != nil {
		return err
	}
	if row.After, err = jsonText(a.After); err != nil {
		return err
	}
	if err := tx.Exec("SELECT pg_advisory_xact_lock(?, 0)", auditLockClass).Error; err != nil {
		return fmt.Errorf("locking the audit chain: %w", err)
	}
	var prev []auditRow
	if err := tx.Raw("SELECT hash, mac FROM audit_events ORDER BY id DESC LIMIT 1").Scan(&prev).Error; err != nil {
		return fmt.Errorf("reading the audit chain head: %w", err)
	}
	prevMAC := ""
	if len(prev) > 0 {
		row.PrevHash, prevMAC = prev[0].Hash, prev[0].MAC
	}
	row.Hash = row.hash()
	key := db.settings.AuditKey
	if len(key) > 0 {
		// The id is part of the MAC, so it is taken before the insert; the
		// chain lock keeps ids in chain order.
		if err := tx.Raw("SELECT nextval(pg_get_serial_sequence('audit_events', 'id'))").Scan(&row.ID).Error; err != nil {
			return fmt.Errorf("numbering audit event: %w", err)
		}
		row.MAC = row.mac(key, prevMAC)
	}
	if err := tx.Create(&row).Error; err != nil {
		return fmt.Errorf("appending audit event: %w", err)
	}
	if e := auditEvent(&row, a); e != nil {
		if err := db.insertEvents(tx, []*sluice.Event{e}, nil); err != nil {
			return err
		}
	}
	if p, ok := tx.Statement.Context.Value(auditHeadKey{}).(*pendingHead); ok && row.MAC != "" {
		p.head = &sluice.AuditHead{ID: row.ID, MAC: row.MAC, At: row.At, Sig: headSig(key, row.ID, row.MAC)}
	}
	return nil
}

// AuditService implements sluice.AuditService.
type AuditService struct{ db *DB }

var _ sluice.AuditService = (*AuditService)(nil)

// NewAuditService returns the audit service of db.
func NewAuditService(db *DB) *AuditService { return &AuditService{db: db} }

// RecordAuditEvent appends e (Action, Object, Namespace, Before, After) on
// its own.
func (s *AuditService) RecordAuditEvent(ctx context.Context, e *sluice.AuditEvent) error {
	return s.db.tx(ctx, func(tx *gorm.DB) error {
		return s.db.appendAudit(ctx, tx, audit{Action: e.Action, Object: e.Object, Namespace: e.Namespace,
			Before: e.Before, After: e.After, Emergency: e.Emergency})
	})
}

// FindAuditEvents lists events newest first. Filters are bound parameters.
func (s *AuditService) FindAuditEvents(ctx context.Context, f sluice.AuditFilter) ([]*sluice.AuditEvent, int64, error) {
	q := s.db.gorm.WithContext(ctx).Model(&auditRow{})
	if f.Actor != "" {
		q = q.Where("actor = ? OR actor LIKE ?", f.Actor, likePrefix(f.Actor)+" (token %")
	}
	if f.Action != "" {
		q = q.Where("action = ?", f.Action)
	}
	if f.Namespace != "" {
		q = q.Where("namespace = ?", f.Namespace)
	}
	if !f.Since.IsZero() {
		q = q.Where("at >= ?", f.Since)
	}
	if !f.Until.IsZero() {
		q = q.Where("at < ?", f.Until)
	}
	if f.Before > 0 {
		q = q.Where("id < ?", f.Before)
	}
	limit := auditPage.size(f.Limit)
	var rows []auditRow
	if err := q.Order("id DESC").Limit(limit).Find(&rows).Error; err != nil {
		return nil, 0, dbErr(fmt.Errorf("listing audit events: %w", err))
	}
	out := make([]*sluice.AuditEvent, len(rows))
	for i := range rows {
		out[i] = rows[i].event()
	}
	return out, nextCursor(len(rows), limit, func() int64 { return rows[len(rows)-1].ID }), nil
}

func likePrefix(s string) string {
	r := make([]rune, 0, len(s))
	for _, c := range s {
		if c == '%' || c == '_' || c == '\\' {
			r = append(r, '\\')
		}
		r = append(r, c)
	}
	return string(r)
}

// VerifyAudit walks the chain in id order, in batches, and reports the first
// row whose hash or MAC does not match its content and the row before, then
// compares the chain with the checkpointed head: the checkpointed event must
// be in the database with the MAC it had when it was written. The heads of
// this process's writes are checkpointed first, and the checkpoint is read
// before the walk, so events committed while the walk runs are after it.
func (s *AuditService) VerifyAudit(ctx context.Context) (*sluice.AuditVerification, error) {
	key := s.db.settings.AuditKey
	v := &sluice.AuditVerification{OK: true, Keyed: len(key) > 0, Checkpoint: "not configured"}
	var head *sluice.AuditHead
	var headErr error
	if cp := s.db.settings.AuditCheckpoint; cp != nil {
		v.Checkpoint = "not compared"
		// This process's own writes are checkpointed first; if that fails,
		// reading the checkpoint says why.
		sctx, scancel := context.WithTimeout(ctx, 3*time.Second)
		s.db.SyncAuditCheckpoint(sctx)
		scancel()
		lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		head, headErr = cp.LoadAuditHead(lctx)
		cancel()
	}
	fail := func(id int64, reason string) {
		if v.OK {
			v.OK, v.Reason = false, reason
			if id > 0 {
				v.FirstBroken = ptr(id)
			}
		}
	}
	headSeen := false
	prev, prevMAC, keyedSeen := "", "", false
	var after int64
walk:
	for {
		var rows []auditRow
		if err := s.db.gorm.WithContext(ctx).Where("id > ?", after).Order("id").Limit(1000).Find(&rows).Error; err != nil {
			return nil, dbErr(fmt.Errorf("reading the audit log: %w", err))
		}
		for i := range rows {
			r := &rows[i]
			v.Checked++
			v.HeadID = r.ID
			switch {
			case r.PrevHash != prev:
				fail(r.ID, "its link does not match the previous event (an event was removed or altered)")
			case r.hash() != r.Hash:
				fail(r.ID, "its content does not match its hash (the event was altered)")
			case !v.Keyed:
			case r.MAC == "" && keyedSeen:
				fail(r.ID, "it has no MAC although events before it have one (MACs were stripped, or it was written without the audit key)")
			case r.MAC == "":
				v.Unkeyed++
			case !hmac.Equal([]byte(r.mac(key, prevMAC)), []byte(r.MAC)):
				fail(r.ID, "its MAC does not match its content and the event before (the log was altered, events were removed before it, or it was written under another key)")
			default:
				keyedSeen = true
			}
			if !v.OK {
				break walk
			}
			if head != nil && r.ID == head.ID {
				headSeen = true
				if r.MAC != head.MAC {
					v.Checkpoint, v.CheckpointID = "mismatched", head.ID
					fail(0, fmt.Sprintf("event %d differs from the head checkpointed outside the database", r.ID))
					break walk
				}
			}
			prev, prevMAC = r.Hash, r.MAC
			after = r.ID
		}
		if len(rows) < 1000 {
			break
		}
	}
	switch {
	case s.db.settings.AuditCheckpoint == nil, !v.OK:
	case headErr != nil:
		v.Checkpoint = "unavailable"
		fail(0, "the checkpointed chain head could not be read, so deleted events at the end of the log would go unnoticed: "+headErr.Error())
	case head == nil && keyedSeen:
		v.Checkpoint = "missing"
		fail(0, "no chain head is checkpointed outside the database, so deleted events at the end of the log would go unnoticed (the next audited write checkpoints one)")
	case head == nil:
		v.Checkpoint = "missing"
	default:
		v.CheckpointID = head.ID
		switch {
		case v.Keyed && !hmac.Equal([]byte(headSig(key, head.ID, head.MAC)), []byte(head.Sig)):
			v.Checkpoint = "mismatched"
			fail(0, "the checkpointed chain head is not signed with the audit key (it was forged, or written under another key)")
		case !headSeen:
			v.Checkpoint = "mismatched"
			fail(0, fmt.Sprintf("event %d, checkpointed outside the database as the chain head, is not in the database: events were deleted from the end of the log", head.ID))
		default:
			v.Checkpoint = "matched"
		}
	}
	return v, nil
}
