package postgres

import (
	"context"
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
