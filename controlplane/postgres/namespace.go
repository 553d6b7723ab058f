package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

type namespaceRow struct {
	Name          string `gorm:"primaryKey"`
	Description   string
	CreatedAt     time.Time
	CreatedBy     string
	LatestVersion int64 `gorm:"->;-:migration"`
}

func (namespaceRow) TableName() string { return "namespaces" }

func (r *namespaceRow) namespace() *sluice.Namespace {
	return &sluice.Namespace{Name: r.Name, Description: r.Description, CreatedAt: r.CreatedAt.UTC(), CreatedBy: r.CreatedBy, LatestVersion: r.LatestVersion}
}

// NamespaceService implements sluice.NamespaceService.
type NamespaceService struct{ db *DB }

var _ sluice.NamespaceService = (*NamespaceService)(nil)

// NewNamespaceService returns the namespace service of db.
func NewNamespaceService(db *DB) *NamespaceService { return &NamespaceService{db: db} }

func (s *NamespaceService) query(ctx context.Context) *gorm.DB {
	return s.db.gorm.WithContext(ctx).Table("namespaces").
		Select("namespaces.*, COALESCE((SELECT max(number) FROM versions v WHERE v.namespace = namespaces.name), 0) AS latest_version")
}

// FindNamespaceByName returns ENOTFOUND when there is none.
func (s *NamespaceService) FindNamespaceByName(ctx context.Context, name string) (*sluice.Namespace, error) {
	var rows []namespaceRow
	if err := s.query(ctx).Where("name = ?", name).Find(&rows).Error; err != nil {
		return nil, dbErr(fmt.Errorf("finding namespace: %w", err))
	}
	if len(rows) == 0 {
		return nil, notFound("namespace %q not found", name)
	}
	return rows[0].namespace(), nil
}

// FindNamespaces lists namespaces by name.
func (s *NamespaceService) FindNamespaces(ctx context.Context) ([]*sluice.Namespace, error) {
	var rows []namespaceRow
	if err := s.query(ctx).Order("name").Find(&rows).Error; err != nil {
		return nil, dbErr(fmt.Errorf("listing namespaces: %w", err))
	}
	out := make([]*sluice.Namespace, len(rows))
	for i := range rows {
		out[i] = rows[i].namespace()
	}
	return out, nil
}

// CreateNamespace stores ns and its empty draft.
func (s *NamespaceService) CreateNamespace(ctx context.Context, ns *sluice.Namespace) error {
	var fields []apiFieldError
	if !api.ValidID(ns.Name) {
		fields = append(fields, apiFieldError{Path: "name", Message: "must match [a-z0-9][a-z0-9-]{0,62}"})
	}
	if utf8.RuneCountInString(ns.Description) > 1000 {
		fields = append(fields, apiFieldError{Path: "description", Message: "must be at most 1000 characters"})
	}
	if len(fields) > 0 {
		return &sluice.Error{Code: sluice.EINVALID, Message: "invalid namespace", Fields: fields}
	}
	actor := sluice.ActorFromContext(ctx)
	now := s.db.now()
	r := namespaceRow{Name: ns.Name, Description: ns.Description, CreatedAt: now, CreatedBy: actor.Name()}
	empty := &api.RuleSet{Namespace: ns.Name}
	doc, _ := json.Marshal(empty)
	err := s.db.tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Omit("LatestVersion").Create(&r).Error; err != nil {
			return err
		}
		d := draftRow{Namespace: ns.Name, Document: string(doc), Checksum: empty.Checksum(), Revision: 1, UpdatedAt: now, UpdatedBy: actor.Name()}
		if err := tx.Create(&d).Error; err != nil {
			return err
		}
		return s.db.appendAudit(ctx, tx, audit{Action: sluice.ActionNamespaceCreate, Object: "namespace/" + ns.Name, Namespace: ns.Name,
			After: map[string]any{"name": ns.Name, "description": ns.Description}})
	})
	if sluice.ErrorCode(err) == sluice.ECONFLICT {
		return sluice.Errorf(sluice.ECONFLICT, "namespace %q already exists", ns.Name)
	}
	if err != nil {
		return fmt.Errorf("creating namespace: %w", err)
	}
	*ns = *r.namespace()
	return nil
}

type draftRow struct {
	Namespace string `gorm:"primaryKey"`
	Document  string
	Checksum  string
	Revision  int64
	UpdatedAt time.Time
	UpdatedBy string
	// Contributors are the users who edited the draft since it last
	// equalled a published version.
	Contributors userIDs
}

func (draftRow) TableName() string { return "drafts" }

