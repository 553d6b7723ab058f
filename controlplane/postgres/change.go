package postgres

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

type changeRow struct {
	ID               int64 `gorm:"primaryKey"`
	Namespace        string
	Title            string
	Description      string
	Author           string
	Contributors     userIDs
	State            string
	BaseVersion      int64
	Document         string
	Checksum         string
	RollbackOf       *int64
	PublishedVersion *int64
	CreatedAt        time.Time
	UpdatedAt        time.Time
	Warnings         *string // JSON; nil for changes opened before warnings were stored
	PublishAt        *time.Time
	ScheduledBy      *string
	Latest           int64 `gorm:"->;-:migration"` // the namespace's newest version, read with the row
}

func (changeRow) TableName() string { return "changes" }

func (r *changeRow) change() *sluice.Change {
	c := &sluice.Change{ID: r.ID, Namespace: r.Namespace, Title: r.Title, Description: r.Description, Author: r.Author,
		State: sluice.ChangeState(r.State), BaseVersion: r.BaseVersion, Checksum: r.Checksum, RollbackOf: r.RollbackOf,
		PublishedVersion: r.PublishedVersion, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
	c.Stale = (c.State == sluice.ChangeOpen || c.State == sluice.ChangeApproved) && r.BaseVersion != r.Latest
	if r.PublishAt != nil {
		c.PublishAt = ptr(r.PublishAt.UTC())
	}
	if r.ScheduledBy != nil {
		c.ScheduledBy = *r.ScheduledBy
	}
	c.Contributors = slices.Clone([]int64(r.Contributors))
	if c.Contributors == nil {
		c.Contributors = []int64{}
	}
	if r.Warnings != nil {
		c.Warnings = []api.Warning{}
		json.Unmarshal([]byte(*r.Warnings), &c.Warnings)
	}
	return c
}

// changeWarnings returns api.WarningsIn of doc against version base of ns
// (knowing the nodes' quota usage now), as stored JSON.
func (db *DB) changeWarnings(ctx context.Context, ns string, base int64, doc []byte) (*string, error) {
	var old *api.RuleSet
	if base > 0 {
		ref, err := db.versionDocument(ctx, ns, base)
		if err != nil {
			return nil, err
		}
		if old, err = sluice.DecodeDocument(ref.doc); err != nil {
			return nil, err
		}
	}
	rs, err := sluice.DecodeDocument(doc)
	if err != nil {
		return nil, err
	}
	ws, err := db.warnings(ctx, ns, old, rs)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(ws)
	if err != nil {
		return nil, fmt.Errorf("encoding warnings: %w", err)
	}
	return ptr(string(b)), nil
}

// warnings is api.WarningsIn of rs against old in namespace ns, knowing the
// nodes' quota usage now, and the cluster limits of rs that name a shared
// bucket which another namespace's newest version names with other figures
// (api.SharedBucketWarnings: a gateway namespace and a service namespace
// sharing one budget is the common case). Other namespaces are read only
// when rs names a bucket, and only those whose newest document mentions
// one of its names.
func (db *DB) warnings(ctx context.Context, ns string, old, rs *api.RuleSet) ([]api.Warning, error) {
	ws := api.WarningsIn(old, rs, db.warnContext(ns))
	others, err := db.bucketSharers(ctx, ns, rs)
	if err != nil || len(others) == 0 {
		return ws, err
	}
	return append(ws, api.SharedBucketWarnings(ns, rs, others)...), nil
}

// bucketSharers returns, by namespace, the newest rule set of each namespace
// but ns whose document mentions a bucket a cluster limit of rs names.
func (db *DB) bucketSharers(ctx context.Context, ns string, rs *api.RuleSet) (map[string]*api.RuleSet, error) {
	var buckets []string
	for _, l := range rs.Limits {
		if l.Bucket != "" && l.Scope == api.ScopeCluster && !slices.Contains(buckets, l.Bucket) {
			buckets = append(buckets, l.Bucket)
		}
	}
	if len(buckets) == 0 {
		return nil, nil
	}
	var rows []struct {
		Namespace string
		Number    int64
	}
	// A bucket name is an id (letters, digits, '-', '_', '.'), quoted in the
	// stored JSON; strpos finds it without LIKE's wildcards.
	mention := strings.TrimSuffix(strings.Repeat("strpos(v.document::text, ?) > 0 OR ", len(buckets)), " OR ")
	args := []any{ns}
	for _, b := range buckets {
		args = append(args, `"`+b+`"`)
	}
	if err := db.gorm.WithContext(ctx).Raw(`SELECT v.namespace, v.number FROM versions v
		WHERE v.namespace <> ? AND v.number = (SELECT max(number) FROM versions w WHERE w.namespace = v.namespace)
		AND (`+mention+`)`, args...).Scan(&rows).Error; err != nil {
		return nil, dbErr(fmt.Errorf("finding other namespaces' buckets: %w", err))
	}
	out := make(map[string]*api.RuleSet, len(rows))
	for _, r := range rows {
		ref, err := db.versionDocument(ctx, r.Namespace, r.Number)
		if err != nil {
			return nil, err
		}
		if out[r.Namespace], err = sluice.DecodeDocument(ref.doc); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fillWarnings computes the warnings of a change opened before they were
// stored (its row has none).
func (db *DB) fillWarnings(ctx context.Context, c *sluice.Change, doc []byte) error {
	if c.Warnings != nil {
		return nil
	}
	if doc == nil {
		var docs []string
		if err := db.gorm.WithContext(ctx).Raw("SELECT document FROM changes WHERE id = ?", c.ID).Scan(&docs).Error; err != nil {
			return dbErr(fmt.Errorf("finding change: %w", err))
		}
		if len(docs) == 0 {
			return notFound("change %d not found", c.ID)
		}
		doc = []byte(docs[0])
	}
	w, err := db.changeWarnings(ctx, c.Namespace, c.BaseVersion, doc)
	if err != nil {
		return err
	}
	c.Warnings = []api.Warning{}
	return json.Unmarshal([]byte(*w), &c.Warnings)
}

// userIDs is a bigint[] column of user ids (drafts.contributors,
// changes.contributors).
type userIDs []int64

// Scan reads Postgres's text form of an array, {1,2,3}.
func (u *userIDs) Scan(src any) error {
	var s string
	switch v := src.(type) {
	case nil:
		*u = nil
		return nil
	case string:
		s = v
	case []byte:
		s = string(v)
	default:
		return fmt.Errorf("scanning user ids: unexpected %T", src)
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}")
	out := userIDs{}
	if s != "" {
		for _, f := range strings.Split(s, ",") {
			id, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return fmt.Errorf("scanning user ids: %w", err)
			}
			out = append(out, id)
		}
	}
	*u = out
	return nil
}

// Value writes the array's text form.
func (u userIDs) Value() (driver.Value, error) {
	f := make([]string, len(u))
	for i, id := range u {
		f[i] = strconv.FormatInt(id, 10)
	}
	return "{" + strings.Join(f, ",") + "}", nil
}

// with returns u with id added, unless it is there or not a user's (the
// anonymous or system actor).
func (u userIDs) with(id int64) userIDs {
	if id <= 0 || slices.Contains(u, id) {
		return u
	}
	return append(slices.Clip(u), id)
}

// actorID returns the id of the context's user, 0 when there is none.
func actorID(ctx context.Context) int64 {
	if u := sluice.ActorFromContext(ctx).User; u != nil {
		return u.ID
	}
	return 0
}

type reviewRow struct {
	ID        int64 `gorm:"primaryKey"`
	ChangeID  int64
	Reviewer  string
	Decision  string
	Comment   string
	CreatedAt time.Time
}

func (reviewRow) TableName() string { return "reviews" }

// ChangeService implements sluice.ChangeService.
type ChangeService struct{ db *DB }

var _ sluice.ChangeService = (*ChangeService)(nil)

// NewChangeService returns the change service of db.
func NewChangeService(db *DB) *ChangeService { return &ChangeService{db: db} }

const latestVersionSQL = "COALESCE((SELECT max(number) FROM versions v WHERE v.namespace = changes.namespace), 0) AS latest"

// FindChangeByID returns a change with its reviews and its diff against its
// base version.
func (s *ChangeService) FindChangeByID(ctx context.Context, ns string, id int64) (*sluice.Change, error) {
	var rows []changeRow
	if err := s.db.gorm.WithContext(ctx).Table("changes").Select("changes.*, "+latestVersionSQL).
		Where("namespace = ? AND id = ?", ns, id).Find(&rows).Error; err != nil {
		return nil, dbErr(fmt.Errorf("finding change: %w", err))
	}
	if len(rows) == 0 {
		return nil, notFound("change %d not found in namespace %q", id, ns)
	}
	r := &rows[0]
	c := r.change()
	var reviews []reviewRow
	if err := s.db.gorm.WithContext(ctx).Where("change_id = ?", id).Order("id").Find(&reviews).Error; err != nil {
		return nil, dbErr(fmt.Errorf("finding reviews: %w", err))
	}
	for _, rv := range reviews {
		c.Reviews = append(c.Reviews, &sluice.Review{ID: rv.ID, ChangeID: rv.ChangeID, Reviewer: rv.Reviewer,
			Decision: sluice.Decision(rv.Decision), Comment: rv.Comment, CreatedAt: rv.CreatedAt.UTC()})
	}
	base, err := s.db.versionDocument(ctx, ns, r.BaseVersion)
	if err != nil {
		return nil, err
	}
	c.Diff, err = s.db.diff(base, &docRef{checksum: r.Checksum, doc: []byte(r.Document)})
	if err != nil {
		return nil, err
	}
	if err := s.db.fillWarnings(ctx, c, []byte(r.Document)); err != nil {
		return nil, err
	}
	return c, nil
}

// FindChanges lists a namespace's changes newest first, without diffs.
func (s *ChangeService) FindChanges(ctx context.Context, f sluice.ChangeFilter) ([]*sluice.Change, int64, error) {
	q := s.db.gorm.WithContext(ctx).Table("changes").
		Select("id, namespace, title, description, author, contributors, state, base_version, checksum, rollback_of, published_version, created_at, updated_at, warnings, publish_at, scheduled_by, "+latestVersionSQL).
		Where("namespace = ?", f.Namespace)
	if f.State != "" {
		q = q.Where("state = ?", string(f.State))
	}
	if f.Author != "" {
		q = q.Where("author = ?", f.Author)
	}
	if f.Before > 0 {
		q = q.Where("id < ?", f.Before)
	}
	limit := changePage.size(f.Limit)
	var rows []changeRow
	if err := q.Order("id DESC").Limit(limit).Find(&rows).Error; err != nil {
		return nil, 0, dbErr(fmt.Errorf("listing changes: %w", err))
	}
	out := make([]*sluice.Change, len(rows))
	for i := range rows {
		out[i] = rows[i].change()
		if err := s.db.fillWarnings(ctx, out[i], nil); err != nil {
			return nil, 0, err
		}
	}
	return out, nextCursor(len(rows), limit, func() int64 { return rows[len(rows)-1].ID }), nil
}

func checkChangeText(c *sluice.Change) error {
	var fields []apiFieldError
	if n := utf8.RuneCountInString(strings.TrimSpace(c.Title)); n == 0 || n > 200 {
		fields = append(fields, apiFieldError{Path: "title", Message: "must be 1 to 200 characters"})
	}
	if utf8.RuneCountInString(c.Description) > 10000 {
		fields = append(fields, apiFieldError{Path: "description", Message: "must be at most 10000 characters"})
	}
	if len(fields) > 0 {
		return &sluice.Error{Code: sluice.EINVALID, Message: "invalid change", Fields: fields}
	}
	return nil
}

// lockNamespace locks the namespace's row for the rest of tx (serializing
// version numbering) and returns its newest version number.
func lockNamespace(tx *gorm.DB, ns string) (int64, error) {
	var names []string
	if err := tx.Raw("SELECT name FROM namespaces WHERE name = ? FOR UPDATE", ns).Scan(&names).Error; err != nil {
		return 0, err
	}
	if len(names) == 0 {
		return 0, notFound("namespace %q not found", ns)
	}
	return latestVersion(tx, ns)
}

func latestVersion(tx *gorm.DB, ns string) (int64, error) {
	var n int64
	err := tx.Raw("SELECT COALESCE(max(number), 0) FROM versions WHERE namespace = ?", ns).Scan(&n).Error
	return n, err
}

// CreateChange opens a change from the draft.
func (s *ChangeService) CreateChange(ctx context.Context, c *sluice.Change) error {
	if err := checkChangeText(c); err != nil {
		return err
	}
	ns := c.Namespace
	var out *changeRow
	err := s.db.tx(ctx, func(tx *gorm.DB) error {
		var d draftRow
		err := tx.Clauses(clause.Locking{Strength: "SHARE"}).Where("namespace = ?", ns).Take(&d).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return notFound("namespace %q not found", ns)
		}
		if err != nil {
			return err
		}
		rs, err := sluice.DecodeDocument([]byte(d.Document))
		if err != nil {
			return err
		}
		if err := checkRuleSet(ns, rs); err != nil {
			return err
		}
		out, err = s.db.insertChange(ctx, tx, newChange{Namespace: ns, Change: c, Document: d.Document, Checksum: d.Checksum,
			Contributors: d.Contributors})
		return err
	})
	if err != nil {
		return fmt.Errorf("opening change: %w", err)
	}
	*c = *out.change()
	return nil
}

// newChange is what insertChange stores.
type newChange struct {
	Namespace string
	// Change gives the title and description.
	Change *sluice.Change
	// Document and Checksum are the proposed rules.
	Document, Checksum string
	// Contributors are the users who wrote the document; the actor is
	// added.
	Contributors userIDs
	// RollbackOf is the version a rollback returns to; nil for a change
	// from the draft.
	RollbackOf *int64
	// Emergency, for an emergency rollback, is what the nodes report
	// running; nil for a change to review.
	Emergency *emergencyFleet
}

// emergencyFleet is what an emergency rollback knows of the nodes: the
// versions they report applied, or that the registry could not be read.
type emergencyFleet struct {
	Applied []int64
	Unknown bool
}

// fleetRules is what a namespace's fleet is to run: the published version
// (the newest one that is not a canary left unpromoted) and the active
// canary's version, each with its checksum; zero numbers when none.
type fleetRules struct {
	Published, Canary       int64
	PublishedSum, CanarySum string
}

// findFleetRules reads ns's fleetRules in tx.
func findFleetRules(tx *gorm.DB, ns string) (fleetRules, error) {
	var f fleetRules
	var rows []struct {
		Number   int64
		Checksum string
		State    *string
	}
	// The published version: the newest not an active or aborted canary.
	if err := tx.Raw(`SELECT v.number, v.checksum FROM versions v WHERE v.namespace = ? AND NOT EXISTS
		(SELECT 1 FROM canaries c WHERE c.namespace = v.namespace AND c.version = v.number AND c.state <> 'promoted')
		ORDER BY v.number DESC LIMIT 1`, ns).Scan(&rows).Error; err != nil {
		return f, fmt.Errorf("finding the published version: %w", err)
	}
	if len(rows) == 1 {
		f.Published, f.PublishedSum = rows[0].Number, rows[0].Checksum
	}
	rows = rows[:0]
	if err := tx.Raw(`SELECT v.number, v.checksum FROM versions v JOIN canaries c ON c.namespace = v.namespace AND c.version = v.number
		WHERE v.namespace = ? AND c.state = 'active'`, ns).Scan(&rows).Error; err != nil {
		return f, fmt.Errorf("finding the canary version: %w", err)
	}
	if len(rows) == 1 {
		f.Canary, f.CanarySum = rows[0].Number, rows[0].Checksum
	}
	return f, nil
}

// checkNotRunning refuses (ECONFLICT, "nothing to review") a change whose
// rules the fleet already runs, judged by what it runs rather than by the
// newest version (which may be an aborted canary): for a change to review,
// the active canary's rules or else the published version's; for an
// emergency rollback, the published version's and the canary's and every
// version nodes report applied (an unread registry refuses nothing).
func checkNotRunning(tx *gorm.DB, ns, checksum string, em *emergencyFleet) error {
	f, err := findFleetRules(tx, ns)
	if err != nil {
		return err
	}
	if em == nil {
		n, sum := f.Published, f.PublishedSum
		if f.Canary > 0 {
			n, sum = f.Canary, f.CanarySum
		}
		if n > 0 && sum == checksum {
			return sluice.Errorf(sluice.ECONFLICT, "the rules equal version %d, which the fleet runs; there is nothing to review", n)
		}
		return nil
	}
	if em.Unknown || f.Published == 0 || f.PublishedSum != checksum || (f.Canary > 0 && f.CanarySum != checksum) {
		return nil
	}
	if len(em.Applied) > 0 {
		var sums []struct {
			Number   int64
			Checksum string
		}
		if err := tx.Raw("SELECT number, checksum FROM versions WHERE namespace = ? AND number IN ?", ns, em.Applied).Scan(&sums).Error; err != nil {
			return fmt.Errorf("reading the applied versions: %w", err)
		}
		known := map[int64]string{}
		for _, r := range sums {
			known[r.Number] = r.Checksum
		}
		for _, n := range em.Applied {
			if known[n] != checksum {
				return nil // a node runs something else
			}
		}
	}
	return sluice.Errorf(sluice.ECONFLICT, "the fleet already runs these rules (version %d, and every node reports them applied); there is nothing to roll back", f.Published)
}

// insertChange stores an open change of nc.Document, written by its
// contributors and the actor, based on the newest version; ECONFLICT when
// the document equals it.
func (db *DB) insertChange(ctx context.Context, tx *gorm.DB, nc newChange) (*changeRow, error) {
	ns, c, doc, checksum, rollbackOf := nc.Namespace, nc.Change, nc.Document, nc.Checksum, nc.RollbackOf
	latest, err := latestVersion(tx, ns)
	if err != nil {
		return nil, err
	}
	if latest > 0 {
		if err := checkNotRunning(tx, ns, checksum, nc.Emergency); err != nil {
			return nil, err
		}
	}
	warnings, err := db.changeWarnings(ctx, ns, latest, []byte(doc))
	if err != nil {
		return nil, err
	}
	now := db.now()
	r := changeRow{Namespace: ns, Title: strings.TrimSpace(c.Title), Description: c.Description, Author: sluice.ActorFromContext(ctx).Name(),
		Contributors: nc.Contributors.with(actorID(ctx)), State: string(sluice.ChangeOpen), BaseVersion: latest, Document: doc, Checksum: checksum,
		RollbackOf: rollbackOf, CreatedAt: now, UpdatedAt: now, Warnings: warnings, Latest: latest}
	if err := tx.Omit("Latest").Create(&r).Error; err != nil {
		return nil, err
	}
	action := sluice.ActionChangeCreate
	if rollbackOf != nil {
		action = sluice.ActionRollbackRequest
	}
	if err := db.appendAudit(ctx, tx, audit{Action: action, Object: changeObject(ns, r.ID), Namespace: ns,
		After: map[string]any{"id": r.ID, "title": r.Title, "baseVersion": latest, "checksum": checksum, "rollbackOf": rollbackOf,
			"contributors": r.Contributors}}); err != nil {
		return nil, err
	}
	return &r, nil
}

func changeObject(ns string, id int64) string {
	return "namespace/" + ns + "/change/" + strconv.FormatInt(id, 10)
}

// lockChange locks and returns a change with the namespace's newest version.
func lockChange(tx *gorm.DB, ns string, id int64) (*changeRow, error) {
	var r changeRow
	err := tx.Omit("Latest").Clauses(clause.Locking{Strength: "UPDATE"}).Where("namespace = ? AND id = ?", ns, id).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, notFound("change %d not found in namespace %q", id, ns)
	}
	if err != nil {
		return nil, err
	}
	if r.Latest, err = latestVersion(tx, ns); err != nil {
		return nil, err
	}
	return &r, nil
}

