package sluice

import (
	"context"
	"encoding/json"
	"time"
)

// AuditEvent is one entry of the append-only, hash-chained audit log.
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

// AuditVerification is the result of walking the hash chain.
type AuditVerification struct {
	OK      bool  `json:"ok"`
	Checked int64 `json:"checked"`
	// FirstBroken is the id of the first event whose hash or link does not
	// hold, and Reason says which.
	FirstBroken *int64 `json:"firstBroken,omitempty"`
	Reason      string `json:"reason,omitempty"`
}

// AuditService reads and records the audit log. Safe for concurrent use.
type AuditService interface {
	// FindAuditEvents lists events matching f.
	FindAuditEvents(ctx context.Context, f AuditFilter) ([]*AuditEvent, error)
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
	ActionChangeCreate     = "change.create"
	ActionChangeApprove    = "change.approve"
	ActionChangeReject     = "change.reject"
	ActionChangeReopen     = "change.reopen"
	ActionChangePublish    = "change.publish"
	ActionRollbackRequest  = "version.rollback_request"
	ActionRollbackEmergent = "version.emergency_rollback"
	ActionNodeOverride     = "node.override"
	ActionNodeOverrideDel  = "node.override_delete"
	ActionCanaryStart      = "canary.start"
	ActionCanaryPromote    = "canary.promote"
	ActionCanaryAbort      = "canary.abort"
)
