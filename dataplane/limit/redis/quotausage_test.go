package redislimit

import (
	"context"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/limit"
)

// TestQuotaUsageFromReplies checks what a Store's quotas learn from the
// script's replies (real Redis, injected wall clock): the heaviest key's
// used count, keys taken past half the quota (once each), per tier, kept
// by a rule swap (a new limiter of the same quota), started again in a new
// window, and forgotten when the rules no longer hold the quota.
func TestQuotaUsageFromReplies(t *testing.T) {
	t.Parallel()
	st := mustStore(t, Settings{URL: mustSharedRedis(t), Prefix: freshPrefix(t), Timeout: time.Second})
	clock := &wallClock{t: time.Date(2026, 12, 14, 12, 0, 0, 0, time.UTC)}
	st.set.Wall = clock.now
	rs := &api.RuleSet{Namespace: "ns", Limits: []api.Limit{{ID: "daily", Algorithm: api.Quota, Rate: 10, Calendar: api.CalendarDay,
		Timezone: "UTC", Scope: api.ScopeCluster, OnStoreError: api.OnStoreErrorDeny,
		Tiers: []api.Tier{{ID: "pro", Rate: 100}}}}}
	l := rs.Limits[0]
	lim := mustLimiter(t, st, l)
	pro := mustLimiter(t, st, l.WithTier(l.Tiers[0]))
	pro.(limit.TierSetter).SetTier("pro")
	ctx := context.Background()
	take := func(lim limit.Limiter, key string, n int) {
		t.Helper()
		for range n {
			if _, err := lim.Take(ctx, key, 1, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	take(lim, "alice", 7) // past half (5) once
	take(lim, "bob", 3)
	take(lim, "carol", 12) // past half once, refused at 10
	take(pro, "dave", 60)  // past the tier's half (50) once
	day := time.Date(2026, 12, 14, 0, 0, 0, 0, time.UTC)
	want := []api.QuotaUsage{
		{Rule: "daily", WindowStart: day, MaxUsed: 10, OverHalf: 2},
		{Rule: "daily", Tier: "pro", WindowStart: day, MaxUsed: 60, OverHalf: 1},
	}
	check := func(want []api.QuotaUsage) {
		t.Helper()
		got := st.QuotaUsage("ns", rs)
		if len(got) != len(want) {
			t.Fatalf("usage %+v, want %+v", got, want)
		}
		for i := range got {
			if got[i].Rule != want[i].Rule || got[i].Tier != want[i].Tier || !got[i].WindowStart.Equal(want[i].WindowStart) ||
				got[i].MaxUsed != want[i].MaxUsed || got[i].OverHalf != want[i].OverHalf {
				t.Fatalf("usage[%d] %+v, want %+v", i, got[i], want[i])
			}
		}
	}
	check(want)

	// A rule swap lowers the quota: a new limiter, the same usage, and the
	// used count read from Redis stays the key's (10, over the new 4).
	low := l
	low.Rate = 4
	take(mustLimiter(t, st, low), "carol", 1)
	check(want)

	// The next day: a new window, new figures.
	clock.set(day.Add(24*time.Hour + time.Minute))
	take(lim, "alice", 1)
	want = []api.QuotaUsage{{Rule: "daily", WindowStart: day.Add(24 * time.Hour), MaxUsed: 1}, want[1]}
	check(want)

	// Rules without the quota: forgotten, and another namespace's stay apart.
	if got := st.QuotaUsage("other", rs); len(got) != 0 {
		t.Fatalf("namespace other: %+v", got)
	}
	if got := st.QuotaUsage("ns", &api.RuleSet{Namespace: "ns"}); len(got) != 0 {
		t.Fatalf("without the quota: %+v", got)
	}
	check(nil)
}