// UpdateChange approves or rejects a change.
func (s *ChangeService) UpdateChange(ctx context.Context, ns string, id int64, upd sluice.ChangeUpdate) (*sluice.Change, error) {
	actor := sluice.ActorFromContext(ctx)
	if !actor.Role.Allows(sluice.RoleApprover) {
		return nil, sluice.Errorf(sluice.EFORBIDDEN, "only approvers and admins review changes")
	}
	if upd.Decision != sluice.Approve && upd.Decision != sluice.Reject {
		return nil, sluice.Errorf(sluice.EINVALID, "unknown decision %q", upd.Decision)
	}
	if utf8.RuneCountInString(upd.Comment) > 10000 {
		return nil, &sluice.Error{Code: sluice.EINVALID, Message: "invalid review",
			Fields: []apiFieldError{{Path: "comment", Message: "must be at most 10000 characters"}}}
	}
	err := s.db.tx(ctx, func(tx *gorm.DB) error {
		r, err := lockChange(tx, ns, id)
		if err != nil {
			return err
		}
		if r.Author == actor.Name() {
			return sluice.Errorf(sluice.EFORBIDDEN, "four eyes: the author of a change cannot review it")
		}
		if upd.Decision == sluice.Approve && actor.User != nil && slices.Contains(r.Contributors, actor.User.ID) {
			return sluice.Errorf(sluice.EFORBIDDEN, "you edited this change's draft; someone else must approve it")
		}
		c := r.change()
		switch {
		case upd.Decision == sluice.Approve && c.State != sluice.ChangeOpen:
			return sluice.Errorf(sluice.ECONFLICT, "change %d is %s; only an open change can be approved", id, c.State)
		case upd.Decision == sluice.Reject && c.State != sluice.ChangeOpen && c.State != sluice.ChangeApproved:
			return sluice.Errorf(sluice.ECONFLICT, "change %d is %s; it can no longer be rejected", id, c.State)
		case upd.Decision == sluice.Approve && c.Stale:
			return sluice.Errorf(sluice.ECONFLICT, "change %d is stale: it was based on version %d but version %d is newer; reopen it", id, r.BaseVersion, r.Latest)
		}
		state, action := sluice.ChangeApproved, sluice.ActionChangeApprove
		if upd.Decision == sluice.Reject {
			state, action = sluice.ChangeRejected, sluice.ActionChangeReject
		}
		now := s.db.now()
		if err := tx.Create(&reviewRow{ChangeID: id, Reviewer: actor.Name(), Decision: string(upd.Decision), Comment: upd.Comment, CreatedAt: now}).Error; err != nil {
			return err
		}
		if err := tx.Exec("UPDATE changes SET state = ?, updated_at = ?, publish_at = NULL, scheduled_by = NULL WHERE id = ?", string(state), now, id).Error; err != nil {
			return err
		}
		return s.db.appendAudit(ctx, tx, audit{Action: action, Object: changeObject(ns, id), Namespace: ns,
			Before: map[string]any{"state": r.State}, After: map[string]any{"state": state, "comment": upd.Comment}})
	})
	if err != nil {
		return nil, fmt.Errorf("reviewing change: %w", err)
	}
	return s.FindChangeByID(ctx, ns, id)
}

