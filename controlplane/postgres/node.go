package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

type nodeRow struct {
	Namespace string `gorm:"primaryKey"`
	NodeID    string `gorm:"primaryKey"`
	Status    string
	Live      bool
	FirstSeen time.Time
	LastSeen  time.Time
}

func (nodeRow) TableName() string { return "nodes" }

type nodeVersionRow struct {
	Namespace string `gorm:"primaryKey"`
	Version   int64  `gorm:"primaryKey;autoIncrement:false"`
	NodeID    string `gorm:"primaryKey"`
	Checksum  string
	FirstSeen time.Time
	AppliedAt *time.Time
}

func (nodeVersionRow) TableName() string { return "node_versions" }

// NodeHistory implements sluice.NodeHistory.
type NodeHistory struct{ db *DB }

var _ sluice.NodeHistory = (*NodeHistory)(nil)

// NewNodeHistory returns the node history of db.
func NewNodeHistory(db *DB) *NodeHistory { return &NodeHistory{db: db} }

func micro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// recordNode upserts a live node and the version it reports.
func recordNode(tx *gorm.DB, ns string, s api.NodeStatus, at time.Time) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encoding node status: %w", err)
	}
	if err := tx.Exec(`INSERT INTO nodes (namespace, node_id, status, live, first_seen, last_seen) VALUES (?, ?, ?, true, ?, ?)
		ON CONFLICT (namespace, node_id) DO UPDATE SET status = EXCLUDED.status, live = true,
			last_seen = GREATEST(nodes.last_seen, EXCLUDED.last_seen)`, ns, s.NodeID, string(b), at, at).Error; err != nil {
		return fmt.Errorf("recording node %q: %w", s.NodeID, err)
	}
	if s.Version <= 0 {
		return nil
	}
	var applied *time.Time
	if !s.AppliedAt.IsZero() {
		applied = ptr(micro(s.AppliedAt))
	}
	if err := tx.Exec(`INSERT INTO node_versions (namespace, version, node_id, checksum, first_seen, applied_at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING`, ns, s.Version, s.NodeID, s.Checksum, at, applied).Error; err != nil {
		return fmt.Errorf("recording node %q's version: %w", s.NodeID, err)
	}
	return nil
}

// SyncNodes records a whole listing of live nodes.
func (h *NodeHistory) SyncNodes(ctx context.Context, ns string, live []api.NodeStatus, at time.Time) error {
	at = micro(at)
	ids := make([]string, 0, len(live))
	err := h.db.tx(ctx, func(tx *gorm.DB) error {
		for _, s := range live {
			if err := recordNode(tx, ns, s, at); err != nil {
				return err
			}
			ids = append(ids, s.NodeID)
		}
		if len(ids) == 0 {
			return tx.Exec("UPDATE nodes SET live = false WHERE namespace = ? AND live", ns).Error
		}
		return tx.Exec("UPDATE nodes SET live = false WHERE namespace = ? AND live AND node_id NOT IN ?", ns, ids).Error
	})
	if err != nil {
		return fmt.Errorf("syncing nodes of %q: %w", ns, err)
	}
	return nil
}

// RecordNode records one node live.
func (h *NodeHistory) RecordNode(ctx context.Context, ns string, s api.NodeStatus, at time.Time) error {
	return dbErr(h.db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return recordNode(tx, ns, s, micro(at)) }))
}

// RecordNodeGone marks one node gone.
func (h *NodeHistory) RecordNodeGone(ctx context.Context, ns, nodeID string, at time.Time) error {
	err := h.db.gorm.WithContext(ctx).Exec("UPDATE nodes SET live = false, last_seen = GREATEST(last_seen, ?) WHERE namespace = ? AND node_id = ?",
		micro(at), ns, nodeID).Error
	if err != nil {
		return dbErr(fmt.Errorf("recording node %q gone: %w", nodeID, err))
	}
	return nil
}