func (r *draftRow) draft() *sluice.Draft {
	return &sluice.Draft{Namespace: r.Namespace, Document: []byte(r.Document), Checksum: r.Checksum, Revision: r.Revision,
		UpdatedAt: r.UpdatedAt.UTC(), UpdatedBy: r.UpdatedBy}
}

// DraftService implements sluice.DraftService.
type DraftService struct{ db *DB }

var _ sluice.DraftService = (*DraftService)(nil)

// NewDraftService returns the draft service of db.
func NewDraftService(db *DB) *DraftService { return &DraftService{db: db} }

func draftDocKey(ns string, rev int64) string { return "d/" + ns + "/" + strconv.FormatInt(rev, 10) }

// FindDraft returns the namespace's draft. The document of a revision
// already read is served from memory after a cheap revision check.
func (s *DraftService) FindDraft(ctx context.Context, ns string) (*sluice.Draft, error) {
	var meta []draftRow
	if err := s.db.gorm.WithContext(ctx).Select("namespace, checksum, revision, updated_at, updated_by").
		Where("namespace = ?", ns).Find(&meta).Error; err != nil {
		return nil, dbErr(fmt.Errorf("finding draft: %w", err))
	}
	if len(meta) == 0 {
		return nil, notFound("namespace %q not found", ns)
	}
	if doc, ok := s.db.docs.get(draftDocKey(ns, meta[0].Revision)); ok {
		d := meta[0].draft()
		d.Document = doc
		return d, nil
	}
	var r draftRow
	if err := s.db.gorm.WithContext(ctx).Where("namespace = ?", ns).Take(&r).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, notFound("namespace %q not found", ns)
		}
		return nil, dbErr(fmt.Errorf("finding draft: %w", err))
	}
	d := r.draft()
	s.db.docs.put(draftDocKey(ns, r.Revision), d.Document)
	return d, nil
}

// FindDraftRevision returns the draft's revision.
func (s *DraftService) FindDraftRevision(ctx context.Context, ns string) (int64, error) {
	var revs []int64
	if err := s.db.gorm.WithContext(ctx).Raw("SELECT revision FROM drafts WHERE namespace = ?", ns).Scan(&revs).Error; err != nil {
		return 0, dbErr(fmt.Errorf("finding draft: %w", err))
	}
	if len(revs) == 0 {
		return 0, notFound("namespace %q not found", ns)
	}
	return revs[0], nil
}

// kindPaths maps a rule kind to its field in a rule set.
var kindPaths = map[string]bool{sluice.KindRoutes: true, sluice.KindLimits: true, sluice.KindBreakers: true, sluice.KindDegrades: true}

// UpdateDraft validates and applies upd in one transaction, holding the
// draft's row lock, and audits it.
func (s *DraftService) UpdateDraft(ctx context.Context, ns string, upd sluice.DraftUpdate) (*sluice.Draft, error) {
	if upd.RuleSet == nil && !kindPaths[upd.Kind] {
		return nil, sluice.Errorf(sluice.ENOTFOUND, "unknown rule kind %q; one of routes, limits, breakers, degrades", upd.Kind)
	}
	if upd.RuleSet == nil && !api.ValidID(upd.ID) {
		return nil, &sluice.Error{Code: sluice.EINVALID, Message: "invalid rule id",
			Fields: []apiFieldError{{Path: "id", Message: "must match [a-z0-9][a-z0-9-]{0,62}"}}}
	}
	// A whole document is validated before the row is locked.
	if rs := upd.RuleSet; rs != nil {
		if rs.Namespace == "" {
			rs.Namespace = ns
		}
		if err := checkRuleSet(ns, rs); err != nil {
			return nil, err
		}
	}
	var rule any
	if upd.RuleSet == nil && !upd.Delete {
		var err error
		if rule, err = decodeRule(upd.Kind, upd.ID, upd.Rule); err != nil {
			return nil, err
		}
	}
	var out *sluice.Draft
	err := s.db.tx(ctx, func(tx *gorm.DB) error {
		var r draftRow
		err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("namespace = ?", ns).Take(&r).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return notFound("namespace %q not found", ns)
		}
		if err != nil {
			return err
		}
		if upd.IfRevision != nil && *upd.IfRevision != r.Revision {
			return sluice.Errorf(sluice.EPRECONDITION, "the draft changed (it is at revision %d, not %d); reload it and retry", r.Revision, *upd.IfRevision)
		}
		a := audit{Object: "namespace/" + ns + "/draft", Namespace: ns}
		rs := upd.RuleSet
		if rs != nil {
			a.Action = sluice.ActionDraftUpdate
			a.Before = map[string]any{"revision": r.Revision, "checksum": r.Checksum}
		} else {
			cur, err := sluice.DecodeDocument([]byte(r.Document))
			if err != nil {
				return err
			}
			a.Object = "namespace/" + ns + "/draft/" + upd.Kind + "/" + upd.ID
			old, err := applyRule(cur, upd.Kind, upd.ID, rule, upd.Delete)
			if err != nil {
				return err
			}
			a.Before = old
			a.After = rule
			a.Action = sluice.ActionDraftPutRule
			if upd.Delete {
				a.Action = sluice.ActionDraftDeleteRule
			}
			if err := checkRuleSet(ns, cur); err != nil {
				return err
			}
			rs = cur
		}
		doc, err := json.Marshal(rs)
		if err != nil {
			return fmt.Errorf("encoding rule set: %w", err)
		}
		n := draftRow{Namespace: ns, Document: string(doc), Checksum: rs.Checksum(), Revision: r.Revision + 1,
			UpdatedAt: s.db.now(), UpdatedBy: sluice.ActorFromContext(ctx).Name()}
		if err := tx.Model(&draftRow{}).Where("namespace = ?", ns).Updates(map[string]any{
			"document": n.Document, "checksum": n.Checksum, "revision": n.Revision, "updated_at": n.UpdatedAt, "updated_by": n.UpdatedBy,
			"contributors": r.Contributors.with(actorID(ctx))}).Error; err != nil {
			return err
		}
		if upd.RuleSet != nil {
			a.After = map[string]any{"revision": n.Revision, "checksum": n.Checksum, "rules": ruleCount(rs)}
		}
		out = n.draft()
		a.Revision = n.Revision
		return s.db.appendAudit(ctx, tx, a)
	})
	if err != nil {
		return nil, fmt.Errorf("updating draft: %w", err)
	}
	s.db.docs.put(draftDocKey(ns, out.Revision), out.Document)
	return out, nil
}

