package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

type versionRow struct {
	Namespace  string `gorm:"primaryKey"`
	Number     int64  `gorm:"primaryKey;autoIncrement:false"`
	Document   string
	Checksum   string
	ChangeID   *int64
	RollbackOf *int64
	Emergency  bool
	Reason     string
	CreatedAt  time.Time
	CreatedBy  string
}

func (versionRow) TableName() string { return "versions" }

func (r *versionRow) version() *sluice.Version {
	v := &sluice.Version{Namespace: r.Namespace, Number: r.Number, Checksum: r.Checksum, ChangeID: r.ChangeID, RollbackOf: r.RollbackOf,
		Emergency: r.Emergency, Reason: r.Reason, CreatedAt: r.CreatedAt.UTC(), CreatedBy: r.CreatedBy}
	if r.Document != "" {
		v.Document = []byte(r.Document)
	}
	return v
}

type publicationRow struct {
	ID            int64 `gorm:"primaryKey"`
	Namespace     string
	Version       int64
	Kind          string
	Selector      *string
	State         string
	Attempts      int
	LastError     string
	EtcdRevision  *int64
	CreatedAt     time.Time
	NextAttemptAt time.Time
	PublishedAt   *time.Time
	Traceparent   *string // the queuing span's (insertPublication)
}

func (publicationRow) TableName() string { return "publications" }

func (r *publicationRow) publication() *sluice.Publication {
	p := &sluice.Publication{ID: r.ID, Namespace: r.Namespace, Version: r.Version, Kind: sluice.PublicationKind(r.Kind),
		State: sluice.PublicationState(r.State), Attempts: r.Attempts, LastError: r.LastError, EtcdRevision: r.EtcdRevision,
		CreatedAt: r.CreatedAt.UTC(), NextAttemptAt: r.NextAttemptAt.UTC(), PublishedAt: utcPtr(r.PublishedAt)}
	if r.Traceparent != nil {
		p.Traceparent = *r.Traceparent
	}
	if p.Kind == "" {
		p.Kind = sluice.PublishRuleSet
	}
	if r.Selector != nil {
		_ = json.Unmarshal([]byte(*r.Selector), &p.Selector) // written by insertPublication
	}
	return p
}

// VersionService implements sluice.VersionService.
type VersionService struct{ db *DB }

var _ sluice.VersionService = (*VersionService)(nil)

// NewVersionService returns the version service of db.
func NewVersionService(db *DB) *VersionService { return &VersionService{db: db} }

func versionDocKey(ns string, n int64) string { return "v/" + ns + "/" + strconv.FormatInt(n, 10) }

// versionDocument returns version n's checksum and document (cached: versions
// are immutable); version 0 is the empty rule set.
func (db *DB) versionDocument(ctx context.Context, ns string, n int64) (*docRef, error) {
	if n == 0 {
		return &docRef{checksum: "empty"}, nil
	}
	key := versionDocKey(ns, n)
	// Two entries, evicted independently: a hit needs both.
	if b, ok := db.docs.get(key); ok {
		if sum, ok := db.docs.get(key + "/sum"); ok {
			return &docRef{checksum: string(sum), doc: b}, nil
		}
	}
	var rows []versionRow
	if err := db.gorm.WithContext(ctx).Select("checksum, document").Where("namespace = ? AND number = ?", ns, n).Find(&rows).Error; err != nil {
		return nil, dbErr(fmt.Errorf("finding version: %w", err))
	}
	if len(rows) == 0 {
		return nil, notFound("version %d not found in namespace %q", n, ns)
	}
	doc := []byte(rows[0].Document)
	db.docs.put(key+"/sum", []byte(rows[0].Checksum))
	db.docs.put(key, doc)
	return &docRef{checksum: rows[0].Checksum, doc: doc}, nil
}

// FindVersion returns version n with its document and publication.
func (s *VersionService) FindVersion(ctx context.Context, ns string, n int64) (*sluice.Version, error) {
	var rows []versionRow
	if err := s.db.gorm.WithContext(ctx).Select("namespace, number, checksum, change_id, rollback_of, emergency, reason, created_at, created_by").
		Where("namespace = ? AND number = ?", ns, n).Find(&rows).Error; err != nil {
		return nil, dbErr(fmt.Errorf("finding version: %w", err))
	}
	if len(rows) == 0 {
		return nil, notFound("version %d not found in namespace %q", n, ns)
	}
	v := rows[0].version()
	ref, err := s.db.versionDocument(ctx, ns, n)
	if err != nil {
		return nil, err
	}
	v.Document = ref.doc
	var pubs []publicationRow
	if err := s.db.gorm.WithContext(ctx).Where("namespace = ? AND version = ?", ns, n).Order("id DESC").Limit(1).Find(&pubs).Error; err != nil {
		return nil, dbErr(fmt.Errorf("finding publication: %w", err))
	}
	if len(pubs) == 1 {
		v.Publication = pubs[0].publication()
	}
	return v, nil
}

