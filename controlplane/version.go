package sluice

import (
	"context"
	"time"
)

// Version is an immutable, approved rule set, numbered from 1 per namespace.
type Version struct {
	Namespace string `json:"namespace"`
	Number    int64  `json:"number"`
	Checksum  string `json:"checksum"`
	ChangeID  *int64 `json:"changeId,omitempty"`
	// RollbackOf is the version whose content this one restores.
	RollbackOf *int64    `json:"rollbackOf,omitempty"`
	Emergency  bool      `json:"emergency"`
	Reason     string    `json:"reason,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
	CreatedBy  string    `json:"createdBy"`
	// Publication is the version's latest outbox operation: the ruleset
	// write for a version published as usual; for a canary version, the
	// canary write, then its promotion or abort.
	Publication *Publication `json:"publication,omitempty"`
	// Document is the rule set's JSON as stored (see DecodeDocument); nil
	// in lists.
	Document []byte `json:"-"`
}

// PublicationState is where a version's projection into etcd stands.
type PublicationState string

// The publication states. Pending ones are retried until they land; failed
// is final (etcd held a newer version than this one).
const (
	PublicationPending   PublicationState = "pending"
	PublicationPublished PublicationState = "published"
	PublicationFailed    PublicationState = "failed"
)

// PublicationKind is what an outbox operation writes to etcd.
type PublicationKind string

// The outbox operations. Operations of one namespace run in the order they
// were queued.
const (
	// PublishRuleSet writes the version to the ruleset key.
	PublishRuleSet PublicationKind = "ruleset"
	// PublishCanary writes the version and Selector to the canary key.
	PublishCanary PublicationKind = "canary"
	// PublishPromote writes the version to the ruleset key and deletes the
	// canary key, in one etcd transaction.
	PublishPromote PublicationKind = "promote"
	// PublishAbort deletes the canary key.
	PublishAbort PublicationKind = "abort"
)

// Publication is one outbox operation on a version: its projection into
// etcd as the namespace's rule set (the only kind before canaries), or a
// canary operation.
type Publication struct {
	ID        int64           `json:"id"`
	Namespace string          `json:"namespace"`
	Version   int64           `json:"version"`
	Kind      PublicationKind `json:"kind"`
	// Selector is the canary's label selector (PublishCanary only).
	Selector      map[string]string `json:"selector,omitempty"`
	State         PublicationState  `json:"state"`
	Attempts      int               `json:"attempts"`
	LastError     string            `json:"lastError,omitempty"`
	EtcdRevision  *int64            `json:"etcdRevision,omitempty"`
	CreatedAt     time.Time         `json:"createdAt"`
	NextAttemptAt time.Time         `json:"nextAttemptAt"`
	// PublishedAt is when the operation was written to etcd: for a
	// version, the publishedAt of the value written.
	PublishedAt *time.Time `json:"publishedAt,omitempty"`
	// Traceparent is the W3C traceparent of the span the operation was
	// queued in (the admin API request's), "" when it was not traced: the
	// publisher's span, which runs later, links to it. Not part of the API.
	Traceparent string `json:"-"`
}

// VersionFilter selects versions of one namespace, newest first. Limit zero
// means 50 (at most 500); Before pages by number (exclusive).
type VersionFilter struct {
	Namespace string
	Before    int64
	Limit     int
}

// Rollback asks for version N's content back. Reason is required for an
// emergency rollback.
type Rollback struct {
	Reason    string
	Emergency bool
	// Applied are the versions the namespace's live nodes report running
	// (read from the node registry by the caller), and AppliedUnknown says
	// the registry could not be read. An emergency rollback is refused as
	// a no-op only when the fleet provably runs version N's rules already:
	// the published version, any active canary and every applied version.
	Applied        []int64
	AppliedUnknown bool
}

// VersionService reads versions and rolls back. Safe for concurrent use.
type VersionService interface {
	// FindVersion returns a version with its rules and publication. ENOTFOUND.
	FindVersion(ctx context.Context, ns string, n int64) (*Version, error)
	// FindVersions lists versions with their publications, without rules,
	// and the cursor of the next page (f.Before for it; 0 when this page is
	// not full).
	FindVersions(ctx context.Context, f VersionFilter) (vs []*Version, next int64, err error)
	// RollbackVersion opens a change whose content is version n's, to be
	// reviewed like any other. With Emergency (admin only, reason required)
	// it publishes at once instead, flagged in the audit log, and returns the
	// new version. EFORBIDDEN, EINVALID, ENOTFOUND, ECONFLICT (the fleet
	// already runs n's content: for a reviewed rollback, the active canary's
	// or else the published version's rules; for an emergency one, also every
	// version nodes report applied).
	RollbackVersion(ctx context.Context, ns string, n int64, r Rollback) (*Change, *Version, error)
}

// Outbox is the publisher's view of the publication queue. Safe for
// concurrent use, across processes.
type Outbox interface {
	// PendingNamespaces lists namespaces with a publication due.
	PendingNamespaces(ctx context.Context) ([]string, error)
	// ClaimPublication takes the namespace's publish lock and returns its
	// oldest pending operation with the version's rules, or nil when the
	// lock is held elsewhere or nothing is due. The claim holds the lock
	// until Finish or Abort.
	ClaimPublication(ctx context.Context, ns string) (OutboxClaim, error)
	// OutboxStats returns the number of pending publications and the age of
	// the oldest.
	OutboxStats(ctx context.Context) (pending int64, oldest time.Duration, err error)
}

// OutboxClaim is one claimed publication. Exactly one of Finish or Abort
// must be called.
type OutboxClaim interface {
	Publication() *Publication
	Version() *Version
	// Finish records the outcome and releases the lock: published with the
	// etcd revision, or (err != nil) a failed attempt to retry at retryAt,
	// or, when final, a failed publication.
	Finish(ctx context.Context, o PublishOutcome) error
	// Abort releases the lock and changes nothing.
	Abort()
}

// PublishOutcome is the result of writing one publication to etcd.
type PublishOutcome struct {
	Revision int64
	// At is when it was written (the publishedAt of the value); zero
	// means when the outcome is recorded.
	At      time.Time
	Err     error
	RetryAt time.Time
	Final   bool
}
