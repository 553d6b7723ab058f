package sluice

import (
	"context"
	"time"

	"github.com/sluicegw/sluice/api"
)

// PreviewState is where a change's preview stands.
type PreviewState string

// Preview states.
const (
	PreviewRunning PreviewState = "running"
	PreviewDone    PreviewState = "done" // its end has passed; nodes dropped it
)

// Reasons a preview ends with its change (PreviewService.EndPreview; the
// audit event's "reason").
const (
	PreviewEndPublished = "published" // the change became a version
	PreviewEndRejected  = "rejected"
	PreviewEndEdited    = "edited" // reopened (rebased: a new base, a fresh approval), or its rules are not the preview's
)

// PreviewSpec is a request to preview a change on live traffic: for
// Duration (at most api.MaxPreviewDuration), on the nodes whose labels
// match Selector (empty: every node of the namespace).
type PreviewSpec struct {
	Duration time.Duration
	Selector map[string]string
}

// Preview is a change's preview and what the nodes running it reported:
// per limit, the live rules' decisions and the preview's, summed over the
// nodes whose last report carries the preview, and the keys the preview
// rejected most.
type Preview struct {
	Change   int64             `json:"change"`
	Checksum string            `json:"checksum"`
	State    PreviewState      `json:"state"`
	Since    time.Time         `json:"since"`
	Until    time.Time         `json:"until"`
	By       string            `json:"by"`
	Selector map[string]string `json:"selector"`
	// Nodes are the nodes whose report carries the preview.
	Nodes []string `json:"nodes"`
	// Approximate: some limit is cluster scope and was evaluated on each
	// node alone (its rate divided by the live nodes).
	Approximate bool          `json:"approximate"`
	Rules       []PreviewRule `json:"rules"`
}

// PreviewRule is one limit or degrade plan of the previewed change (Kind
// "limit" or "degrade"). Live is the live rule of that id (zero when the
// live rules have none), Preview the preview's.
type PreviewRule struct {
	Rule    string           `json:"rule"`
	Kind    string           `json:"kind"`
	Live    PreviewCounts    `json:"live"`
	Preview PreviewCounts    `json:"preview"`
	TopKeys []api.PreviewKey `json:"topKeys"`
}

// PreviewCounts are a limit's decisions, or a degrade plan's sheds, summed
// over nodes (since each node started the preview for Preview; since each
// node's boot for Live), and a degrade plan's level: the highest any of
// those nodes' plans is at now (0 for a limit).
type PreviewCounts struct {
	Allowed        int64 `json:"allowed"`
	Rejected       int64 `json:"rejected"`
	ShadowRejected int64 `json:"shadowRejected"`
	Shed           int64 `json:"shed"`
	Level          int   `json:"level"`
}

// PreviewService runs changes on live traffic in shadow before anyone
// approves them. StartPreview (editor and up; audited) signs and writes the
// namespace's preview value (at most one per namespace: EPREVIEWCONFLICT,
// ECONFLICT, while another change's runs), for an open or approved change
// (ECONFLICT otherwise); FindPreview aggregates what the nodes reported
// (ENOTFOUND when the change has no preview); StopPreview (editor and up;
// audited) removes it, and the nodes drop it within a report interval.
type PreviewService interface {
	StartPreview(ctx context.Context, ns string, change int64, spec PreviewSpec) (*Preview, error)
	FindPreview(ctx context.Context, ns string, change int64) (*Preview, error)
	StopPreview(ctx context.Context, ns string, change int64) error
	// EndPreview removes the preview when its change ends or is edited
	// (why: PreviewEndPublished, PreviewEndRejected, PreviewEndEdited),
	// audited with the reason, whoever the actor; it reports whether the
	// namespace's preview was of change and was removed.
	EndPreview(ctx context.Context, ns string, change int64, why string) (bool, error)
}

// ChangeDocuments reads a change's proposed rule set.
type ChangeDocuments interface {
	// ChangeDocument returns the change's document, its checksum and its
	// state; ENOTFOUND when the namespace has no such change.
	ChangeDocument(ctx context.Context, ns string, id int64) (doc []byte, checksum string, state ChangeState, err error)
}
