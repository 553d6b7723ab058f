package redislimit

import (
	"sort"
	"sync"
	"time"

	"github.com/sluicegw/sluice/api"
)

// quotaUsage is what a node learnt of one quota's (or one tier's) usage in
// its current window from the script's replies: every reply says how much
// of the quota the key has used (quota - remaining). It lives in the Store,
// keyed by namespace, limit and tier, so that it carries over rule swaps
// (the Redis count does too) and costs one short lock per decision, beside
// a Redis round trip.
type quotaUsage struct {
	rule, tier string

	mu       sync.Mutex
	start    time.Time // the window observed last
	maxUsed  int64
	overHalf int64
}

// observe records one reply in the window from start: used is the key's
// count after the decision, granted what the decision took, rate the quota.
// A reply of another window than the last one starts the figures again (a
// new window, or a rule whose window changed).
func (u *quotaUsage) observe(start time.Time, used, granted, rate int64) {
	half := (rate + 1) / 2
	u.mu.Lock()
	defer u.mu.Unlock()
	if !start.Equal(u.start) {
		u.start, u.maxUsed, u.overHalf = start, 0, 0
	}
	u.maxUsed = max(u.maxUsed, used)
	if granted > 0 && used >= half && used-granted < half {
		u.overHalf++
	}
}

// usageKey names a quota's usage entry in the Store.
func usageKey(ns, rule, tier string) string { return ns + "\x00" + rule + "\x00" + tier }

// usageFor returns the usage entry of ns's quota rule, tier tier, made on
// first use.
func (s *Store) usageFor(ns, rule, tier string) *quotaUsage {
	s.umu.Lock()
	defer s.umu.Unlock()
	k := usageKey(ns, rule, tier)
	u := s.usage[k]
	if u == nil {
		if s.usage == nil {
			s.usage = map[string]*quotaUsage{}
		}
		u = &quotaUsage{rule: rule, tier: tier}
		s.usage[k] = u
	}
	return u
}

// QuotaUsage returns what the Store's quotas of namespace ns learnt from
// Redis (api.QuotaUsage), for the node's report: one per quota and tier of
// rs (the rules the node runs) that decided since it was compiled, in the
// window observed last, sorted by rule and tier. Entries of quotas rs does
// not hold are forgotten. The report keeps those of the window holding its
// time (api.RuleSet.CheckQuotaUsage). Safe for concurrent use.
func (s *Store) QuotaUsage(ns string, rs *api.RuleSet) []api.QuotaUsage {
	keep := map[string]bool{}
	if rs != nil {
		for _, l := range rs.Limits {
			if l.Algorithm != api.Quota {
				continue
			}
			keep[usageKey(ns, l.ID, "")] = true
			for _, t := range l.Tiers {
				keep[usageKey(ns, l.ID, t.ID)] = true
			}
		}
	}
	prefix := ns + "\x00"
	s.umu.Lock()
	var us []*quotaUsage
	for k, u := range s.usage {
		if len(k) < len(prefix) || k[:len(prefix)] != prefix {
			continue
		}
		if !keep[k] {
			delete(s.usage, k)
			continue
		}
		us = append(us, u)
	}
	s.umu.Unlock()
	var out []api.QuotaUsage
	for _, u := range us {
		u.mu.Lock()
		if !u.start.IsZero() {
			out = append(out, api.QuotaUsage{Rule: u.rule, Tier: u.tier, WindowStart: u.start, MaxUsed: u.maxUsed, OverHalf: u.overHalf})
		}
		u.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Rule != out[j].Rule {
			return out[i].Rule < out[j].Rule
		}
		return out[i].Tier < out[j].Tier
	})
	return out
}
