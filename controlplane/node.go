package sluice

import (
	"context"
	"time"

	"github.com/sluicegw/sluice/api"
)

// Node is a gateway node of a namespace: its last registration
// (api.NodeStatus), whether it is registered now, and its override.
type Node struct {
	api.NodeStatus
	// Live is true while the node's lease-bound registration key exists.
	Live bool `json:"live"`
	// FirstSeen is when the control plane first saw the node registered;
	// LastSeen when it last did (now, for a live node).
	FirstSeen time.Time `json:"firstSeen,omitzero"`
	LastSeen  time.Time `json:"lastSeen,omitzero"`
	// Override is the node's operator override, if it has one.
	Override *api.Override `json:"override,omitempty"`
	// PublishedVersion is the namespace's published version and
	// CanaryVersion the active canary's when the node's labels match its
	// selector; VersionState compares the node's version with the one it
	// should run: current, behind, ahead or canary.
	PublishedVersion int64  `json:"publishedVersion,omitempty"`
	CanaryVersion    int64  `json:"canaryVersion,omitempty"`
	VersionState     string `json:"versionState,omitempty"`
	// Report is the node's last report, summarised (from the Fleet).
	Report *NodeReport `json:"report,omitempty"`
}

// NodeFilter selects the nodes of one namespace: the live ones and those gone
// since GoneSince (the zero value means the service's default retention).
type NodeFilter struct {
	Namespace string
	GoneSince time.Time
}

// OverrideUpdate is an operator's override of one node. TTL and Expires are
// exclusive; neither means until cleared.
type OverrideUpdate struct {
	DegradeLevels map[string]int
	Drain         bool
	TTL           time.Duration
	Expires       *time.Time
	Reason        string
}

// NodeApplied is one node's application of a version.
type NodeApplied struct {
	NodeID   string `json:"nodeId"`
	Checksum string `json:"checksum"`
	// FirstSeen is when the control plane first saw the node report the
	// version; AppliedAt is the node's own claim, by its clock.
	FirstSeen time.Time  `json:"firstSeen"`
	AppliedAt *time.Time `json:"appliedAt,omitempty"`
	// DelaySeconds is FirstSeen minus the version's first write to etcd;
	// absent while the version has not been written.
	DelaySeconds *float64 `json:"delaySeconds,omitempty"`
	// Live is whether the node is registered now, and Current whether it
	// still runs the version.
	Live    bool `json:"live"`
	Current bool `json:"current"`
}

// NodeWaiting is a live node that has not been seen applying a version.
type NodeWaiting struct {
	NodeID         string `json:"nodeId"`
	Version        int64  `json:"version"`
	LastApplyError string `json:"lastApplyError,omitempty"`
}

// Rollout is how a version spread over a namespace's nodes.
type Rollout struct {
	Namespace string `json:"namespace"`
	Version   int64  `json:"version"`
	Checksum  string `json:"checksum"`
	// PublishedAt is the version's first write to etcd (as a canary or as
	// the rule set), CanaryAt its canary write and PromotedAt its write to
	// the ruleset key; nil when not (yet) written.
	PublishedAt *time.Time `json:"publishedAt,omitempty"`
	CanaryAt    *time.Time `json:"canaryAt,omitempty"`
	RuleSetAt   *time.Time `json:"rulesetAt,omitempty"`
	// Applied lists the nodes seen applying the version, earliest first;
	// Waiting the live nodes never seen applying it.
	Applied []*NodeApplied `json:"applied"`
	Waiting []*NodeWaiting `json:"waiting"`
}

// NodeService shows a namespace's nodes and acts on one node. Safe for
// concurrent use. Reads and writes of etcd that fail return EUNAVAILABLE.
type NodeService interface {
	// FindNodes lists the live nodes (from etcd) and the recently gone ones
	// (from the history the node watcher keeps), by node id.
	FindNodes(ctx context.Context, f NodeFilter) ([]*Node, error)
	// FindRollout reports which nodes applied version n and how long after
	// its publication. ENOTFOUND when the version does not exist.
	FindRollout(ctx context.Context, ns string, n int64) (*Rollout, error)
	// PutOverride validates and writes a node's override, and audits it.
	// EINVALID (unknown degrade rule of the published or canary version,
	// level outside 0..2, bad expiry, nothing to override), EFORBIDDEN.
	PutOverride(ctx context.Context, ns, nodeID string, upd OverrideUpdate) (*api.Override, error)
	// DeleteOverride removes a node's override and audits it. ENOTFOUND
	// when it has none.
	DeleteOverride(ctx context.Context, ns, nodeID string) error
}

// NodeRecord is one node as the history keeps it.
type NodeRecord struct {
	Status    api.NodeStatus
	Live      bool
	FirstSeen time.Time
	LastSeen  time.Time
}

// NodeHistory remembers the nodes seen registered and the versions each was
// seen applying. The node watcher writes it; times are parameters. Safe for
// concurrent use (and across replicas: every write is idempotent).
type NodeHistory interface {
	// SyncNodes records a whole listing of ns's live nodes taken at `at`:
	// each is recorded as by RecordNode, and every other node is marked gone
	// (its LastSeen kept: when it was last seen registered).
	SyncNodes(ctx context.Context, ns string, live []api.NodeStatus, at time.Time) error
	// RecordNode records node s live at `at`, and the version it reports if
	// it was not seen applying it before.
	RecordNode(ctx context.Context, ns string, s api.NodeStatus, at time.Time) error
	// RecordNodeGone marks a node gone, last seen at `at`.
	RecordNodeGone(ctx context.Context, ns, nodeID string, at time.Time) error
	// TouchNodes sets LastSeen of ns's live nodes to `at` and forgets the
	// nodes gone before forgetBefore.
	TouchNodes(ctx context.Context, ns string, at, forgetBefore time.Time) error
	// FindNodeRecords lists ns's nodes: every live one, and those gone
	// since goneSince.
	FindNodeRecords(ctx context.Context, ns string, goneSince time.Time) ([]*NodeRecord, error)
	// FindRollout returns version n's publication times and the nodes seen
	// applying it (Live, Current, Waiting and DelaySeconds left for the
	// caller). ENOTFOUND.
	FindRollout(ctx context.Context, ns string, n int64) (*Rollout, error)
}
