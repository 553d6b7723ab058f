package sluice

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
)

// fakeCanaries is a CanaryStore of function fields' worth: it records what
// the analyser saved and ended.
type fakeCanaries struct {
	canaries []*Canary
	saved    []*CanaryComparison
	ended    []bool // promote?
	reasons  []string
}

func (f *fakeCanaries) FindAnalysedCanaries(context.Context) ([]*Canary, error) {
	return f.canaries, nil
}

func (f *fakeCanaries) SaveCanaryComparison(_ context.Context, id int64, c *CanaryComparison) error {
	cp := *c
	f.saved = append(f.saved, &cp)
	for _, can := range f.canaries {
		if can.ID == id {
			can.Comparison = &cp
		}
	}
	return nil
}

func (f *fakeCanaries) EndCanaryByAnalysis(_ context.Context, _ string, id int64, promote bool, reason string, c *CanaryComparison) (bool, error) {
	f.ended, f.reasons = append(f.ended, promote), append(f.reasons, reason)
	var keep []*Canary
	for _, can := range f.canaries {
		if can.ID != id {
			keep = append(keep, can)
		}
	}
	f.canaries = keep
	return true, nil
}

// TestCanaryAnalyser: over a window of reports where the canary nodes
// (version 2) reject rejectShare of their requests and the baseline
// (version 1) 1%, the analyser aborts, promotes, holds or waits, once per
// window, and a window it judged already (by another replica, or before a
// restart: the count is in the store) is not judged again.
func TestCanaryAnalyser(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		desc        string
		rejectShare int64 // percent
		requests    int64 // per node per 5s step
		onPass      string
		judged      int64 // windows already judged
		since       time.Time
		wantEnded   []bool
		wantState   string
	}{
		{desc: "a canary that rejects everything is aborted", rejectShare: 100, requests: 50, onPass: OnPassPromote, since: t0, wantEnded: []bool{false}},
		{desc: "a harmless canary is promoted", rejectShare: 1, requests: 50, onPass: OnPassPromote, since: t0, wantEnded: []bool{true}},
		{desc: "a harmless canary is held", rejectShare: 1, requests: 50, onPass: OnPassHold, since: t0, wantState: ComparisonHeld},
		{desc: "too few requests judge nothing", rejectShare: 100, requests: 1, onPass: OnPassPromote, since: t0, wantState: ComparisonRunning},
		{desc: "a window judged before is not judged again", rejectShare: 100, requests: 50, onPass: OnPassPromote, judged: 1, since: t0, wantState: ComparisonWaiting},
		{desc: "a window older than this replica's stats is left to others", rejectShare: 100, requests: 50, onPass: OnPassPromote, since: t0.Add(5 * time.Second), wantState: ComparisonWaiting},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			now := t0.Add(35 * time.Second) // window 1 [t0, t0+20s) ended, plus the 10s delay
			rs := &api.RuleSet{Limits: []api.Limit{{ID: "per-ip"}}}
			f := NewFleet(FleetSettings{Now: func() time.Time { return now },
				Rules: func(context.Context, string, int64) (*api.RuleSet, error) { return rs, nil }})
			nodes := []struct {
				id      string
				version int64
				share   int64
			}{{"canary-1", 2, tc.rejectShare}, {"base-1", 1, 1}, {"base-2", 1, 1}}
			for _, n := range nodes {
				f.Register("shop", n.id, Registration{Lease: testLease, Version: n.version, Labels: map[string]string{"canary": strconv.FormatBool(n.version == 2)}})
				var total, rejected int64
				for seq := int64(1); seq <= 6; seq++ {
					total += tc.requests
					rejected += tc.requests * n.share / 100
					r := &api.Report{NodeID: n.id, BootID: "b", Seq: seq, At: t0.Add(time.Duration(seq-1)*5*time.Second + time.Second), Version: n.version,
						Requests: api.RequestCounts{Total: total, Rejected: rejected, Class4xx: rejected, Class2xx: total - rejected}}
					if _, err := f.Ingest(context.Background(), "shop", r, key(1)); err != nil {
						t.Fatal(err)
					}
				}
			}
			store := &fakeCanaries{canaries: []*Canary{{ID: 9, Namespace: "shop", Version: 2, CreatedAt: t0, State: CanaryActive, Selector: map[string]string{"canary": "true"},
				Analysis:   &CanaryAnalysis{Window: api.Duration(20 * time.Second), MaxRejectRateIncrease: 0.05, MinRequests: 20, OnPass: tc.onPass},
				Comparison: &CanaryComparison{State: ComparisonWaiting, Windows: tc.judged}}}}
			a := &CanaryAnalyser{Store: store, Fleet: f, Delay: 10 * time.Second, Since: tc.since, Now: func() time.Time { return now }}
			a.Run(context.Background())
			a.Run(context.Background()) // a second look changes nothing
			if len(store.ended) != len(tc.wantEnded) || len(tc.wantEnded) == 1 && store.ended[0] != tc.wantEnded[0] {
				t.Fatalf("ended %v (%v), want %v", store.ended, store.reasons, tc.wantEnded)
			}
			if tc.wantState != "" {
				last := store.saved[len(store.saved)-1]
				if last.State != tc.wantState || last.Current == nil {
					t.Errorf("state %q (current %+v), want %q", last.State, last.Current, tc.wantState)
				}
			}
			if len(tc.wantEnded) == 1 && !tc.wantEnded[0] {
				if r := store.reasons[0]; !strings.Contains(r, "rejectRateIncrease") || !strings.Contains(r, "canary 50 requests") && !strings.Contains(r, "canary 200 requests") {
					t.Errorf("abort reason %q lacks the figures", r)
				}
			}
		})
	}
}
