package postgres

import (
	"context"
	"fmt"

	sluice "github.com/sluicegw/sluice/controlplane"
)

// RecentPublications lists, oldest first, the publications with an id
// above after and every pending one: what the stream's publication feed
// compares with what it last saw.
func (o *Outbox) RecentPublications(ctx context.Context, after int64) ([]*sluice.Publication, error) {
	var rows []publicationRow
	if err := o.db.gorm.WithContext(ctx).Where("id > ? OR state = 'pending'", after).Order("id").Limit(1000).Find(&rows).Error; err != nil {
		return nil, dbErr(fmt.Errorf("reading recent publications: %w", err))
	}
	out := make([]*sluice.Publication, len(rows))
	for i := range rows {
		out[i] = rows[i].publication()
	}
	return out, nil
}
