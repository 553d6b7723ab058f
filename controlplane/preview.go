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
	PreviewDone    PreviewState = "done" // its end has passed; nodes dropped it, the sweep has not yet kept its figures
	// PreviewFinished: it was stopped (DELETE, expiry, its change ended or
	// edited); the figures are those kept when it stopped.
	PreviewFinished PreviewState = "finished"
)

// Reasons a preview ends with its change (PreviewService.EndPreview; the
// audit event's "reason").
const (
	PreviewEndPublished = "published" // the change became a version
	PreviewEndRejected  = "rejected"
	PreviewEndEdited    = "edited"  // reopened (rebased: a new base, a fresh approval), or its rules are not the preview's
	PreviewEndStopped   = "stopped" // DELETE …/preview
	PreviewEndExpired   = "expired" // its until passed (noticed by the sweep)
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
	// EndedAt and Reason (a PreviewEnd* constant, or the change's state
	// when the sweep found it neither open nor approved) are set once the
	// preview finished.
	EndedAt *time.Time `json:"endedAt,omitempty"`
	Reason  string     `json:"reason,omitempty"`
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
	// ClientsAffected is the distinct keys the preview rejected, summed
	// over nodes (a limit; nil for a degrade plan or when no node reported
	// it).
	ClientsAffected *PreviewClients `json:"clientsAffected,omitempty"`
}

// PreviewClients is a limit's distinct rejected keys summed over nodes.
// Approximate: more than one node rejected keys (a client may hit several
// nodes, so the sum may count it more than once) or some node reached its
// cap (api.MaxPreviewClients) and stopped counting.
type PreviewClients struct {
	Count       int64 `json:"count"`
	Approximate bool  `json:"approximate"`
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
// of a running preview, else returns the change's finished one as kept
// when it stopped (ENOTFOUND when the change never had one); StopPreview
// (editor and up; audited) keeps its figures and removes it, and the nodes
// drop it within a report interval.
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

// PreviewResults keeps the figures of finished previews, one per change
// (the latest).
type PreviewResults interface {
	// SavePreviewResult stores p (State PreviewFinished, EndedAt and
	// Reason set) as the finished preview of change p.Change of ns,
	// replacing an earlier one.
	SavePreviewResult(ctx context.Context, ns string, p *Preview) error
	// FindPreviewResult returns the finished preview of change; ENOTFOUND
	// when it has none.
	FindPreviewResult(ctx context.Context, ns string, change int64) (*Preview, error)
}

// ChangeDocuments reads a change's proposed rule set.
type ChangeDocuments interface {
	// ChangeDocument returns the change's document, its checksum and its
	// state; ENOTFOUND when the namespace has no such change.
	ChangeDocument(ctx context.Context, ns string, id int64) (doc []byte, checksum string, state ChangeState, err error)
}