// ReopenChange rebases a stale or rejected change on the newest version.
func (s *ChangeService) ReopenChange(ctx context.Context, ns string, id int64, comment string) (*sluice.Change, error) {
	actor := sluice.ActorFromContext(ctx)
	if !actor.Role.Allows(sluice.RoleEditor) {
		return nil, sluice.Errorf(sluice.EFORBIDDEN, "only editors, approvers and admins reopen changes")
	}
	err := s.db.tx(ctx, func(tx *gorm.DB) error {
		r, err := lockChange(tx, ns, id)
		if err != nil {
			return err
		}
		c := r.change()
		switch {
		case c.State == sluice.ChangePublished:
			return sluice.Errorf(sluice.ECONFLICT, "change %d is published; open a new change", id)
		case c.State != sluice.ChangeRejected && !c.Stale:
			return sluice.Errorf(sluice.ECONFLICT, "change %d is %s and up to date; there is nothing to reopen", id, c.State)
		}
		now := s.db.now()
		if err := tx.Create(&reviewRow{ChangeID: id, Reviewer: actor.Name(), Decision: string(sluice.Reopen), Comment: comment, CreatedAt: now}).Error; err != nil {
			return err
		}
		warnings, err := s.db.changeWarnings(ctx, ns, r.Latest, []byte(r.Document))
		if err != nil {
			return err
		}
		if err := tx.Exec("UPDATE changes SET state = 'open', base_version = ?, updated_at = ?, warnings = ?, publish_at = NULL, scheduled_by = NULL WHERE id = ?", r.Latest, now, warnings, id).Error; err != nil {
			return err
		}
		return s.db.appendAudit(ctx, tx, audit{Action: sluice.ActionChangeReopen, Object: changeObject(ns, id), Namespace: ns,
			Before: map[string]any{"state": r.State, "baseVersion": r.BaseVersion}, After: map[string]any{"state": "open", "baseVersion": r.Latest}})
	})
	if err != nil {
		return nil, fmt.Errorf("reopening change: %w", err)
	}
	return s.FindChangeByID(ctx, ns, id)
}

