package sluice

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// AuditEvent is one entry of the append-only, chained audit log.
// Hash chains every event to the one before with plain sha256 (anyone can
// recompute it); MAC chains it with HMAC-SHA256 under the audit key, which
// the database never sees. MAC is empty for events written without a key.
type AuditEvent struct {
	ID         int64           `json:"id"`
	At         time.Time       `json:"at"`
	Actor      string          `json:"actor"`
	Action     string          `json:"action"`
	Object     string          `json:"object"`
	Namespace  string          `json:"namespace,omitempty"`
	Before     json.RawMessage `json:"before,omitempty"`
	After      json.RawMessage `json:"after,omitempty"`
	RequestID  string          `json:"requestId,omitempty"`
	ClientAddr string          `json:"clientAddr,omitempty"`
	Emergency  bool            `json:"emergency,omitempty"`
	PrevHash   string          `json:"prevHash"`
	Hash       string          `json:"hash"`
	MAC        string          `json:"mac,omitempty"`
}

// AuditFilter selects audit events, newest first. Zero fields select all;
// Limit zero means 100 (at most 1000); Before pages by id (exclusive).
type AuditFilter struct {
	Actor     string
	Action    string
	Namespace string
	Since     time.Time
	Until     time.Time
	Before    int64
	Limit     int
}

// AuditVerification is the result of walking the chain and comparing its
// head with the checkpoint kept outside the database.
type AuditVerification struct {
	OK      bool  `json:"ok"`
	Checked int64 `json:"checked"`
	// FirstBroken is the id of the first event whose hash, MAC or link does
	// not hold, and Reason says which (Reason also explains a failed
	// checkpoint comparison, which has no FirstBroken).
	FirstBroken *int64 `json:"firstBroken,omitempty"`
	Reason      string `json:"reason,omitempty"`
	// Keyed is whether MACs were checked with the audit key. Without a key
	// only the plain sha256 chain is checked, which proves nothing against
	// someone who can write the table.
	Keyed bool `json:"keyed"`
	// Unkeyed counts the events before the first keyed one (written before
	// the key was configured): covered by the plain chain only.
	Unkeyed int64 `json:"unkeyed"`
	// HeadID is the id of the newest event (0 for an empty log).
	HeadID int64 `json:"headId"`
	// Checkpoint is the comparison with the head checkpointed outside the
	// database: "matched" (the checkpointed event is in the chain, with its
	// MAC), "mismatched", "missing", "unavailable", "not compared" (the
	// chain itself is broken) or "not configured".
	Checkpoint string `json:"checkpoint"`
	// CheckpointID is the id of the checkpointed event, when one was read.
	CheckpointID int64 `json:"checkpointId,omitempty"`
}

// MinAuditKeyBytes is the shortest audit key accepted.
const MinAuditKeyBytes = 32

// ParseAuditKey returns the audit key held in b (a key file's content or an
// environment variable's value): the bytes themselves, surrounding
// whitespace removed, at least MinAuditKeyBytes of them (`openssl rand -hex
// 32` makes one).
func ParseAuditKey(b []byte) ([]byte, error) {
	k := bytes.TrimSpace(b)
	if len(k) < MinAuditKeyBytes {
		return nil, fmt.Errorf("the audit key is %d bytes; it must be at least %d (make one with: openssl rand -hex 32)", len(k), MinAuditKeyBytes)
	}
	return k, nil
}

// AuditHead is the newest event of the keyed chain: its id and MAC, and a
// Sig (HMAC under the audit key of both) so that a checkpoint written by
// anyone else is recognized as forged.
type AuditHead struct {
	ID  int64     `json:"id"`
	MAC string    `json:"mac"`
	At  time.Time `json:"at"`
	Sig string    `json:"sig"`
}

// AuditCheckpoint keeps the audit chain's head outside the database, so
// that deleting the newest events (which leaves a chain that still links)
// is detected. Safe for concurrent use.
type AuditCheckpoint interface {
	// SaveAuditHead records h unless a head with a higher id is already
	// recorded.
	SaveAuditHead(ctx context.Context, h AuditHead) error
	// LoadAuditHead returns the recorded head, or nil when there is none.
	LoadAuditHead(ctx context.Context) (*AuditHead, error)
}

// AuditService reads and records the audit log. Safe for concurrent use.
type AuditService interface {
	// FindAuditEvents lists events matching f, and the cursor of the next
	// page (f.Before for it; 0 when this page is not full).
	FindAuditEvents(ctx context.Context, f AuditFilter) (evs []*AuditEvent, next int64, err error)
	// VerifyAudit walks the whole chain and reports the first broken link.
	VerifyAudit(ctx context.Context) (*AuditVerification, error)
	// RecordAuditEvent appends e for an action that changes nothing else
	// (login, failed login, logout). Actor, request id and client address
	// default from the context.
	RecordAuditEvent(ctx context.Context, e *AuditEvent) error
}

// Audit actions.
const (
	ActionLogin            = "auth.login"
	ActionLoginFailed      = "auth.login_failed"
	ActionLogout           = "auth.logout"
	ActionUserCreate       = "user.create"
	ActionUserUpdate       = "user.update"
	ActionTokenCreate      = "token.create"
	ActionTokenRevoke      = "token.revoke"
	ActionNamespaceCreate  = "namespace.create"
	ActionDraftUpdate      = "draft.update"
	ActionDraftPutRule     = "draft.put_rule"
	ActionDraftDeleteRule  = "draft.delete_rule"
	ActionDraftReset       = "draft.reset"
	ActionChangeCreate     = "change.create"
	ActionChangeApprove    = "change.approve"
	ActionChangeReject     = "change.reject"
	ActionChangeReopen     = "change.reopen"
	ActionChangePublish    = "change.publish"
	ActionChangeSchedule   = "change.schedule"
	ActionChangeUnschedule = "change.unschedule"
	// ActionChangeScheduleSkip is the scheduler dropping a due change it
	// cannot publish (stale, or a canary is active).
	ActionChangeScheduleSkip = "change.schedule_skip"
	ActionRollbackRequest    = "version.rollback_request"
	ActionRollbackEmergent   = "version.emergency_rollback"
	ActionNodeOverride       = "node.override"
	ActionNodeOverrideDel    = "node.override_delete"
	ActionCanaryStart        = "canary.start"
	ActionCanaryPromote      = "canary.promote"
	ActionCanaryAbort        = "canary.abort"
	ActionPreviewStart       = "change.preview_start"
	ActionPreviewStop        = "change.preview_stop"
)

// AuditActions is every audit action above, in their order: the list
// api/openapi.yaml's AuditAction enumerates (a test checks both), which the
// console's audit filter offers.
var AuditActions = []string{
	ActionLogin, ActionLoginFailed, ActionLogout,
	ActionUserCreate, ActionUserUpdate, ActionTokenCreate, ActionTokenRevoke,
	ActionNamespaceCreate,
	ActionDraftUpdate, ActionDraftPutRule, ActionDraftDeleteRule, ActionDraftReset,
	ActionChangeCreate, ActionChangeApprove, ActionChangeReject, ActionChangeReopen, ActionChangePublish,
	ActionChangeSchedule, ActionChangeUnschedule, ActionChangeScheduleSkip,
	ActionRollbackRequest, ActionRollbackEmergent,
	ActionNodeOverride, ActionNodeOverrideDel,
	ActionCanaryStart, ActionCanaryPromote, ActionCanaryAbort,
	ActionPreviewStart, ActionPreviewStop,
}