// TouchNodes refreshes LastSeen of the live nodes and forgets old gone ones.
func (h *NodeHistory) TouchNodes(ctx context.Context, ns string, at, forgetBefore time.Time) error {
	err := h.db.tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Exec("UPDATE nodes SET last_seen = ? WHERE namespace = ? AND live AND last_seen < ?", micro(at), ns, micro(at)).Error; err != nil {
			return err
		}
		return tx.Exec("DELETE FROM nodes WHERE namespace = ? AND NOT live AND last_seen < ?", ns, micro(forgetBefore)).Error
	})
	if err != nil {
		return fmt.Errorf("touching nodes of %q: %w", ns, err)
	}
	return nil
}

// FindNodeRecords lists the live nodes and those gone since goneSince.
func (h *NodeHistory) FindNodeRecords(ctx context.Context, ns string, goneSince time.Time) ([]*sluice.NodeRecord, error) {
	var rows []nodeRow
	if err := h.db.gorm.WithContext(ctx).Where("namespace = ? AND (live OR last_seen >= ?)", ns, micro(goneSince)).
		Order("node_id").Find(&rows).Error; err != nil {
		return nil, dbErr(fmt.Errorf("listing nodes: %w", err))
	}
	out := make([]*sluice.NodeRecord, 0, len(rows))
	for _, r := range rows {
		rec := &sluice.NodeRecord{Live: r.Live, FirstSeen: r.FirstSeen.UTC(), LastSeen: r.LastSeen.UTC()}
		if err := json.Unmarshal([]byte(r.Status), &rec.Status); err != nil {
			return nil, fmt.Errorf("decoding node %q: %w", r.NodeID, err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// FindRollout returns version n's publication times and the nodes seen
// applying it, earliest first.
func (h *NodeHistory) FindRollout(ctx context.Context, ns string, n int64) (*sluice.Rollout, error) {
	q := h.db.gorm.WithContext(ctx)
	var vs []versionRow
	if err := q.Select("namespace, number, checksum").Where("namespace = ? AND number = ?", ns, n).Find(&vs).Error; err != nil {
		return nil, dbErr(fmt.Errorf("finding version: %w", err))
	}
	if len(vs) == 0 {
		return nil, notFound("version %d not found in namespace %q", n, ns)
	}
	out := &sluice.Rollout{Namespace: ns, Version: n, Checksum: vs[0].Checksum, Applied: []*sluice.NodeApplied{}, Waiting: []*sluice.NodeWaiting{}}
	var pubs []publicationRow
	if err := q.Where("namespace = ? AND version = ? AND state = 'published'", ns, n).Order("id").Find(&pubs).Error; err != nil {
		return nil, dbErr(fmt.Errorf("finding publications: %w", err))
	}
	for _, p := range pubs {
		at := utcPtr(p.PublishedAt)
		switch sluice.PublicationKind(p.Kind) {
		case sluice.PublishCanary:
			out.CanaryAt = at
		case sluice.PublishRuleSet, sluice.PublishPromote, "":
			out.RuleSetAt = at
		default:
			continue
		}
		if at != nil && (out.PublishedAt == nil || at.Before(*out.PublishedAt)) {
			out.PublishedAt = at
		}
	}
	var rows []nodeVersionRow
	if err := q.Where("namespace = ? AND version = ?", ns, n).Order("first_seen, node_id").Find(&rows).Error; err != nil {
		return nil, dbErr(fmt.Errorf("finding node versions: %w", err))
	}
	for _, r := range rows {
		a := &sluice.NodeApplied{NodeID: r.NodeID, Checksum: r.Checksum, FirstSeen: r.FirstSeen.UTC(), AppliedAt: utcPtr(r.AppliedAt)}
		if out.PublishedAt != nil {
			a.DelaySeconds = ptr(a.FirstSeen.Sub(*out.PublishedAt).Seconds())
		}
		out.Applied = append(out.Applied, a)
	}
	return out, nil
}