// PublishChange creates the next version from an approved change and queues
// its publication (to the ruleset key, or with o.Canary to the canary key),
// in one transaction.
func (s *ChangeService) PublishChange(ctx context.Context, ns string, id int64, o sluice.PublishOptions) (*sluice.Version, error) {
	actor := sluice.ActorFromContext(ctx)
	if !actor.Role.Allows(sluice.RoleApprover) {
		return nil, sluice.Errorf(sluice.EFORBIDDEN, "only approvers and admins publish")
	}
	var selector map[string]string
	if o.Canary != nil {
		if errs := api.ValidateSelector(o.Canary.Selector); len(errs) > 0 {
			return nil, &sluice.Error{Code: sluice.EINVALID, Message: "invalid canary", Fields: errs}
		}
		selector = o.Canary.Selector
		if a := o.Canary.Analysis; a != nil {
			if errs := a.Validate(); len(errs) > 0 {
				return nil, &sluice.Error{Code: sluice.EINVALID, Message: "invalid canary analysis", Fields: errs}
			}
		}
	}
	var v *sluice.Version
	err := s.db.tx(ctx, func(tx *gorm.DB) error {
		var err error
		v, err = s.db.publishLocked(ctx, tx, ns, id, selector, nil)
		if err != nil || o.Canary == nil || o.Canary.Analysis == nil {
			return err
		}
		return s.db.setCanaryAnalysis(tx, ns, v.Number, o.Canary.Analysis)
	})
	if err != nil {
		return nil, fmt.Errorf("publishing change: %w", err)
	}
	s.db.published(ns)
	return v, nil
}