// CheckDraft validates rs and compares it with the newest version, storing nothing.
func (s *DraftService) CheckDraft(ctx context.Context, ns string, rs *api.RuleSet) (*sluice.DraftCheck, error) {
	if _, err := NewNamespaceService(s.db).FindNamespaceByName(ctx, ns); err != nil {
		return nil, err
	}
	if rs.Namespace == "" {
		rs.Namespace = ns
	}
	var n int64
	if err := s.db.gorm.WithContext(ctx).Raw("SELECT COALESCE(max(number), 0) FROM versions WHERE namespace = ?", ns).Scan(&n).Error; err != nil {
		return nil, dbErr(fmt.Errorf("finding the newest version: %w", err))
	}
	out := &sluice.DraftCheck{Version: n, Errors: api.Errors{}, Warnings: []api.Warning{}}
	if err := checkRuleSet(ns, rs); err != nil {
		var e *sluice.Error
		if errors.As(err, &e) {
			out.Errors = e.Fields
		}
		return out, nil
	}
	ref, err := s.db.versionDocument(ctx, ns, n)
	if err != nil {
		return nil, err
	}
	var old *api.RuleSet
	if ref.doc != nil {
		if old, err = sluice.DecodeDocument(ref.doc); err != nil {
			return nil, err
		}
	}
	w, err := s.db.warnings(ctx, ns, old, rs)
	if err != nil {
		return nil, err
	}
	if w != nil {
		out.Warnings = w
	}
	out.Diff = api.DiffRuleSets(old, rs)
	return out, nil
}

// ResetDraft replaces the draft with the newest version's rules.
func (s *DraftService) ResetDraft(ctx context.Context, ns string, ifRevision *int64) (*sluice.Draft, error) {
	var out *sluice.Draft
	err := s.db.tx(ctx, func(tx *gorm.DB) error {
		var r draftRow
		err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("namespace = ?", ns).Take(&r).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return notFound("namespace %q not found", ns)
		}
		if err != nil {
			return err
		}
		if ifRevision != nil && *ifRevision != r.Revision {
			return sluice.Errorf(sluice.EPRECONDITION, "the draft changed (it is at revision %d, not %d); reload it and retry", r.Revision, *ifRevision)
		}
		n, err := latestVersion(tx, ns)
		if err != nil {
			return err
		}
		rs := &api.RuleSet{Namespace: ns}
		if n > 0 {
			var v versionRow
			if err := tx.Select("document").Where("namespace = ? AND number = ?", ns, n).Take(&v).Error; err != nil {
				return err
			}
			if rs, err = sluice.DecodeDocument([]byte(v.Document)); err != nil {
				return err
			}
		}
		doc, err := json.Marshal(rs)
		if err != nil {
			return fmt.Errorf("encoding rule set: %w", err)
		}
		d := draftRow{Namespace: ns, Document: string(doc), Checksum: rs.Checksum(), Revision: r.Revision + 1,
			UpdatedAt: s.db.now(), UpdatedBy: sluice.ActorFromContext(ctx).Name()}
		if err := tx.Model(&draftRow{}).Where("namespace = ?", ns).Updates(map[string]any{
			"document": d.Document, "checksum": d.Checksum, "revision": d.Revision, "updated_at": d.UpdatedAt, "updated_by": d.UpdatedBy}).Error; err != nil {
			return err
		}
		if err := tx.Exec("UPDATE drafts SET contributors = '{}' WHERE namespace = ?", ns).Error; err != nil {
			return err
		}
		out = d.draft()
		return s.db.appendAudit(ctx, tx, audit{Action: sluice.ActionDraftReset, Object: "namespace/" + ns + "/draft", Namespace: ns, Revision: d.Revision,
			Before: map[string]any{"revision": r.Revision, "checksum": r.Checksum},
			After:  map[string]any{"revision": d.Revision, "checksum": d.Checksum, "version": n, "rules": ruleCount(rs)}})
	})
	if err != nil {
		return nil, fmt.Errorf("resetting draft: %w", err)
	}
	s.db.docs.put(draftDocKey(ns, out.Revision), out.Document)
	return out, nil
}