// FindVersions lists versions newest first, with their publications.
func (s *VersionService) FindVersions(ctx context.Context, f sluice.VersionFilter) ([]*sluice.Version, int64, error) {
	q := s.db.gorm.WithContext(ctx).Select("namespace, number, checksum, change_id, rollback_of, emergency, reason, created_at, created_by").
		Where("namespace = ?", f.Namespace)
	if f.Before > 0 {
		q = q.Where("number < ?", f.Before)
	}
	limit := versionPage.size(f.Limit)
	var rows []versionRow
	if err := q.Order("number DESC").Limit(limit).Find(&rows).Error; err != nil {
		return nil, 0, dbErr(fmt.Errorf("listing versions: %w", err))
	}
	out := make([]*sluice.Version, len(rows))
	nums := make([]int64, len(rows))
	for i := range rows {
		out[i] = rows[i].version()
		nums[i] = rows[i].Number
	}
	if len(rows) > 0 {
		var pubs []publicationRow
		if err := s.db.gorm.WithContext(ctx).Where("namespace = ? AND version IN ?", f.Namespace, nums).Order("id").Find(&pubs).Error; err != nil {
			return nil, 0, dbErr(fmt.Errorf("listing publications: %w", err))
		}
		byVersion := map[int64]*sluice.Publication{} // the latest operation of each
		for i := range pubs {
			byVersion[pubs[i].Version] = pubs[i].publication()
		}
		for _, v := range out {
			v.Publication = byVersion[v.Number]
		}
	}
	return out, nextCursor(len(rows), limit, func() int64 { return rows[len(rows)-1].Number }), nil
}

// DiffVersions returns the diff from version a to version b (0 is the empty
// rule set). ENOTFOUND when either does not exist.
func (s *VersionService) DiffVersions(ctx context.Context, ns string, a, b int64) (*api.Diff, error) {
	from, err := s.db.versionDocument(ctx, ns, a)
	if err != nil {
		return nil, err
	}
	to, err := s.db.versionDocument(ctx, ns, b)
	if err != nil {
		return nil, err
	}
	return s.db.diff(from, to)
}

