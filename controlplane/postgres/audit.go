package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
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
}

func (auditRow) TableName() string { return "audit_events" }

func (r *auditRow) event() *sluice.AuditEvent {
	e := &sluice.AuditEvent{ID: r.ID, At: r.At.UTC(), Actor: r.Actor, Action: r.Action, Object: r.Object,
		Namespace: r.Namespace, RequestID: r.RequestID, ClientAddr: r.ClientAddr, Emergency: r.Emergency,
		PrevHash: r.PrevHash, Hash: r.Hash}
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

// audit describes one event to append; the actor comes from the context.
type audit struct {
	Action    string
	Object    string
	Namespace string
	Before    any
	After     any
	Emergency bool
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
	var prev []string
	if err := tx.Raw("SELECT hash FROM audit_events ORDER BY id DESC LIMIT 1").Scan(&prev).Error; err != nil {
		return fmt.Errorf("reading the audit chain head: %w", err)
	}
	if len(prev) > 0 {
		row.PrevHash = prev[0]
	}
	row.Hash = row.hash()
	if err := tx.Create(&row).Error; err != nil {
		return fmt.Errorf("appending audit event: %w", err)
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
func (s *AuditService) FindAuditEvents(ctx context.Context, f sluice.AuditFilter) ([]*sluice.AuditEvent, error) {
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
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	var rows []auditRow
	if err := q.Order("id DESC").Limit(limit).Find(&rows).Error; err != nil {
		return nil, dbErr(fmt.Errorf("listing audit events: %w", err))
	}
	out := make([]*sluice.AuditEvent, len(rows))
	for i := range rows {
		out[i] = rows[i].event()
	}
	return out, nil
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
// row whose hash does not match its content or whose link does not match the
// row before.
func (s *AuditService) VerifyAudit(ctx context.Context) (*sluice.AuditVerification, error) {
	v := &sluice.AuditVerification{OK: true}
	prev := ""
	var after int64
	for {
		var rows []auditRow
		if err := s.db.gorm.WithContext(ctx).Where("id > ?", after).Order("id").Limit(1000).Find(&rows).Error; err != nil {
			return nil, dbErr(fmt.Errorf("reading the audit log: %w", err))
		}
		for i := range rows {
			r := &rows[i]
			v.Checked++
			switch {
			case r.PrevHash != prev:
				v.OK, v.FirstBroken, v.Reason = false, ptr(r.ID), "its link does not match the previous event (an event was removed or altered)"
			case r.hash() != r.Hash:
				v.OK, v.FirstBroken, v.Reason = false, ptr(r.ID), "its content does not match its hash (the event was altered)"
			}
			if !v.OK {
				return v, nil
			}
			prev = r.Hash
			after = r.ID
		}
		if len(rows) < 1000 {
			return v, nil
		}
	}
}