// publishLocked locks namespace ns and change id in tx and publishes the
// change as the next version, refusing a change that is not approved, is
// stale, or meets an active canary (the one set of publish checks, for
// PublishChange and the scheduler). When due is set it is called first with
// the locked change and the newest version: it returns whether to go on (the
// scheduler skips a change no longer due, or unschedules a stale one); a nil
// version and error mean the change was skipped.
func (db *DB) publishLocked(ctx context.Context, tx *gorm.DB, ns string, id int64, selector map[string]string,
	due func(r *changeRow) (bool, error)) (*sluice.Version, error) {
	latest, err := lockNamespace(tx, ns)
	if err != nil {
		return nil, err
	}
	r, err := lockChange(tx, ns, id)
	if err != nil {
		return nil, err
	}
	if due != nil {
		if ok, err := due(r); !ok || err != nil {
			return nil, err
		}
	}
	c := r.change()
	switch {
	case c.State != sluice.ChangeApproved:
		return nil, sluice.Errorf(sluice.ECONFLICT, "change %d is %s; only an approved change can be published", id, c.State)
	case c.Stale:
		return nil, sluice.Errorf(sluice.ECONFLICT, "change %d is stale: it was based on version %d but version %d is newer; reopen it", id, r.BaseVersion, latest)
	}
	active, err := activeCanary(tx, ns)
	if err != nil {
		return nil, err
	}
	if active != nil {
		return nil, sluice.Errorf(sluice.ECONFLICT, "version %d is in canary in namespace %q; promote or abort it first", active.Version, ns)
	}
	return db.insertVersion(ctx, tx, newVersion{Namespace: ns, Number: latest + 1, Change: r, Selector: selector, Scheduled: due != nil})
}