// RollbackVersion opens a change with version n's content or, in an
// emergency, publishes it at once.
func (s *VersionService) RollbackVersion(ctx context.Context, ns string, n int64, rb sluice.Rollback) (*sluice.Change, *sluice.Version, error) {
	actor := sluice.ActorFromContext(ctx)
	reason := strings.TrimSpace(rb.Reason)
	switch {
	case rb.Emergency && !actor.Role.Allows(sluice.RoleAdmin):
		return nil, nil, sluice.Errorf(sluice.EFORBIDDEN, "only admins may roll back in an emergency")
	case !actor.Role.Allows(sluice.RoleEditor):
		return nil, nil, sluice.Errorf(sluice.EFORBIDDEN, "only editors, approvers and admins request rollbacks")
	case rb.Emergency && reason == "":
		return nil, nil, &sluice.Error{Code: sluice.EINVALID, Message: "an emergency rollback needs a reason",
			Fields: []apiFieldError{{Path: "reason", Message: "is required for an emergency rollback"}}}
	case utf8.RuneCountInString(reason) > 10000:
		return nil, nil, &sluice.Error{Code: sluice.EINVALID, Message: "invalid rollback",
			Fields: []apiFieldError{{Path: "reason", Message: "must be at most 10000 characters"}}}
	}
	var c *sluice.Change
	var v *sluice.Version
	err := s.db.tx(ctx, func(tx *gorm.DB) error {
		latest, err := lockNamespace(tx, ns)
		if err != nil {
			return err
		}
		var target versionRow
		err = tx.Where("namespace = ? AND number = ?", ns, n).Take(&target).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return notFound("version %d not found in namespace %q", n, ns)
		}
		if err != nil {
			return err
		}
		title := fmt.Sprintf("Roll back to version %d", n)
		// Its content is version n's, reviewed once already: only the
		// actor asking for it is among its contributors.
		nc := newChange{Namespace: ns, Change: &sluice.Change{Title: title, Description: reason},
			Document: target.Document, Checksum: target.Checksum, RollbackOf: &n}
		if rb.Emergency {
			nc.Emergency = &emergencyFleet{Applied: rb.Applied, Unknown: rb.AppliedUnknown}
		}
		r, err := s.db.insertChange(ctx, tx, nc)
		if err != nil {
			return err
		}
		if !rb.Emergency {
			c = r.change()
			return nil
		}
		// An emergency rollback ends a canary in progress: every node
		// must run the rolled-back rules.
		active, err := activeCanary(tx, ns)
		if err != nil {
			return err
		}
		if v, err = s.db.insertVersion(ctx, tx, newVersion{Namespace: ns, Number: latest + 1, Change: r, RollbackOf: &n,
			Emergency: true, Reason: reason}); err != nil {
			return err
		}
		if active != nil {
			return s.db.endCanary(ctx, tx, active, sluice.CanaryAborted, fmt.Sprintf("superseded by the emergency rollback to version %d", n))
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("rolling back: %w", err)
	}
	if v != nil {
		s.db.published(ns)
	}
	return c, v, nil
}

// Outbox implements sluice.Outbox.
type Outbox struct{ db *DB }

var _ sluice.Outbox = (*Outbox)(nil)

// NewOutbox returns the publication outbox of db.
func NewOutbox(db *DB) *Outbox { return &Outbox{db: db} }

// PendingNamespaces lists namespaces whose oldest pending publication is due.
func (o *Outbox) PendingNamespaces(ctx context.Context) ([]string, error) {
	var names []string
	err := o.db.gorm.WithContext(ctx).Raw(`SELECT DISTINCT namespace FROM publications
		WHERE state = 'pending' AND next_attempt_at <= ? ORDER BY namespace`, o.db.now()).Scan(&names).Error
	if err != nil {
		return nil, dbErr(fmt.Errorf("listing pending publications: %w", err))
	}
	return names, nil
}

// OutboxStats counts pending publications and the age of the oldest.
func (o *Outbox) OutboxStats(ctx context.Context) (int64, time.Duration, error) {
	var row struct {
		N      int64
		Oldest *time.Time
	}
	if err := o.db.gorm.WithContext(ctx).Raw("SELECT count(*) AS n, min(created_at) AS oldest FROM publications WHERE state = 'pending'").
		Scan(&row).Error; err != nil {
		return 0, 0, dbErr(fmt.Errorf("counting pending publications: %w", err))
	}
	if row.Oldest == nil {
		return row.N, 0, nil
	}
	return row.N, o.db.now().Sub(*row.Oldest), nil
}

// ClaimPublication takes the namespace's publish lock (a transaction-scoped
// advisory lock, tried without waiting) and returns its oldest pending
// publication, or nil.
func (o *Outbox) ClaimPublication(ctx context.Context, ns string) (sluice.OutboxClaim, error) {
	tx := o.db.gorm.WithContext(ctx).Begin(&sql.TxOptions{})
	if tx.Error != nil {
		return nil, dbErr(fmt.Errorf("beginning claim: %w", tx.Error))
	}
	claim, err := o.claim(tx, ns)
	if err != nil || claim == nil {
		tx.Rollback()
		return nil, dbErr(err)
	}
	return claim, nil
}

func (o *Outbox) claim(tx *gorm.DB, ns string) (*outboxClaim, error) {
	var locked bool
	if err := tx.Raw("SELECT pg_try_advisory_xact_lock(?, hashtext(?))", publishLockClass, ns).Scan(&locked).Error; err != nil {
		return nil, fmt.Errorf("taking the publish lock: %w", err)
	}
	if !locked {
		return nil, nil
	}
	var pubs []publicationRow
	if err := tx.Raw("SELECT * FROM publications WHERE namespace = ? AND state = 'pending' ORDER BY id LIMIT 1 FOR UPDATE", ns).
		Scan(&pubs).Error; err != nil {
		return nil, fmt.Errorf("finding pending publication: %w", err)
	}
	if len(pubs) == 0 || pubs[0].NextAttemptAt.After(o.db.now()) {
		return nil, nil
	}
	var vr versionRow
	if err := tx.Where("namespace = ? AND number = ?", ns, pubs[0].Version).Take(&vr).Error; err != nil {
		return nil, fmt.Errorf("finding version to publish: %w", err)
	}
	return &outboxClaim{db: o.db, tx: tx, pub: pubs[0].publication(), ver: vr.version()}, nil
}

type outboxClaim struct {
	db  *DB
	tx  *gorm.DB
	pub *sluice.Publication
	ver *sluice.Version
}

func (c *outboxClaim) Publication() *sluice.Publication { return c.pub }
func (c *outboxClaim) Version() *sluice.Version         { return c.ver }
func (c *outboxClaim) Abort()                           { c.tx.Rollback() }

func (c *outboxClaim) Finish(ctx context.Context, o sluice.PublishOutcome) error {
	tx := c.tx.WithContext(ctx)
	now := c.db.now()
	if !o.At.IsZero() {
		now = o.At.UTC().Truncate(time.Microsecond)
	}
	var err error
	switch {
	case o.Err == nil:
		err = tx.Exec(`UPDATE publications SET state = 'published', attempts = attempts + 1, last_error = '',
			etcd_revision = ?, published_at = ? WHERE id = ?`, o.Revision, now, c.pub.ID).Error
	case o.Final:
		err = tx.Exec("UPDATE publications SET state = 'failed', attempts = attempts + 1, last_error = ? WHERE id = ?",
			truncate(o.Err.Error(), 2000), c.pub.ID).Error
	default:
		err = tx.Exec("UPDATE publications SET attempts = attempts + 1, last_error = ?, next_attempt_at = ? WHERE id = ?",
			truncate(o.Err.Error(), 2000), o.RetryAt.UTC(), c.pub.ID).Error
	}
	if err != nil {
		tx.Rollback()
		return dbErr(fmt.Errorf("recording publication: %w", err))
	}
	if err := tx.Commit().Error; err != nil {
		return dbErr(fmt.Errorf("recording publication: %w", err))
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
