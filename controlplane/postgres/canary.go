package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	sluice "github.com/sluicegw/sluice/controlplane"
)

type canaryRow struct {
	ID        int64 `gorm:"primaryKey"`
	Namespace string
	Version   int64
	Selector  string
	State     string
	CreatedAt time.Time
	CreatedBy string
	EndedAt   *time.Time
	EndedBy   string
	Reason    string
	// Analysis and Comparison are JSON (migration 00008), nil when none.
	Analysis   *string
	Comparison *string
}

func (canaryRow) TableName() string { return "canaries" }

func (r *canaryRow) canary() *sluice.Canary {
	c := &sluice.Canary{ID: r.ID, Namespace: r.Namespace, Version: r.Version, State: sluice.CanaryState(r.State),
		CreatedAt: r.CreatedAt.UTC(), CreatedBy: r.CreatedBy, EndedAt: utcPtr(r.EndedAt), EndedBy: r.EndedBy, Reason: r.Reason}
	_ = json.Unmarshal([]byte(r.Selector), &c.Selector) // written by startCanary
	if r.Analysis != nil {
		c.Analysis = new(sluice.CanaryAnalysis)
		_ = json.Unmarshal([]byte(*r.Analysis), c.Analysis) // written by setCanaryAnalysis
	}
	if r.Comparison != nil {
		c.Comparison = new(sluice.CanaryComparison)
		_ = json.Unmarshal([]byte(*r.Comparison), c.Comparison) // written by the analyser
	}
	return c
}

func canaryObject(ns string) string { return "namespace/" + ns + "/canary" }

