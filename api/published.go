package api

import (
	"encoding/json"
	"fmt"
	"time"
)

// Published is the value of a namespace's ruleset key in etcd: one immutable,
// approved version. Written only by the control plane.
type Published struct {
	Version     int64     `json:"version"`
	Checksum    string    `json:"checksum"`
	PublishedAt time.Time `json:"publishedAt"`
	PublishedBy string    `json:"publishedBy"`
	Rules       *RuleSet  `json:"rules"`
}

// DecodePublished reads and checks a published value: it must be JSON of the
// Published shape, its rules must decode strictly and validate, and the
// checksum must match the rules' canonical form. Every failure is an error
// saying which of these went wrong; nothing is returned half-checked.
func DecodePublished(data []byte) (*Published, error) {
	var raw PublishedValue
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("published rule set is not valid JSON: %w", err)
	}
	if raw.Version <= 0 {
		return nil, fmt.Errorf("published rule set has no version (got %d)", raw.Version)
	}
	if len(raw.Rules) == 0 || string(raw.Rules) == "null" {
		return nil, fmt.Errorf("published version %d has no rules", raw.Version)
	}
	rs, err := Decode(raw.Rules)
	if err != nil {
		return nil, fmt.Errorf("published version %d: rules: %w", raw.Version, err)
	}
	if err := rs.Validate(); err != nil {
		return nil, fmt.Errorf("published version %d: invalid rules: %w", raw.Version, err)
	}
	if sum := rs.Checksum(); sum != raw.Checksum {
		return nil, fmt.Errorf("published version %d: checksum %q does not match the rules (%s)", raw.Version, raw.Checksum, sum)
	}
	return &Published{Version: raw.Version, Checksum: raw.Checksum, PublishedAt: raw.PublishedAt, PublishedBy: raw.PublishedBy, Rules: rs}, nil
}

// Override is an operator's instruction to one node, stored under
// Keys.Override. The zero value changes nothing.
type Override struct {
	// DegradeLevels forces the level of degrade rules by id (0, 1 or 2).
	DegradeLevels map[string]int `json:"degradeLevels,omitempty"`
	// Drain makes the node's /readyz fail so that load balancers stop sending
	// it traffic; it keeps serving what still arrives.
	Drain bool `json:"drain,omitempty"`
	// Expires, when set, ends the override.
	Expires  *time.Time `json:"expires,omitempty"`
	By       string     `json:"by,omitempty"`
	Reason   string     `json:"reason,omitempty"`
	Revision int64      `json:"revision,omitempty"`
}

// NodeKind is what kind of node registered (NodeStatus.Kind).
type NodeKind string

// NodeKindSDK is a service running the in-service SDK (package
// dataplane/sdk); a gateway's kind is empty.
const NodeKindSDK NodeKind = "sdk"

// NodeStatus is a node's registration, bound to a lease under Keys.Node.
type NodeStatus struct {
	NodeID    string `json:"nodeId"`
	Namespace string `json:"namespace"`
	// Kind is what the node is: empty for a gateway, NodeKindSDK for a
	// service running the in-service SDK (whose NodeID is its instance).
	Kind NodeKind `json:"kind,omitempty"`
	// Service names the service of an SDK node (NodeKindSDK).
	Service        string            `json:"service,omitempty"`
	Address        string            `json:"address"`
	AdminAddress   string            `json:"adminAddress,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	Build          string            `json:"build"`
	StartedAt      time.Time         `json:"startedAt"`
	Version        int64             `json:"version"`
	Checksum       string            `json:"checksum,omitempty"`
	AppliedAt      time.Time         `json:"appliedAt,omitzero"`
	Source         string            `json:"source,omitempty"`
	LastApplyError string            `json:"lastApplyError,omitempty"`
	// SignatureRejections counts the etcd values (rule set, canary,
	// override) the node refused since it started because they were
	// unsigned, signed by a key it does not trust, or did not match their
	// signature (see Verifier.Open).
	SignatureRejections int64 `json:"signatureRejections,omitempty"`
	// AcceptsUnsigned is true on a node started with
	// --insecure-accept-unsigned: it checks no signature.
	AcceptsUnsigned bool      `json:"acceptsUnsigned,omitempty"`
	RPS             float64   `json:"rps"`
	RejectRate      float64   `json:"rejectRate"`
	P99Seconds      float64   `json:"p99Seconds"`
	Draining        bool      `json:"draining,omitempty"`
	UpdatedAt       time.Time `json:"updatedAt"`
}
