package degrade

import (
	"errors"
	"log/slog"
	"time"

	"github.com/sluicegw/sluice/api"
)

// ApplyOperatorOverride takes up an operator override's forced levels (from
// etcd; api.Override.DegradeLevels) on s: levels that old forced and ov no
// longer does are cleared, and ov's are (re)set until ov expires (or
// MaxOverrideTTL, renewed by each apply). Rules s does not have are logged
// and skipped. Gateways and the in-service SDK apply overrides through it,
// on each override and on each new rule set (old is then the zero
// Override).
func (s *Set) ApplyOperatorOverride(old, ov api.Override, log *slog.Logger) {
	for rule := range old.DegradeLevels {
		if _, still := ov.DegradeLevels[rule]; !still {
			if err := s.ClearOverride(rule); err != nil && !errors.Is(err, ErrUnknownRule) {
				log.Warn("clearing degrade override", "rule", rule, "err", err)
			}
		}
	}
	until := time.Now().Add(MaxOverrideTTL)
	if ov.Expires != nil {
		until = *ov.Expires
	}
	for rule, level := range ov.DegradeLevels {
		if err := s.SetOverride(rule, level, until); err != nil {
			log.Warn("node override names a degrade rule this node cannot apply", "rule", rule, "level", level, "err", err)
		}
	}
}
