package api

import (
	"strings"
	"testing"
	"time"
)

func goodReport(now time.Time) *Report {
	return &Report{NodeID: "gw-1", BootID: "b1", Seq: 2, At: now, IntervalSeconds: 5, Version: 3,
		Requests: RequestCounts{Total: 10, Rejected: 2, Class2xx: 8, Class4xx: 2},
		Latency:  LatencyCounts{Bounds: []float64{0.1, 1}, Counts: []int64{5, 9, 10}},
		Limits:   []LimitCounts{{Rule: "per-ip", Allowed: 8, Rejected: 2}},
		Breakers: []BreakerState{{Rule: "up", State: "closed"}},
		Degrades: []DegradeState{{Rule: "coupon", Level: 1, Transitions: []Transition{{From: "0", To: "1", Count: 1}}}}}
}

func TestReportCheck(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		desc  string
		edit  func(r *Report)
		wants []string // paths with a problem; none means valid
	}{
		{desc: "valid", edit: func(*Report) {}},
		{desc: "node id with a colon", edit: func(r *Report) { r.NodeID = "gw:1" }, wants: []string{"nodeId"}},
		{desc: "no boot id", edit: func(r *Report) { r.BootID = "" }, wants: []string{"bootId"}},
		{desc: "sequence zero", edit: func(r *Report) { r.Seq = 0 }, wants: []string{"seq"}},
		{desc: "from the future", edit: func(r *Report) { r.At = now.Add(time.Minute) }, wants: []string{"at"}},
		{desc: "within the skew", edit: func(r *Report) { r.At = now.Add(20 * time.Second) }},
		{desc: "negative request count", edit: func(r *Report) { r.Requests.Class5xx = -1 }, wants: []string{"requests.class5xx"}},
		{desc: "negative limit count", edit: func(r *Report) { r.Limits[0].Allowed = -3 }, wants: []string{"limits[0].allowed"}},
		{desc: "latency decreasing", edit: func(r *Report) { r.Latency.Counts = []int64{5, 4, 10} }, wants: []string{"latency.counts[1]"}},
		{desc: "latency without +Inf", edit: func(r *Report) { r.Latency.Counts = []int64{5, 9} }, wants: []string{"latency.counts"}},
		{desc: "bad breaker state", edit: func(r *Report) { r.Breakers[0].State = "ajar" }, wants: []string{"breakers[0].state"}},
		{desc: "degrade level 3", edit: func(r *Report) { r.Degrades[0].Level = 3 }, wants: []string{"degrades[0].level"}},
		{desc: "rule id invalid", edit: func(r *Report) { r.Limits[0].Rule = "Per IP" }, wants: []string{"limits[0].rule"}},
		{desc: "rule twice", edit: func(r *Report) { r.Limits = append(r.Limits, r.Limits[0]) }, wants: []string{"limits[1].rule"}},
		{desc: "negative transition", edit: func(r *Report) { r.Degrades[0].Transitions[0].Count = -1 }, wants: []string{"degrades[0].transitions[0].count"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			r := goodReport(now)
			tc.edit(r)
			errs := r.Check(now, 0)
			var got []string
			for _, e := range errs {
				got = append(got, e.Path)
			}
			if strings.Join(got, ",") != strings.Join(tc.wants, ",") {
				t.Errorf("problems at %v (%v), want %v", got, errs, tc.wants)
			}
		})
	}
}

func TestDecodeReport(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC()
	b, err := EncodeReport(goodReport(now))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc, id, data, want string
	}{
		{desc: "valid", id: "gw-1", data: string(b)},
		{desc: "under another node's key", id: "gw-2", data: string(b), want: `names node "gw-1"`},
		{desc: "bad key", id: "gw:1", data: string(b), want: `invalid node id "gw:1"`},
		{desc: "unknown field", id: "gw-1", data: strings.Replace(string(b), `"seq"`, `"sequence":1,"seq"`, 1), want: "unknown field"},
		{desc: "not JSON", id: "gw-1", data: "{", want: "not valid JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			_, err := DecodeReport(tc.id, []byte(tc.data), now, 0)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("DecodeReport: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("DecodeReport: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestReportFollows(t *testing.T) {
	t.Parallel()
	now := time.Now()
	prev := goodReport(now)
	tests := []struct {
		desc string
		edit func(r *Report)
		want string
	}{
		{desc: "next report, counts up", edit: func(r *Report) { r.Seq = 3; r.Limits[0].Allowed = 9 }},
		{desc: "another boot counts from zero", edit: func(r *Report) { r.BootID, r.Seq, r.Limits[0].Allowed = "b2", 1, 0 }},
		{desc: "a new rule", edit: func(r *Report) { r.Seq = 3; r.Limits = append(r.Limits, LimitCounts{Rule: "new"}) }},
		{desc: "same sequence", edit: func(r *Report) {}, want: "does not follow"},
		{desc: "limit backwards", edit: func(r *Report) { r.Seq = 3; r.Limits[0].Rejected = 1 }, want: "limit per-ip rejected went backwards"},
		{desc: "requests backwards", edit: func(r *Report) { r.Seq = 3; r.Requests.Total = 9 }, want: "requests.total went backwards"},
		{desc: "latency backwards", edit: func(r *Report) { r.Seq = 3; r.Latency.Counts = []int64{4, 9, 10} }, want: "latency.counts[0] went backwards"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			r := goodReport(now)
			tc.edit(r)
			err := r.Follows(prev)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Follows: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Follows: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestReportCheckRules(t *testing.T) {
	t.Parallel()
	r := goodReport(time.Now())
	rs := &RuleSet{Limits: []Limit{{ID: "per-ip"}}, Breakers: []Breaker{{ID: "up"}}, Degrades: []Degrade{{ID: "coupon"}}}
	if err := r.CheckRules(rs); err != nil {
		t.Fatal(err)
	}
	rs.Breakers = nil
	if err := r.CheckRules(rs); err == nil || !strings.Contains(err.Error(), "breaker up") {
		t.Errorf("CheckRules without the breaker: %v", err)
	}
}
