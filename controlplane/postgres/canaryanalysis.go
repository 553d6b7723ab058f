package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"gorm.io/gorm"

	sluice "github.com/sluicegw/sluice/controlplane"
)

// AnalyserActor is the audit actor of the canary analyser's promotions and
// aborts.
const AnalyserActor = "sluice"

// setCanaryAnalysis stores the analysis of the canary of version n, just
// started in tx.
func (db *DB) setCanaryAnalysis(tx *gorm.DB, ns string, n int64, a *sluice.CanaryAnalysis) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	cmp, _ := json.Marshal(sluice.CanaryComparison{State: sluice.ComparisonWaiting})
	return tx.Exec("UPDATE canaries SET analysis = ?, comparison = ? WHERE namespace = ? AND version = ? AND state = 'active'",
		string(b), string(cmp), ns, n).Error
}

func canaryEndAfter(r *canaryRow, state sluice.CanaryState, reason string, figures any) map[string]any {
	after := map[string]any{"id": r.ID, "version": r.Version, "state": state, "reason": reason}
	if figures != nil {
		after["figures"] = figures
	}
	return after
}

// FindAnalysedCanaries lists the active canaries that carry an analysis,
// of every namespace.
func (s *CanaryService) FindAnalysedCanaries(ctx context.Context) ([]*sluice.Canary, error) {
	var rows []canaryRow
	if err := s.db.gorm.WithContext(ctx).Where("state = 'active' AND analysis IS NOT NULL").Order("id").Find(&rows).Error; err != nil {
		return nil, dbErr(fmt.Errorf("finding analysed canaries: %w", err))
	}
	out := make([]*sluice.Canary, len(rows))
	for i := range rows {
		out[i] = rows[i].canary()
	}
	return out, nil
}

// SaveCanaryComparison stores the analyser's comparison of canary id, if it
// is still active.
func (s *CanaryService) SaveCanaryComparison(ctx context.Context, id int64, c *sluice.CanaryComparison) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := s.db.gorm.WithContext(ctx).Exec("UPDATE canaries SET comparison = ? WHERE id = ? AND state = 'active'", string(b), id).Error; err != nil {
		return dbErr(fmt.Errorf("saving canary comparison: %w", err))
	}
	return nil
}

// EndCanaryByAnalysis promotes (or aborts) canary id of ns as the analyser
// decided, with AnalyserActor as actor and the comparison in the audit
// event; it does nothing when that canary is no longer active (a person
// ended it first, or another replica did). It reports whether it ended it.
func (s *CanaryService) EndCanaryByAnalysis(ctx context.Context, ns string, id int64, promote bool, reason string, c *sluice.CanaryComparison) (bool, error) {
	ctx = sluice.NewContextWithActor(ctx, sluice.Actor{User: &sluice.User{Username: AnalyserActor, Role: sluice.RoleAdmin}, Role: sluice.RoleAdmin})
	state := sluice.CanaryAborted
	if promote {
		state = sluice.CanaryPromoted
	}
	b, err := json.Marshal(c)
	if err != nil {
		return false, err
	}
	ended := false
	err = s.db.tx(ctx, func(tx *gorm.DB) error {
		if _, err := lockNamespace(tx, ns); err != nil {
			return err
		}
		r, err := activeCanary(tx, ns)
		if err != nil || r == nil || r.ID != id {
			return err
		}
		if err := tx.Exec("UPDATE canaries SET comparison = ? WHERE id = ?", string(b), id).Error; err != nil {
			return err
		}
		ended = true
		return s.db.endCanaryWith(ctx, tx, r, state, reason, c)
	})
	if err != nil {
		return false, fmt.Errorf("ending canary by analysis: %w", err)
	}
	if ended {
		s.db.published(ns)
	}
	return ended, nil
}
