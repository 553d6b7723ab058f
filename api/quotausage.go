package api

import (
	"fmt"
	"time"
)

// QuotaUsage is what a gateway learnt of one quota's usage (or one tier's
// of a quota with tiers) in the quota's current window, from the Redis
// script's replies (each reply says how much of the quota the key has used):
// the most one key had used, and how many keys its decisions took past half
// the quota. Reports carry one per quota and tier the node decided on in the
// window holding the report's time (Report.Quotas); the control plane folds
// them into one per quota, tier and window (Warnings reads that: a quota
// lowered below the heaviest caller's usage refuses that caller until the
// window ends).
type QuotaUsage struct {
	Rule string `json:"rule"`
	// Tier is the tier's id; empty for the limit itself.
	Tier string `json:"tier,omitempty"`
	// WindowStart is the start of the quota's window (api.Limit.QuotaWindow).
	WindowStart time.Time `json:"windowStart"`
	// MaxUsed is the highest used count of one key seen in the window (a
	// node reports at most MaxQuotaUsed of its quota).
	MaxUsed int64 `json:"maxUsed"`
	// OverHalf counts the decisions that took a key from below half the
	// quota to at least half: each key once per window, on the one node
	// that made that decision (a refund can make a key cross twice).
	OverHalf int64 `json:"overHalf"`
}

// MaxReportQuotas bounds a report's quotas (one per quota and tier), so
// that they take at most about 32 KiB of a report's MaxReportBytes; a node
// with more reports the first ones by rule id.
const MaxReportQuotas = 256

// MaxQuotaUsed is the highest used count a report may claim for one key of
// quota l (a tier's limit: Limit.WithTier): its rate plus its burst, which
// for a quota is its rate again. A key may be above the rate only when the
// quota was lowered in the window; a node reports more as this bound.
func MaxQuotaUsed(l *Limit) int64 { return 2 * l.Rate }

// QuotaLimit returns the limit a quota usage of rule and tier counts
// against in rs (Limit.WithTier for a tier), or an error naming why there
// is none: no such limit, not a quota, no such tier.
func (rs *RuleSet) QuotaLimit(rule, tier string) (Limit, error) {
	if rs != nil {
		for i := range rs.Limits {
			l := &rs.Limits[i]
			if l.ID != rule {
				continue
			}
			if l.Algorithm != Quota {
				return Limit{}, fmt.Errorf("limit %s is not a quota", rule)
			}
			if tier == "" {
				return *l, nil
			}
			for _, t := range l.Tiers {
				if t.ID == tier {
					return l.WithTier(t), nil
				}
			}
			return Limit{}, fmt.Errorf("quota %s has no tier %s", rule, tier)
		}
	}
	return Limit{}, fmt.Errorf("no quota %s", rule)
}

// CheckQuotaUsage returns why u cannot be a usage of a quota of rs seen by
// a node at time at (its report's time), or nil: the quota (and tier) must
// be in rs, u's window must be the quota's window holding at (by the
// calendar, in its timezone), and MaxUsed at most MaxQuotaUsed. The node
// drops or caps what does not hold before reporting; the control plane
// refuses a report that still carries it.
func (rs *RuleSet) CheckQuotaUsage(u QuotaUsage, at time.Time) error {
	l, err := rs.QuotaLimit(u.Rule, u.Tier)
	if err != nil {
		return err
	}
	start, _, ok := l.QuotaWindow(at)
	if !ok {
		return fmt.Errorf("quota %s has no window", u.Rule)
	}
	if !start.Equal(u.WindowStart) {
		return fmt.Errorf("quota %s: window start %s is not the start of the window holding %s (%s)", u.Rule,
			u.WindowStart.UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339), start.UTC().Format(time.RFC3339))
	}
	if b := MaxQuotaUsed(&l); u.MaxUsed > b {
		return fmt.Errorf("quota %s: maxUsed %d is over the quota's rate plus burst (%d)", u.Rule, u.MaxUsed, b)
	}
	return nil
}

// quotaKey names a QuotaUsage's quota and tier.
func quotaKey(rule, tier string) string { return rule + "/" + tier }
