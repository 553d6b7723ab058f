package sluice

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
)

// fillFleet ingests an hour of 5s reports from nodes nodes, each with
// three limits, a breaker and a degrade rule, ending at now.
func fillFleet(tb testing.TB, nodes int, now time.Time) *Fleet {
	tb.Helper()
	rs := &api.RuleSet{Limits: []api.Limit{{ID: "l1"}, {ID: "l2"}, {ID: "l3"}}, Breakers: []api.Breaker{{ID: "b1"}}, Degrades: []api.Degrade{{ID: "d1"}}}
	f := NewFleet(FleetSettings{Now: func() time.Time { return now },
		Rules: func(context.Context, string, int64) (*api.RuleSet, error) { return rs, nil }})
	ctx := context.Background()
	start := now.Add(-time.Hour)
	bounds := api.LatencyBounds
	for n := range nodes {
		id := fmt.Sprintf("gw-%04d", n)
		f.Register("shop", id, Registration{Lease: 1, Version: 1})
		var c int64
		for seq := int64(1); seq <= 720; seq++ {
			c += 100
			lat := make([]int64, len(bounds)+1)
			for i := range lat {
				lat[i] = c * int64(i+1) / int64(len(lat))
			}
			r := &api.Report{NodeID: id, BootID: "boot", Seq: seq, At: start.Add(time.Duration(seq) * 5 * time.Second), Version: 1,
				Requests: api.RequestCounts{Total: c, Rejected: c / 10, Class2xx: c - c/10, Class4xx: c / 10},
				Latency:  api.LatencyCounts{Bounds: bounds, Counts: lat},
				Limits:   []api.LimitCounts{{Rule: "l1", Allowed: c, Rejected: c / 10}, {Rule: "l2", Allowed: c}, {Rule: "l3", Allowed: c}},
				Breakers: []api.BreakerState{{Rule: "b1", State: "closed"}}, Degrades: []api.DegradeState{{Rule: "d1"}}}
			if _, err := f.Ingest(ctx, "shop", r, ReportKey{CreateRevision: 1, Lease: 1}); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return f
}

// BenchmarkStatsQuery answers /stats queries over an hour of reports of
// 1,000 nodes (720 steps each) and reports the p50 and p99 latency in
// milliseconds of each kind of query. Target: p99 <= 50 ms.
func BenchmarkStatsQuery(b *testing.B) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f := fillFleet(b, 1000, now)
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.Logf("an hour of 1,000 nodes' reports: %.0f MB of heap", float64(after.HeapAlloc-before.HeapAlloc)/1e6)
	for _, tc := range []struct {
		name string
		q    StatsQuery
	}{
		{"fleet-hour-5s", StatsQuery{Namespace: "shop"}},
		{"fleet-hour-1m", StatsQuery{Namespace: "shop", Step: time.Minute}},
		{"one-rule-hour-5s", StatsQuery{Namespace: "shop", Rule: "l1"}},
		{"one-node-hour-5s", StatsQuery{Namespace: "shop", Node: "gw-0500"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var lat []time.Duration
			for b.Loop() {
				t0 := time.Now()
				st, err := f.FindStats(context.Background(), tc.q)
				lat = append(lat, time.Since(t0))
				if err != nil || len(st.Series) == 0 {
					b.Fatalf("%v %+v", err, st)
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

// BenchmarkIngest is the cost of storing one report (3 limits, a breaker,
// a degrade rule, a 15-bucket histogram) of one of 1,000 nodes.
func BenchmarkIngest(b *testing.B) {
	now := time.Now()
	rs := &api.RuleSet{Limits: []api.Limit{{ID: "l1"}, {ID: "l2"}, {ID: "l3"}}, Breakers: []api.Breaker{{ID: "b1"}}, Degrades: []api.Degrade{{ID: "d1"}}}
	f := NewFleet(FleetSettings{Now: func() time.Time { return now },
		Rules: func(context.Context, string, int64) (*api.RuleSet, error) { return rs, nil }})
	reports := make([]*api.Report, 1000)
	for n := range reports {
		f.Register("shop", fmt.Sprintf("gw-%04d", n), Registration{Lease: 1, Version: 1})
		reports[n] = &api.Report{NodeID: fmt.Sprintf("gw-%04d", n), BootID: "boot", At: now, Version: 1,
			Latency:  api.LatencyCounts{Bounds: api.LatencyBounds, Counts: make([]int64, 15)},
			Limits:   []api.LimitCounts{{Rule: "l1"}, {Rule: "l2"}, {Rule: "l3"}},
			Breakers: []api.BreakerState{{Rule: "b1", State: "closed"}}, Degrades: []api.DegradeState{{Rule: "d1"}}}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r := reports[i%1000]
		r.Seq++
		r.Requests.Total += 100
		r.Limits[0].Allowed += 100
		if _, err := f.Ingest(context.Background(), "shop", r, ReportKey{CreateRevision: 1, Lease: 1}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
