package limit

import (
	"fmt"
	"github.com/sluicegw/sluice/dataplane/reqview/classify"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/reqview"
)

// A limit's tiers (api.Tier) give callers chosen by their verified claims
// (reqview.View.Claims) other rate, burst and period: the first tier whose
// claims all match applies, a tier without match takes every caller the
// others did not, and a caller no tier takes (or one without claims, when
// no tier is unconditional) gets the limit itself. Each tier is a rule of
// its own (its own counters, RateLimit-Policy quota and tier label on
// sluice_limit_decisions_total), carried over a swap by tier id like a
// variant.

// compileTiers compiles ru.l's tiers, each from the same tier of prev
// (matched by id) when there is one, so that its state carries over.
func (ru *rule) compileTiers(prev *rule, opts Options, now int64) error {
	for i, t := range ru.l.Tiers {
		var pt *rule
		if prev != nil {
			for _, o := range prev.tiers {
				if o.tier == t.ID {
					pt = o
				}
			}
		}
		tr, err := compileOne(ru.l.WithTier(t), pt, opts, now, "", t.ID)
		if err != nil {
			return fmt.Errorf("tiers[%d]: %w", i, err)
		}
		var eqs classify.ClaimMatch
		if t.Match != nil {
			eqs = classify.CompileClaims(t.Match.Claims)
		}
		ru.tiers = append(ru.tiers, tr)
		ru.tierMatch = append(ru.tierMatch, eqs)
	}
	return nil
}

// pickTier returns the rule that applies to v's caller: the first tier
// whose claims match, else ru itself. It allocates nothing.
func (ru *rule) pickTier(v *reqview.View) *rule {
	for i, eqs := range ru.tierMatch {
		if eqs.Match(v.Claims) {
			return ru.tiers[i]
		}
	}
	return ru
}

// TierOf returns the tier of limit l that a caller with claims gets: a tier
// id, or "" for the limit itself.
func TierOf(l *api.Limit, c *reqview.Claims) string {
	for _, t := range l.Tiers {
		var eqs classify.ClaimMatch
		if t.Match != nil {
			eqs = classify.CompileClaims(t.Match.Claims)
		}
		if eqs.Match(c) {
			return t.ID
		}
	}
	return ""
}
