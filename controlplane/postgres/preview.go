package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	sluice "github.com/sluicegw/sluice/controlplane"
)

var _ sluice.ChangeDocuments = (*ChangeService)(nil)

// ChangeDocument returns the change's proposed document, its checksum and
// its state; ENOTFOUND when ns has no change id.
func (s *ChangeService) ChangeDocument(ctx context.Context, ns string, id int64) ([]byte, string, sluice.ChangeState, error) {
	var rows []struct {
		Document, Checksum, State string
	}
	if err := s.db.gorm.WithContext(ctx).Raw("SELECT document, checksum, state FROM changes WHERE namespace = ? AND id = ?", ns, id).
		Scan(&rows).Error; err != nil {
		return nil, "", "", dbErr(fmt.Errorf("finding change: %w", err))
	}
	if len(rows) == 0 {
		return nil, "", "", notFound("change %d not found in namespace %q", id, ns)
	}
	return []byte(rows[0].Document), rows[0].Checksum, sluice.ChangeState(rows[0].State), nil
}

var _ sluice.PreviewResults = (*ChangeService)(nil)

// SavePreviewResult stores p as the finished preview of change p.Change of
// ns, replacing the change's earlier one.
func (s *ChangeService) SavePreviewResult(ctx context.Context, ns string, p *sluice.Preview) error {
	if p.EndedAt == nil {
		return fmt.Errorf("saving the preview of change %d: it has no end time", p.Change)
	}
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	err = s.db.gorm.WithContext(ctx).Exec(`INSERT INTO preview_results (namespace, change_id, since, ended_at, reason, figures)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (namespace, change_id) DO UPDATE SET since = EXCLUDED.since, ended_at = EXCLUDED.ended_at,
			reason = EXCLUDED.reason, figures = EXCLUDED.figures`,
		ns, p.Change, p.Since, *p.EndedAt, p.Reason, string(b)).Error
	if err != nil {
		return dbErr(fmt.Errorf("saving the preview of change %d: %w", p.Change, err))
	}
	return nil
}

// FindPreviewResult returns the finished preview of change; ENOTFOUND when
// it has none.
func (s *ChangeService) FindPreviewResult(ctx context.Context, ns string, change int64) (*sluice.Preview, error) {
	var rows []struct{ Figures string }
	if err := s.db.gorm.WithContext(ctx).Raw("SELECT figures FROM preview_results WHERE namespace = ? AND change_id = ?", ns, change).
		Scan(&rows).Error; err != nil {
		return nil, dbErr(fmt.Errorf("finding the preview of change %d: %w", change, err))
	}
	if len(rows) == 0 {
		return nil, notFound("change %d of namespace %q has no preview", change, ns)
	}
	var p sluice.Preview
	if err := json.Unmarshal([]byte(rows[0].Figures), &p); err != nil {
		return nil, fmt.Errorf("reading the preview of change %d: %w", change, err)
	}
	return &p, nil
}
