package api

import (
	"strings"
	"testing"
	"time"
)

// paris is the timezone of identity.yaml's monthly-quota.
func paris(tb testing.TB) *time.Location {
	tb.Helper()
	loc, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		tb.Fatal(err)
	}
	return loc
}

// TestReportQuotasCheck checks a report's quota usages on their own
// (Report.Check) and against the version the node runs (Report.CheckQuotas):
// ids, duplicates, signs, the window of the calendar at the report's time,
// and a used count at most the quota's rate plus burst.
func TestReportQuotasCheck(t *testing.T) {
	t.Parallel()
	rs := MustValid(t, "identity.yaml")
	loc := paris(t)
	now := time.Date(2026, 12, 14, 12, 0, 0, 0, time.UTC)
	month := time.Date(2026, 12, 1, 0, 0, 0, 0, loc)
	fixed, _, _ := rs.Limits[2].QuotaWindow(now)
	good := func() []QuotaUsage {
		return []QuotaUsage{
			{Rule: "monthly-quota", WindowStart: month, MaxUsed: 99000, OverHalf: 3},
			{Rule: "monthly-quota", Tier: "pro", WindowStart: month, MaxUsed: 2000000},
			{Rule: "partner-quota", WindowStart: fixed, MaxUsed: 10},
		}
	}
	tests := []struct {
		desc    string
		edit    func(q []QuotaUsage) []QuotaUsage
		check   []string // paths Report.Check refuses
		against string   // what CheckQuotas says, "" for nothing
	}{
		{desc: "valid", edit: func(q []QuotaUsage) []QuotaUsage { return q }},
		{desc: "no quotas", edit: func([]QuotaUsage) []QuotaUsage { return nil }},
		{desc: "bad rule id", edit: func(q []QuotaUsage) []QuotaUsage { q[0].Rule = "<x>"; return q }, check: []string{"quotas[0].rule"}},
		{desc: "bad tier id", edit: func(q []QuotaUsage) []QuotaUsage { q[1].Tier = "a b"; return q }, check: []string{"quotas[1].tier"}},
		{desc: "twice", edit: func(q []QuotaUsage) []QuotaUsage { return append(q, q[0]) }, check: []string{"quotas[3]"}},
		{desc: "negative used", edit: func(q []QuotaUsage) []QuotaUsage { q[0].MaxUsed = -1; return q }, check: []string{"quotas[0].maxUsed"}},
		{desc: "negative over half", edit: func(q []QuotaUsage) []QuotaUsage { q[0].OverHalf = -1; return q }, check: []string{"quotas[0].overHalf"}},
		{desc: "no window", edit: func(q []QuotaUsage) []QuotaUsage { q[0].WindowStart = time.Time{}; return q }, check: []string{"quotas[0].windowStart"}},
		{desc: "window after the report", edit: func(q []QuotaUsage) []QuotaUsage { q[0].WindowStart = now.Add(time.Hour); return q }, check: []string{"quotas[0].windowStart"}},
		{desc: "too many", edit: func(q []QuotaUsage) []QuotaUsage {
			return make([]QuotaUsage, MaxReportQuotas+1)
		}, check: []string{"quotas"}},
		{desc: "not a quota", edit: func(q []QuotaUsage) []QuotaUsage { q[0].Rule = "per-user"; return q }, against: "per-user is not a quota"},
		{desc: "unknown quota", edit: func(q []QuotaUsage) []QuotaUsage { q[0].Rule = "nope"; return q }, against: "no quota nope"},
		{desc: "unknown tier", edit: func(q []QuotaUsage) []QuotaUsage { q[1].Tier = "gold"; return q }, against: "no tier gold"},
		{desc: "window of UTC, not Paris", edit: func(q []QuotaUsage) []QuotaUsage {
			q[0].WindowStart = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
			return q
		}, against: "not the start of the window"},
		{desc: "last month's window", edit: func(q []QuotaUsage) []QuotaUsage {
			q[0].WindowStart = time.Date(2026, 11, 1, 0, 0, 0, 0, loc)
			return q
		}, against: "not the start of the window"},
		{desc: "fixed period misaligned", edit: func(q []QuotaUsage) []QuotaUsage { q[2].WindowStart = fixed.Add(time.Hour); return q }, against: "not the start of the window"},
		{desc: "used at rate plus burst", edit: func(q []QuotaUsage) []QuotaUsage { q[0].MaxUsed = 200000; return q }},
		{desc: "used over rate plus burst", edit: func(q []QuotaUsage) []QuotaUsage { q[0].MaxUsed = 200001; return q }, against: "over the quota's rate plus burst (200000)"},
		{desc: "tier's bound is the tier's", edit: func(q []QuotaUsage) []QuotaUsage { q[1].MaxUsed = 2000001; return q }, against: "(2000000)"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			r := goodReport(now)
			r.Limits, r.Breakers, r.Degrades = nil, nil, nil
			r.Quotas = tt.edit(good())
			errs := r.Check(now, 0)
			var got []string
			for _, e := range errs {
				got = append(got, e.Path)
			}
			if strings.Join(got, ",") != strings.Join(tt.check, ",") {
				t.Fatalf("Check refused %q, want %q (%v)", got, tt.check, errs)
			}
			if len(errs) > 0 {
				return
			}
			err := r.CheckQuotas(rs)
			switch {
			case tt.against == "" && err != nil:
				t.Fatalf("CheckQuotas: %v", err)
			case tt.against != "" && (err == nil || !strings.Contains(err.Error(), tt.against)):
				t.Fatalf("CheckQuotas: %v, want %q", err, tt.against)
			}
		})
	}
}

