package sluice

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sluicegw/sluice/api"
)

// ChangeState is where a change is in review.
type ChangeState string

// The states of a change. Open and approved changes may be stale (see
// Change.Stale); rejected and published ones are final.
const (
	ChangeOpen      ChangeState = "open"
	ChangeApproved  ChangeState = "approved"
	ChangeRejected  ChangeState = "rejected"
	ChangePublished ChangeState = "published"
)

// Change is a proposed new version of a namespace's rules: a copy of the
// draft (or of an old version, for a rollback) taken when it was opened, with
// the version it was compared against.
type Change struct {
	ID          int64       `json:"id"`
	Namespace   string      `json:"namespace"`
	Title       string      `json:"title"`
	Description string      `json:"description"`
	Author      string      `json:"author"`
	State       ChangeState `json:"state"`
	// BaseVersion is the newest version when the change was opened (or
	// reopened); 0 when the namespace had none.
	BaseVersion int64 `json:"baseVersion"`
	// Stale is true when an open or approved change's base is no longer the
	// newest version: it cannot be published until reopened.
	Stale bool `json:"stale"`
	// Contributors are the ids of the users who wrote the change's content:
	// the author and everyone who edited the draft since it last equalled a
	// published version, as of when the change was opened (for a rollback,
	// the user who asked for it). None of them may approve the change.
	Contributors     []int64 `json:"contributors"`
	Checksum         string  `json:"checksum"`
	RollbackOf       *int64  `json:"rollbackOf,omitempty"`
	PublishedVersion *int64  `json:"publishedVersion,omitempty"`
	// PublishAt is when the scheduler publishes an approved change
	// (ScheduleChange); nil when it is not scheduled. ScheduledBy is the
	// approver who scheduled it.
	PublishAt   *time.Time `json:"publishAt,omitempty"`
	ScheduledBy string     `json:"scheduledBy,omitempty"`
	CreatedAt   time.Time  `json:"createdAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`
	Reviews     []*Review  `json:"reviews,omitempty"`
	Diff        *api.Diff  `json:"diff,omitempty"`
	// Warnings are the risks a reviewer should see: api.Warnings of the
	// change's rules against its base version, and the ones the control
	// plane adds from the namespace's nodes (RedisWarning). Never nil.
	Warnings []api.Warning `json:"warnings"`
}

// WarnClusterLimitWithoutRedis is the code of RedisWarning's warning.
const WarnClusterLimitWithoutRedis = "cluster-limit-without-redis"

// RedisWarning returns the warning of a change that adds a cluster limit
// (ws holds api.WarnClusterLimitAdded) when some live node of namespace ns
// has not shown it has Redis, or nil. Node registrations do not report
// Redis: a node has shown it only by running a version with a cluster limit
// (a node without Redis refuses such a version); clusterVersion reports
// whether a version holds one.
func RedisWarning(ns string, ws []api.Warning, nodes []*Node, clusterVersion func(v int64) bool) *api.Warning {
	path := ""
	for _, w := range ws {
		if w.Code == api.WarnClusterLimitAdded {
			path = w.Path
			break
		}
	}
	if path == "" {
		return nil
	}
	live, unproven := 0, []string{}
	for _, n := range nodes {
		if !n.Live {
			continue
		}
		live++
		if n.LastApplyError != "" || !clusterVersion(n.Version) {
			unproven = append(unproven, n.NodeID)
		}
	}
	w := &api.Warning{Code: WarnClusterLimitWithoutRedis, Path: path}
	switch {
	case live == 0:
		w.Message = fmt.Sprintf("no node of namespace %s is live, so none has shown it has Redis; a node without --redis or --redis-cluster refuses a version with a cluster limit", ns)
	case len(unproven) > 0:
		shown := unproven
		if len(shown) > 5 {
			shown = append(shown[:5:5], "…")
		}
		w.Message = fmt.Sprintf("%d of %d live nodes of namespace %s (%s) have not shown they have Redis: registrations do not report Redis, and these nodes run no version with a cluster limit. A node without --redis or --redis-cluster refuses this version and keeps its old rules",
			len(unproven), live, ns, strings.Join(shown, ", "))
	default:
		return nil
	}
	return w
}