// newVersion is what insertVersion stores.
type newVersion struct {
	Namespace string
	// Number is the new version's number, the newest plus one.
	Number int64
	// Change is the change published as the version.
	Change *changeRow
	// RollbackOf is the version an emergency rollback returns to; nil
	// otherwise, when a reviewed rollback's change (Change.RollbackOf)
	// says it.
	RollbackOf *int64
	// Emergency marks an emergency rollback, published without review;
	// Reason says why.
	Emergency bool
	Reason    string
	// Selector, when set, publishes the version as a canary to the nodes
	// it selects; nil publishes it to every node.
	Selector map[string]string
	// Scheduled marks the scheduler's publication of a scheduled change:
	// the audit event records who scheduled it and for when.
	Scheduled bool
}

// insertVersion stores version nv.Number of nv.Change, its outbox row (the
// ruleset key, or the canary key when nv.Selector is set, with the canary's
// row), and the audit events, and notifies the publishers.
func (db *DB) insertVersion(ctx context.Context, tx *gorm.DB, nv newVersion) (*sluice.Version, error) {
	ns, n, r, rollbackOf, emergency, reason, selector := nv.Namespace, nv.Number, nv.Change, nv.RollbackOf, nv.Emergency, nv.Reason, nv.Selector
	if rollbackOf == nil {
		// A reviewed rollback is published like any change: the change
		// remembers the version it returns to.
		rollbackOf = r.RollbackOf
	}
	actor := sluice.ActorFromContext(ctx)
	now := db.now()
	vr := versionRow{Namespace: ns, Number: n, Document: r.Document, Checksum: r.Checksum, ChangeID: &r.ID, RollbackOf: rollbackOf,
		Emergency: emergency, Reason: reason, CreatedAt: now, CreatedBy: actor.Name()}
	if err := tx.Create(&vr).Error; err != nil {
		return nil, err
	}
	kind := sluice.PublishRuleSet
	if selector != nil {
		kind = sluice.PublishCanary
	}
	pr, err := db.insertPublication(ctx, tx, ns, n, kind, selector)
	if err != nil {
		return nil, err
	}
	if err := tx.Exec("UPDATE changes SET state = 'published', published_version = ?, updated_at = ? WHERE id = ?", n, now, r.ID).Error; err != nil {
		return nil, err
	}
	// A draft equal to the published rules holds nothing unreviewed: its
	// next edits start a new list of contributors.
	if err := tx.Exec("UPDATE drafts SET contributors = '{}' WHERE namespace = ? AND checksum = ?", ns, r.Checksum).Error; err != nil {
		return nil, err
	}
	action := sluice.ActionChangePublish
	if emergency {
		action = sluice.ActionRollbackEmergent
	}
	after := map[string]any{"version": n, "checksum": r.Checksum, "changeId": r.ID, "rollbackOf": rollbackOf, "reason": reason}
	if selector != nil {
		after["canary"] = map[string]any{"selector": selector}
	}
	if nv.Scheduled && r.PublishAt != nil && r.ScheduledBy != nil {
		after["scheduledBy"], after["publishAt"] = *r.ScheduledBy, r.PublishAt.UTC()
	}
	if err := db.appendAudit(ctx, tx, audit{Action: action, Object: versionObject(ns, n), Namespace: ns,
		Emergency: emergency, Before: map[string]any{"version": n - 1}, After: after}); err != nil {
		return nil, err
	}
	if selector != nil {
		if err := db.startCanary(ctx, tx, ns, n, selector); err != nil {
			return nil, err
		}
	}
	if err := tx.Exec("SELECT pg_notify(?, ?)", NotifyChannel, ns).Error; err != nil {
		return nil, err
	}
	v := vr.version()
	v.Publication = pr.publication()
	return v, nil
}