// TestQuotaLoweredWithUsage checks quota-lowered when the nodes' usage is
// known: a quota lowered below the heaviest caller's usage of the current
// window names it and the reset, one lowered above it is not flagged, usage
// of another window or another tier does not count, and without usage the
// softer wording stays.
func TestQuotaLoweredWithUsage(t *testing.T) {
	t.Parallel()
	loc := paris(t)
	now := time.Date(2026, 12, 14, 12, 0, 0, 0, time.UTC)
	month := time.Date(2026, 12, 1, 0, 0, 0, 0, loc)
	tests := []struct {
		desc   string
		mutate func(rs *RuleSet)
		usage  []QuotaUsage
		path   string // warned, "" for none
		want   string // in the message
	}{
		{desc: "below the heaviest caller", mutate: func(rs *RuleSet) { rs.Limits[1].Rate = 50000 },
			usage: []QuotaUsage{{Rule: "monthly-quota", WindowStart: month, MaxUsed: 80000, OverHalf: 4}},
			path:  "limits[monthly-quota].rate",
			want:  "quota monthly-quota lowered to 50000; this month's heaviest caller has already used 80000: callers above 50000 are refused until 2027-01-01 00:00 CET (4 callers had used over half of the old quota of 100000)"},
		{desc: "above the heaviest caller", mutate: func(rs *RuleSet) { rs.Limits[1].Rate = 50000 },
			usage: []QuotaUsage{{Rule: "monthly-quota", WindowStart: month, MaxUsed: 49000}}},
		{desc: "usage of last month", mutate: func(rs *RuleSet) { rs.Limits[1].Rate = 50000 },
			usage: []QuotaUsage{{Rule: "monthly-quota", WindowStart: time.Date(2026, 11, 1, 0, 0, 0, 0, loc), MaxUsed: 80000}},
			path:  "limits[monthly-quota].rate", want: "callers may already be over the new quota"},
		{desc: "usage of another tier", mutate: func(rs *RuleSet) { rs.Limits[1].Rate = 50000 },
			usage: []QuotaUsage{{Rule: "monthly-quota", Tier: "pro", WindowStart: month, MaxUsed: 80000}},
			path:  "limits[monthly-quota].rate", want: "callers may already be over the new quota"},
		{desc: "no usage", mutate: func(rs *RuleSet) { rs.Limits[1].Rate = 50000 },
			path: "limits[monthly-quota].rate", want: "quota monthly-quota is lowered from 100000 to 50000 per month: usage already counted this period stays counted"},
		{desc: "tier below its heaviest caller", mutate: func(rs *RuleSet) { rs.Limits[1].Tiers[0].Rate = 500000 },
			usage: []QuotaUsage{{Rule: "monthly-quota", Tier: "pro", WindowStart: month, MaxUsed: 700000}},
			path:  "limits[monthly-quota].tiers[pro].rate",
			want:  "quota monthly-quota, tier pro, lowered to 500000; this month's heaviest caller has already used 700000: callers above 500000 are refused until 2027-01-01 00:00 CET"},
		{desc: "calendar changed: another window, other keys", mutate: func(rs *RuleSet) {
			rs.Limits[1].Rate, rs.Limits[1].Calendar = 5000, CalendarDay
		}, usage: []QuotaUsage{{Rule: "monthly-quota", WindowStart: month, MaxUsed: 80000}},
			path: "limits[monthly-quota].rate", want: "callers may already be over"},
		{desc: "fixed period", mutate: func(rs *RuleSet) { rs.Limits[2].Rate = 100 },
			usage: []QuotaUsage{{Rule: "partner-quota", WindowStart: time.Date(2026, 12, 12, 0, 0, 0, 0, time.UTC), MaxUsed: 300}},
			path:  "limits[partner-quota].rate",
			want:  "quota partner-quota lowered to 100; this period's heaviest caller has already used 300: callers above 100 are refused until 2026-12-15 00:00 UTC"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			old, rs := MustValid(t, "identity.yaml"), MustValid(t, "identity.yaml")
			tt.mutate(rs)
			var got []Warning
			for _, w := range WarningsIn(old, rs, WarnContext{Now: now, Usage: tt.usage}) {
				if w.Code == WarnQuotaLowered {
					got = append(got, w)
				}
			}
			if tt.path == "" {
				if len(got) > 0 {
					t.Fatalf("warned %+v, want nothing", got)
				}
				return
			}
			if len(got) != 1 || got[0].Path != tt.path || !strings.Contains(got[0].Message, tt.want) {
				t.Fatalf("warned %+v, want one at %s saying %q", got, tt.path, tt.want)
			}
		})
	}
}

// BenchmarkQuotaWindow is a calendar quota's window lookup, done on every
// quota decision.
func BenchmarkQuotaWindow(b *testing.B) {
	l := Limit{ID: "q", Algorithm: Quota, Rate: 10, Calendar: CalendarMonth, Timezone: "Europe/Paris"}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok := l.QuotaWindow(now); !ok {
			b.Fatal("no window")
		}
	}
}
