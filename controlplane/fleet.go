package sluice

import (
	"context"
	"encoding/json"
	"time"
)

// EventKind is what an Event records.
type EventKind string

// The event kinds (DESIGN "Live traffic and events").
const (
	EventDegrade    EventKind = "degrade"     // a degrade rule's level changed on a node
	EventBreaker    EventKind = "breaker"     // a breaker changed state on a node
	EventPublish    EventKind = "publish"     // a version was published to every node
	EventRollback   EventKind = "rollback"    // a rollback was published
	EventCanary     EventKind = "canary"      // a canary started, was promoted or aborted
	EventOverride   EventKind = "override"    // an operator override was written or cleared
	EventNodeJoined EventKind = "node_joined" // a node registered
	EventNodeLeft   EventKind = "node_left"   // a node's registration ended
	EventApplyError EventKind = "apply_error" // a node refused a version
	EventDraft      EventKind = "draft"       // the draft was saved (Actor; Detail etag and revision)
)

// EventKinds lists every kind, for validating filters.
var EventKinds = []EventKind{EventDegrade, EventBreaker, EventPublish, EventRollback, EventCanary,
	EventOverride, EventNodeJoined, EventNodeLeft, EventApplyError, EventDraft}

// Event is one thing that happened in a namespace, for the events timeline
// and the stream. Events are stored once: Key, unique within the namespace,
// is built from what identifies the occurrence (the node's boot id and report
// sequence, the audit event's id, the registration's etcd revision), so every
// control-plane replica that sees it writes the same key and only the first
// write is kept.
type Event struct {
	ID        int64           `json:"id"`
	Namespace string          `json:"-"`
	At        time.Time       `json:"at"`
	Kind      EventKind       `json:"kind"`
	Node      string          `json:"node,omitempty"`
	Rule      string          `json:"rule,omitempty"`
	From      string          `json:"from,omitempty"`
	To        string          `json:"to,omitempty"`
	Version   int64           `json:"version,omitempty"`
	Actor     string          `json:"actor,omitempty"`
	Detail    json.RawMessage `json:"detail,omitempty"`
	Key       string          `json:"-"`
}

// EventFilter selects events of one namespace. Zero fields do not filter.
type EventFilter struct {
	Namespace string
	Since     time.Time
	Kinds     []EventKind
	Node      string
	Rule      string
	// Before pages newest first (ids below it); After reads oldest first
	// (ids above it), for a stream client resuming from Last-Event-ID.
	Before, After int64
	// Limit is the page size; zero means 100, at most 1000.
	Limit int
}

// EventService stores and lists events. Safe for concurrent use, and across
// replicas (RecordEvents is idempotent by Namespace and Key).
type EventService interface {
	// RecordEvents stores the events whose (Namespace, Key) is new and
	// returns those, with their ids; the others are dropped silently.
	RecordEvents(ctx context.Context, evs []*Event) ([]*Event, error)
	// FindEvents lists events newest first (oldest first with After) and
	// returns the next page's cursor (0 when none). EINVALID.
	FindEvents(ctx context.Context, f EventFilter) ([]*Event, int64, error)
	// PruneEvents deletes the events older than before and returns how many.
	PruneEvents(ctx context.Context, before time.Time) (int64, error)
}

// StatsQuery selects the stats of one namespace.
type StatsQuery struct {
	Namespace string
	// Since is the first point's time; zero (or older than the retention)
	// means as far back as kept.
	Since time.Time
	// Step is the points' spacing, a multiple of the stats resolution; zero
	// means the resolution.
	Step time.Duration
	// Node and Rule, when set, keep only that node's or rule's series.
	Node, Rule string
}

// StatsSeries is one rule's counts per step, fleet-wide (Node empty) or on
// one node. Each point is [unixSeconds, allowed, rejected, shed,
// shadowRejected, breakerRejected] (StatsColumns).
type StatsSeries struct {
	Rule   string      `json:"rule"`
	Kind   string      `json:"kind"`
	Node   string      `json:"node,omitempty"`
	Points [][]float64 `json:"points"`
}

// VariantStatsSeries is one variant's decisions per step of a limit with
// variants (api.LimitVariant; api.BaseVariant for the clients no variant
// takes), fleet-wide (Node empty) or on one node; each point is a
// StatsSeries' (shed and breakerRejected always 0) and the p99 in seconds
// of the requests the variant let through in that step (VariantColumns; 0
// without any).
type VariantStatsSeries struct {
	Rule    string      `json:"rule"`
	Variant string      `json:"variant"`
	Node    string      `json:"node,omitempty"`
	Points  [][]float64 `json:"points"`
}

// NodeStatsSeries is one node's request figures per step; each point is
// [unixSeconds, requests, rejected, class2xx, class4xx, class5xx,
// p99Seconds] (NodeStatsColumns).
type NodeStatsSeries struct {
	Node   string      `json:"node"`
	Points [][]float64 `json:"points"`
}

// StatsColumns and NodeStatsColumns name the elements of the points.
var (
	StatsColumns     = []string{"unixSeconds", "allowed", "rejected", "shed", "shadowRejected", "breakerRejected"}
	NodeStatsColumns = []string{"unixSeconds", "requests", "rejected", "class2xx", "class4xx", "class5xx", "p99Seconds"}
	VariantColumns   = []string{"unixSeconds", "allowed", "rejected", "shed", "shadowRejected", "breakerRejected", "p99Seconds"}
)

// Stats is the answer to a StatsQuery.
type Stats struct {
	Namespace   string    `json:"namespace"`
	Step        string    `json:"step"`
	StepSeconds int64     `json:"stepSeconds"`
	Since       time.Time `json:"since"`
	Until       time.Time `json:"until"`
	Columns     []string  `json:"columns"`
	NodeColumns []string  `json:"nodeColumns"`
	// VariantColumns name the elements of the variants' points.
	VariantColumns []string           `json:"variantColumns"`
	Series         []*StatsSeries     `json:"series"`
	Nodes          []*NodeStatsSeries `json:"nodes"`
	// Variants are the per-variant series of the limits with variants.
	Variants []*VariantStatsSeries `json:"variants"`
}

// StatsTick is the step that just closed, as the stream pushes it.
type StatsTick struct {
	Namespace   string             `json:"namespace"`
	At          time.Time          `json:"at"`
	StepSeconds int64              `json:"stepSeconds"`
	Series      []*StatsSeries     `json:"series"`
	Nodes       []*NodeStatsSeries `json:"nodes"`
	// Variants are the per-variant series of the limits with variants.
	Variants []*VariantStatsSeries `json:"variants"`
}

// StatsService answers stats queries from the node reports. Safe for
// concurrent use. EINVALID (bad step), EUNAVAILABLE (not following reports).
type StatsService interface {
	FindStats(ctx context.Context, q StatsQuery) (*Stats, error)
}

// Stream message types.
const (
	StreamNode        = "node"
	StreamStats       = "stats"
	StreamEvent       = "event"
	StreamPublication = "publication"
)

// StreamMessage is one server-sent event: its type, its id (events only;
// zero otherwise) and its JSON data.
type StreamMessage struct {
	Type string
	ID   int64
	Data json.RawMessage
}

// StreamHub fans a namespace's live messages out to stream clients. Safe for
// concurrent use.
type StreamHub interface {
	// Subscribe returns a channel of ns's messages and a function that ends
	// the subscription. A client too slow to keep up loses messages (the
	// channel is closed; it reconnects with Last-Event-ID).
	Subscribe(ns string) (<-chan StreamMessage, func())
}