// activeCanary returns the namespace's active canary, locked for the rest of
// tx, or nil. The caller holds the namespace's lock.
func activeCanary(tx *gorm.DB, ns string) (*canaryRow, error) {
	var rows []canaryRow
	if err := tx.Raw("SELECT * FROM canaries WHERE namespace = ? AND state = 'active' FOR UPDATE", ns).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("finding the active canary: %w", err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	return &rows[0], nil
}

// startCanary records version n as the namespace's active canary (its
// outbox row is already queued) and audits it.
func (db *DB) startCanary(ctx context.Context, tx *gorm.DB, ns string, n int64, selector map[string]string) error {
	b, err := json.Marshal(selector)
	if err != nil {
		return err
	}
	r := canaryRow{Namespace: ns, Version: n, Selector: string(b), State: string(sluice.CanaryActive), CreatedAt: db.now(),
		CreatedBy: sluice.ActorFromContext(ctx).Name()}
	if err := tx.Create(&r).Error; err != nil {
		return err // a concurrent canary: the unique index answers ECONFLICT
	}
	return db.appendAudit(ctx, tx, audit{Action: sluice.ActionCanaryStart, Object: canaryObject(ns), Namespace: ns,
		After: map[string]any{"id": r.ID, "version": n, "selector": selector}})
}

// endCanary promotes or aborts an active canary: it queues the outbox
// operation, records the new state and audits it.
func (db *DB) endCanary(ctx context.Context, tx *gorm.DB, r *canaryRow, state sluice.CanaryState, reason string) error {
	return db.endCanaryWith(ctx, tx, r, state, reason, nil)
}

// endCanaryWith is endCanary recording figures (the analyser's comparison)
// in the audit event, when set.
func (db *DB) endCanaryWith(ctx context.Context, tx *gorm.DB, r *canaryRow, state sluice.CanaryState, reason string, figures any) error {
	kind, action := sluice.PublishAbort, sluice.ActionCanaryAbort
	if state == sluice.CanaryPromoted {
		kind, action = sluice.PublishPromote, sluice.ActionCanaryPromote
	}
	if _, err := db.insertPublication(ctx, tx, r.Namespace, r.Version, kind, nil); err != nil {
		return err
	}
	now := db.now()
	by := sluice.ActorFromContext(ctx).Name()
	if err := tx.Exec("UPDATE canaries SET state = ?, ended_at = ?, ended_by = ?, reason = ? WHERE id = ?",
		string(state), now, by, reason, r.ID).Error; err != nil {
		return err
	}
	r.State, r.EndedAt, r.EndedBy, r.Reason = string(state), &now, by, reason
	if err := db.appendAudit(ctx, tx, audit{Action: action, Object: canaryObject(r.Namespace), Namespace: r.Namespace,
		Before: map[string]any{"id": r.ID, "version": r.Version, "state": sluice.CanaryActive, "selector": json.RawMessage(r.Selector)},
		After:  canaryEndAfter(r, state, reason, figures)}); err != nil {
		return err
	}
	return tx.Exec("SELECT pg_notify(?, ?)", NotifyChannel, r.Namespace).Error
}

// CanaryService implements sluice.CanaryService.
type CanaryService struct{ db *DB }

var _ sluice.CanaryService = (*CanaryService)(nil)

// NewCanaryService returns the canary service of db.
func NewCanaryService(db *DB) *CanaryService { return &CanaryService{db: db} }

// FindCanary returns the namespace's active canary with its latest outbox
// operation.
func (s *CanaryService) FindCanary(ctx context.Context, ns string) (*sluice.Canary, error) {
	var rows []canaryRow
	if err := s.db.gorm.WithContext(ctx).Where("namespace = ? AND state = 'active'", ns).Find(&rows).Error; err != nil {
		return nil, dbErr(fmt.Errorf("finding canary: %w", err))
	}
	if len(rows) == 0 {
		if _, err := NewNamespaceService(s.db).FindNamespaceByName(ctx, ns); err != nil {
			return nil, err
		}
		return nil, notFound("namespace %q has no canary in progress", ns)
	}
	c := rows[0].canary()
	if err := s.attachPublication(ctx, s.db.gorm.WithContext(ctx), c); err != nil {
		return nil, err
	}
	return c, nil
}

func (s *CanaryService) attachPublication(ctx context.Context, q *gorm.DB, c *sluice.Canary) error {
	var pubs []publicationRow
	if err := q.Where("namespace = ? AND version = ? AND kind IN ?", c.Namespace, c.Version,
		[]string{string(sluice.PublishCanary), string(sluice.PublishPromote), string(sluice.PublishAbort)}).
		Order("id DESC").Limit(1).Find(&pubs).Error; err != nil {
		return dbErr(fmt.Errorf("finding canary publication: %w", err))
	}
	if len(pubs) == 1 {
		c.Publication = pubs[0].publication()
	}
	return nil
}

// PromoteCanary queues the canary's version for every node.
func (s *CanaryService) PromoteCanary(ctx context.Context, ns, reason string) (*sluice.Canary, error) {
	return s.end(ctx, ns, sluice.CanaryPromoted, reason)
}

// AbortCanary queues the canary key's deletion.
func (s *CanaryService) AbortCanary(ctx context.Context, ns, reason string) (*sluice.Canary, error) {
	return s.end(ctx, ns, sluice.CanaryAborted, reason)
}

func (s *CanaryService) end(ctx context.Context, ns string, state sluice.CanaryState, reason string) (*sluice.Canary, error) {
	if !sluice.ActorFromContext(ctx).Role.Allows(sluice.RoleApprover) {
		return nil, sluice.Errorf(sluice.EFORBIDDEN, "only approvers and admins promote or abort canaries")
	}
	reason = strings.TrimSpace(reason)
	if utf8.RuneCountInString(reason) > 10000 {
		return nil, &sluice.Error{Code: sluice.EINVALID, Message: "invalid request",
			Fields: []apiFieldError{{Path: "reason", Message: "must be at most 10000 characters"}}}
	}
	var out *sluice.Canary
	err := s.db.tx(ctx, func(tx *gorm.DB) error {
		if _, err := lockNamespace(tx, ns); err != nil {
			return err
		}
		r, err := activeCanary(tx, ns)
		if err != nil {
			return err
		}
		if r == nil {
			return notFound("namespace %q has no canary in progress", ns)
		}
		if err := s.db.endCanary(ctx, tx, r, state, reason); err != nil {
			return err
		}
		out = r.canary()
		return s.attachPublication(ctx, tx, out)
	})
	if err != nil {
		return nil, fmt.Errorf("ending canary: %w", err)
	}
	s.db.published(ns)
	return out, nil
}
