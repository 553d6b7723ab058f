package sluice

import (
	"context"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
)

// TestFleetQuotaUsage checks the quota usage the Fleet keeps from node
// reports: checked against the version (a forged window or an impossible
// used count refuses the report as implausible), folded over nodes (the
// highest MaxUsed; OverHalf summed, by what each boot's count grew, and a
// boot that restarts keeps what its previous boot counted), and forgotten
// when the window is over.
func TestFleetQuotaUsage(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 14, 12, 0, 0, 0, time.UTC)
	day := time.Date(2026, 12, 14, 0, 0, 0, 0, time.UTC)
	rs := &api.RuleSet{Limits: []api.Limit{{ID: "per-ip"}, {ID: "daily", Algorithm: api.Quota, Rate: 100, Calendar: api.CalendarDay, Timezone: "UTC", Scope: api.ScopeCluster}}}
	f := NewFleet(FleetSettings{Now: func() time.Time { return now },
		Rules: func(context.Context, string, int64) (*api.RuleSet, error) { return rs, nil }})
	register(f, "gw-1", 1)
	register(f, "gw-2", 1)
	ctx := context.Background()
	send := func(node, boot string, seq int64, u ...api.QuotaUsage) error {
		r := rep(node, boot, seq, now, 1, 10*seq, 0, 0)
		r.Quotas = u
		_, err := f.Ingest(ctx, "shop", r, key(1))
		return err
	}
	use := func(start time.Time, maxUsed, over int64) api.QuotaUsage {
		return api.QuotaUsage{Rule: "daily", WindowStart: start, MaxUsed: maxUsed, OverHalf: over}
	}
	for _, tc := range []struct {
		desc string
		u    api.QuotaUsage
	}{
		{"window of another calendar", use(day.Add(time.Hour), 5, 0)},
		{"used over rate plus burst", use(day, 201, 0)},
		{"not a quota", api.QuotaUsage{Rule: "per-ip", WindowStart: day}},
	} {
		err := send("gw-1", "a", 1, tc.u)
		if re, ok := err.(*RefusedError); !ok || re.Reason != RefusedImplausible {
			t.Errorf("%s: %v, want refused as implausible", tc.desc, err)
		}
	}
	steps := []struct {
		node, boot string
		seq        int64
		u          api.QuotaUsage
	}{
		{"gw-1", "a", 1, use(day, 40, 1)},
		{"gw-1", "a", 2, use(day, 70, 3)}, // +2
		{"gw-2", "x", 1, use(day, 90, 2)}, // +2
		{"gw-2", "x", 1, use(day, 90, 2)}, // a re-list: nothing
		{"gw-1", "b", 1, use(day, 10, 1)}, // a restart: +1, the max stays
	}
	for _, s := range steps {
		if err := send(s.node, s.boot, s.seq, s.u); err != nil {
			t.Fatal(err)
		}
	}
	got := f.QuotaUsage("shop", now)
	if len(got) != 1 || got[0] != use(day, 90, 6) {
		t.Fatalf("usage %+v, want %+v", got, use(day, 90, 6))
	}
	if got := f.QuotaUsage("other", now); len(got) != 0 {
		t.Fatalf("namespace other: %+v", got)
	}
	// The window ends: nothing to say of it, and Forget drops it.
	now = day.Add(24 * time.Hour)
	if got := f.QuotaUsage("shop", now); len(got) != 0 {
		t.Fatalf("after the window: %+v", got)
	}
	f.Forget()
	f.mu.RLock()
	n := len(f.spaces["shop"].quotas)
	f.mu.RUnlock()
	if n != 0 {
		t.Fatalf("%d windows kept after Forget", n)
	}
}