func versionObject(ns string, n int64) string {
	return "namespace/" + ns + "/version/" + strconv.FormatInt(n, 10)
}

// insertPublication queues one outbox operation, due now, with the trace
// context of ctx's span, if any (sluice.Publication.Traceparent).
func (db *DB) insertPublication(ctx context.Context, tx *gorm.DB, ns string, n int64, kind sluice.PublicationKind, selector map[string]string) (*publicationRow, error) {
	now := db.now()
	pr := publicationRow{Namespace: ns, Version: n, Kind: string(kind), State: string(sluice.PublicationPending), CreatedAt: now, NextAttemptAt: now}
	if tp := sluice.Traceparent(ctx); tp != "" {
		pr.Traceparent = &tp
	}
	if selector != nil {
		b, err := json.Marshal(selector)
		if err != nil {
			return nil, err
		}
		pr.Selector = ptr(string(b))
	}
	if err := tx.Create(&pr).Error; err != nil {
		return nil, err
	}
	return &pr, nil
}

func (db *DB) published(ns string) {
	if db.settings.OnPublish != nil {
		db.settings.OnPublish(ns)
	}
}

// docRef is a rule-set document known by its checksum; doc may be nil for
// the empty rule set of version 0.
type docRef struct {
	checksum string
	doc      []byte
}

func (db *DB) diff(from, to *docRef) (*api.Diff, error) {
	return db.diffs.diff(from.checksum, to.checksum, func() (*api.RuleSet, *api.RuleSet, error) {
		var a, b *api.RuleSet
		var err error
		if from.doc != nil {
			if a, err = sluice.DecodeDocument(from.doc); err != nil {
				return nil, nil, err
			}
		}
		if to.doc != nil {
			if b, err = sluice.DecodeDocument(to.doc); err != nil {
				return nil, nil, err
			}
		}
		return a, b, nil
	})
}
