package sluice

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluicegw/sluice/api"
)

// Namespace owns one rule set: its draft, changes and versions.
type Namespace struct {
	Name        string    `json:"name"`
	Description string    `json:"description"`
	CreatedAt   time.Time `json:"createdAt"`
	CreatedBy   string    `json:"createdBy"`
	// LatestVersion is the number of the newest version, 0 when none.
	LatestVersion int64 `json:"latestVersion"`
}

// NamespaceService manages namespaces. Safe for concurrent use.
type NamespaceService interface {
	// FindNamespaceByName returns ENOTFOUND when there is none.
	FindNamespaceByName(ctx context.Context, name string) (*Namespace, error)
	// FindNamespaces lists every namespace by name.
	FindNamespaces(ctx context.Context) ([]*Namespace, error)
	// CreateNamespace stores ns with an empty draft. EINVALID for a bad
	// name, ECONFLICT when it exists.
	CreateNamespace(ctx context.Context, ns *Namespace) error
}

// Rule kinds, as they appear in paths (/draft/{kind}/{id}) and in diffs.
const (
	KindRoutes   = "routes"
	KindLimits   = "limits"
	KindBreakers = "breakers"
	KindDegrades = "degrades"
)

// Draft is a namespace's working rule set. Revision grows by one on every
// write and is the draft's ETag.
type Draft struct {
	Namespace string `json:"namespace"`
	// Document is the rule set's JSON as stored (see DecodeDocument).
	Document  []byte    `json:"-"`
	Checksum  string    `json:"checksum"`
	Revision  int64     `json:"revision"`
	UpdatedAt time.Time `json:"updatedAt"`
	UpdatedBy string    `json:"updatedBy"`
}

// DraftUpdate is a write to a draft. Exactly one of RuleSet, a rule to put
// (Kind, ID, Rule) or a rule to delete (Kind, ID, Delete) is set.
type DraftUpdate struct {
	// IfRevision, when not nil, makes the write fail with EPRECONDITION
	// unless the draft is at that revision.
	IfRevision *int64
	RuleSet    *api.RuleSet
	Kind       string
	ID         string
	// Rule is the JSON or YAML of one rule of Kind.
	Rule   []byte
	Delete bool
}

// DraftService reads and writes drafts. Every write is validated with the
// api package (EINVALID listing every wrong field; nothing stored), is
// atomic, and is audited; it records the actor among the draft's
// contributors, who may not approve a change of it. Safe for concurrent use.
type DraftService interface {
	// FindDraft returns ENOTFOUND when the namespace does not exist.
	FindDraft(ctx context.Context, ns string) (*Draft, error)
	// FindDraftRevision returns the draft's revision alone, cheaply.
	FindDraftRevision(ctx context.Context, ns string) (int64, error)
	// UpdateDraft applies upd. EPRECONDITION when IfRevision is stale,
	// ENOTFOUND for a missing namespace or deleted rule.
	UpdateDraft(ctx context.Context, ns string, upd DraftUpdate) (*Draft, error)
	// CheckDraft validates rs as ns's rules and compares it with the
	// newest version, storing nothing: what a save would refuse, the
	// risk warnings a change of it would carry, and its diff. A document
	// that does not validate is no error: Errors lists its problems.
	// ENOTFOUND for a missing namespace.
	CheckDraft(ctx context.Context, ns string, rs *api.RuleSet) (*DraftCheck, error)
	// ResetDraft replaces the draft with the newest version's rules (the
	// empty rule set before any), audited as ActionDraftReset; the reset
	// draft holds nothing unreviewed, so its contributors are cleared.
	// EPRECONDITION when ifRevision is set and stale, ENOTFOUND.
	ResetDraft(ctx context.Context, ns string, ifRevision *int64) (*Draft, error)
}

// DraftCheck is what CheckDraft found. The zero value is a valid document
// equal to an empty namespace's.
type DraftCheck struct {
	// Version is the newest version, the one Diff and Warnings compare
	// with; 0 before any.
	Version int64 `json:"version"`
	// Errors are the validation errors, field by field; empty when valid.
	Errors api.Errors `json:"errors"`
	// Warnings are api.Warnings of the newest version's rules and the
	// document: the risk flags a change of it would carry.
	Warnings []api.Warning `json:"warnings"`
	// Diff is the rule diff from the newest version to the document; nil
	// when the document does not validate.
	Diff *api.Diff `json:"diff,omitempty"`
}

// DecodeDocument decodes a stored rule-set document (JSON written by a
// service after validation).
func DecodeDocument(doc []byte) (*api.RuleSet, error) {
	var rs api.RuleSet
	if err := json.Unmarshal(doc, &rs); err != nil {
		return nil, fmt.Errorf("decoding stored rule set: %w", err)
	}
	return &rs, nil
}
