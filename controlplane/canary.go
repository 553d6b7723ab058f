package sluice

import (
	"context"
	"time"
)

// CanaryState is where a canary stands.
type CanaryState string

// The canary states. Only an active canary can be promoted or aborted; at
// most one is active per namespace.
const (
	CanaryActive   CanaryState = "active"
	CanaryPromoted CanaryState = "promoted"
	CanaryAborted  CanaryState = "aborted"
)

// Canary is a version published first to the nodes whose labels match
// Selector (every label, exact value), then promoted to all or aborted.
type Canary struct {
	ID        int64             `json:"id"`
	Namespace string            `json:"namespace"`
	Version   int64             `json:"version"`
	Selector  map[string]string `json:"selector"`
	State     CanaryState       `json:"state"`
	CreatedAt time.Time         `json:"createdAt"`
	CreatedBy string            `json:"createdBy"`
	EndedAt   *time.Time        `json:"endedAt,omitempty"`
	EndedBy   string            `json:"endedBy,omitempty"`
	Reason    string            `json:"reason,omitempty"`
	// Publication is the canary's latest outbox operation: its write to the
	// canary key, or its promotion or abort.
	Publication *Publication `json:"publication,omitempty"`
	// Analysis, when set, is how the control plane judges the canary by
	// itself; Comparison is the analyser's running comparison, stored with
	// the canary (CanaryAnalyser).
	Analysis   *CanaryAnalysis   `json:"analysis,omitempty"`
	Comparison *CanaryComparison `json:"comparison,omitempty"`
}

// PublishOptions are the options of a publication. The zero value publishes
// to every node.
type PublishOptions struct {
	// Canary, when set, publishes the version to the nodes matching
	// Selector only (the canary key), until promoted or aborted.
	Canary *CanarySpec
}

// CanarySpec is how a canary picks its nodes.
type CanarySpec struct {
	// Selector must hold 1 to 16 labels: keys of [A-Za-z0-9._/-] (at most
	// 63, starting alphanumeric), values of [A-Za-z0-9._/-] (at most 63);
	// see api.ValidateSelector.
	Selector map[string]string `json:"selector"`
	// Analysis, when set, makes the control plane judge the canary by
	// itself (see CanaryAnalysis.Validate).
	Analysis *CanaryAnalysis `json:"analysis,omitempty"`
}

// CanaryService promotes and aborts canaries. A canary starts with
// ChangeService.PublishChange. Every mutation is audited and queued in the
// outbox in the same transaction, so it reaches etcd in order even when etcd
// is down. Approvers and admins only (EFORBIDDEN). Safe for concurrent use.
type CanaryService interface {
	// FindCanary returns the namespace's active canary. ENOTFOUND.
	FindCanary(ctx context.Context, ns string) (*Canary, error)
	// PromoteCanary publishes the active canary's version to every node and
	// ends the canary. ENOTFOUND when none is active.
	PromoteCanary(ctx context.Context, ns, reason string) (*Canary, error)
	// AbortCanary ends the active canary: its nodes return to the published
	// version. ENOTFOUND when none is active.
	AbortCanary(ctx context.Context, ns, reason string) (*Canary, error)
}