func ruleCount(rs *api.RuleSet) int {
	return len(rs.Routes) + len(rs.Limits) + len(rs.Breakers) + len(rs.Degrades)
}

// checkRuleSet validates rs as the namespace's rules, listing every problem.
func checkRuleSet(ns string, rs *api.RuleSet) error {
	var fields api.Errors
	if rs.Namespace != ns {
		fields = append(fields, apiFieldError{Path: "namespace", Message: fmt.Sprintf("must be %q, the namespace of this draft", ns)})
	}
	if err := rs.Validate(); err != nil {
		fields = append(fields, api.AsErrors(err)...)
	}
	if len(fields) > 0 {
		return &sluice.Error{Code: sluice.EINVALID, Message: "the rule set is invalid", Fields: fields}
	}
	return nil
}

// decodeRule strictly decodes one rule of kind with the api package; its id
// may be left out, but must otherwise equal id.
func decodeRule(kind, id string, data []byte) (any, error) {
	var err error
	var ruleID *string
	var v any
	switch kind {
	case sluice.KindRoutes:
		var r api.Route
		err, ruleID, v = api.Unmarshal(data, &r), &r.ID, &r
	case sluice.KindLimits:
		var r api.Limit
		err, ruleID, v = api.Unmarshal(data, &r), &r.ID, &r
	case sluice.KindBreakers:
		var r api.Breaker
		err, ruleID, v = api.Unmarshal(data, &r), &r.ID, &r
	case sluice.KindDegrades:
		var r api.Degrade
		err, ruleID, v = api.Unmarshal(data, &r), &r.ID, &r
	}
	if err != nil {
		return nil, sluice.Invalid("the rule is invalid", err)
	}
	switch *ruleID {
	case "":
		*ruleID = id
	case id:
	default:
		return nil, &sluice.Error{Code: sluice.EINVALID, Message: "the rule is invalid",
			Fields: []apiFieldError{{Path: "id", Message: fmt.Sprintf("is %q but the path names %q", *ruleID, id)}}}
	}
	return v, nil
}

// applyRule replaces (or appends) or deletes the rule id of kind in rs and
// returns the old rule, or nil.
func applyRule(rs *api.RuleSet, kind, id string, rule any, del bool) (any, error) {
	var old any
	var found bool
	switch kind {
	case sluice.KindRoutes:
		rs.Routes, old, found = put(rs.Routes, id, rule, del, func(r api.Route) string { return r.ID })
	case sluice.KindLimits:
		rs.Limits, old, found = put(rs.Limits, id, rule, del, func(r api.Limit) string { return r.ID })
	case sluice.KindBreakers:
		rs.Breakers, old, found = put(rs.Breakers, id, rule, del, func(r api.Breaker) string { return r.ID })
	case sluice.KindDegrades:
		rs.Degrades, old, found = put(rs.Degrades, id, rule, del, func(r api.Degrade) string { return r.ID })
	}
	if del && !found {
		return nil, notFound("the draft has no %s rule %q", strings.TrimSuffix(kind, "s"), id)
	}
	return old, nil
}

func put[T any](list []T, id string, rule any, del bool, key func(T) string) ([]T, any, bool) {
	for i, r := range list {
		if key(r) != id {
			continue
		}
		if del {
			return append(list[:i:i], list[i+1:]...), r, true
		}
		list[i] = *rule.(*T)
		return list, r, true
	}
	if del {
		return list, nil, false
	}
	return append(list, *rule.(*T)), nil, false
}