// Decision is a reviewer's verdict.
type Decision string

// The decisions. Reopen is recorded when a stale change is rebased.
const (
	Approve Decision = "approve"
	Reject  Decision = "reject"
	Reopen  Decision = "reopen"
)

// Review is one decision on a change.
type Review struct {
	ID        int64     `json:"id"`
	ChangeID  int64     `json:"changeId"`
	Reviewer  string    `json:"reviewer"`
	Decision  Decision  `json:"decision"`
	Comment   string    `json:"comment"`
	CreatedAt time.Time `json:"createdAt"`
}

// ChangeFilter selects changes of one namespace. Zero fields select all;
// Limit zero means 50 (at most 500); Before pages by id (exclusive).
type ChangeFilter struct {
	Namespace string
	State     ChangeState
	Author    string
	Before    int64
	Limit     int
}

// ChangeUpdate is a review: approve or reject, with a comment.
type ChangeUpdate struct {
	Decision Decision
	Comment  string
}

// ChangeService runs the review workflow. The actor comes from the context
// (ActorFromContext). Safe for concurrent use; every mutation is audited in
// the same transaction.
type ChangeService interface {
	// FindChangeByID returns the change with its reviews and its diff
	// against its base version. ENOTFOUND.
	FindChangeByID(ctx context.Context, ns string, id int64) (*Change, error)
	// FindChanges lists changes newest first, without diffs, and the cursor
	// of the next page (f.Before for it; 0 when this page is not full).
	FindChanges(ctx context.Context, f ChangeFilter) (cs []*Change, next int64, err error)
	// CreateChange opens a change from the namespace's draft. EINVALID when
	// the draft does not validate or the title is empty; ECONFLICT when the
	// draft equals the newest version.
	CreateChange(ctx context.Context, c *Change) error
	// UpdateChange records an approval or rejection. EFORBIDDEN when the
	// actor is not an approver, is the author (four eyes), or approves a
	// change whose content they wrote (one of its Contributors); ECONFLICT
	// when the change is not open (or approved, for a rejection) or is stale.
	UpdateChange(ctx context.Context, ns string, id int64, upd ChangeUpdate) (*Change, error)
	// ReopenChange rebases a stale or rejected change on the newest version:
	// its diff is recomputed and it needs a fresh approval. ECONFLICT for a
	// published change.
	ReopenChange(ctx context.Context, ns string, id int64, comment string) (*Change, error)
	// PublishChange turns an approved change into the next version and
	// queues its publication, in one transaction: to every node, or with
	// o.Canary to the matching nodes only. ECONFLICT when the change is not
	// approved or is stale, or a canary is active (promote or abort it
	// first); EINVALID for a bad selector.
	PublishChange(ctx context.Context, ns string, id int64, o PublishOptions) (*Version, error)
	// ScheduleChange has an approved change published at time at by the
	// control plane's scheduler (any replica, exactly once), with the
	// scheduler as actor and the scheduling approver recorded. EFORBIDDEN
	// for a non-approver; EINVALID when at is not in the future; ECONFLICT
	// when the change is not approved or is stale. Scheduling again moves
	// the time. A change whose base moved before its time is not published:
	// its schedule is dropped and it stays stale.
	ScheduleChange(ctx context.Context, ns string, id int64, at time.Time) (*Change, error)
	// UnscheduleChange cancels a change's schedule; it stays approved.
	// EFORBIDDEN for a non-approver; ECONFLICT when it is not scheduled.
	UnscheduleChange(ctx context.Context, ns string, id int64) (*Change, error)
}
