package api

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func goodReport(now time.Time) *Report {
	return &Report{NodeID: "gw-1", BootID: "b1", Seq: 2, At: now, IntervalSeconds: 5, Version: 3,
		Requests: RequestCounts{Total: 10, Rejected: 2, Class2xx: 8, Class4xx: 2},
		Latency:  LatencyCounts{Bounds: LatencyBounds, Counts: latencyCounts(5, 9, 10)},
		Limits:   []LimitCounts{{Rule: "per-ip", Allowed: 8, Rejected: 2}},
		Breakers: []BreakerState{{Rule: "up", State: "closed"}},
		Degrades: []DegradeState{{Rule: "coupon", Level: 1, Transitions: []Transition{{From: "0", To: "1", Count: 1}}}}}
}

// latencyCounts is a cumulative histogram over LatencyBounds whose first
// buckets hold first and whose later ones hold the last of first.
func latencyCounts(first ...int64) []int64 {
	c := make([]int64, len(LatencyBounds)+1)
	for i := range c {
		c[i] = first[min(i, len(first)-1)]
	}
	return c
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
		{desc: "latency decreasing", edit: func(r *Report) { r.Latency.Counts = latencyCounts(5, 4, 10) }, wants: []string{"latency.counts[1]"}},
		{desc: "latency without +Inf", edit: func(r *Report) { r.Latency.Counts = r.Latency.Counts[:len(LatencyBounds)] }, wants: []string{"latency.counts"}},
		{desc: "latency bounds of the report's choosing", edit: func(r *Report) {
			r.Latency = LatencyCounts{Bounds: []float64{0.1, 1}, Counts: []int64{5, 9, 10}}
		}, wants: []string{"latency.bounds"}},
		{desc: "50,000 latency bounds", edit: func(r *Report) {
			r.Latency = LatencyCounts{Bounds: make([]float64, 50000), Counts: make([]int64, 50001)}
		}, wants: []string{"latency.bounds"}},
		{desc: "no latency at all", edit: func(r *Report) { r.Latency = LatencyCounts{} }},
		{desc: "transition to an unknown level", edit: func(r *Report) { r.Degrades[0].Transitions[0].To = "<b>9</b>" }, wants: []string{"degrades[0].transitions[0]"}},
		{desc: "transition pair twice", edit: func(r *Report) {
			r.Degrades[0].Transitions = append(r.Degrades[0].Transitions, r.Degrades[0].Transitions[0])
		}, wants: []string{"degrades[0].transitions[1]"}},
		{desc: "breaker transition", edit: func(r *Report) { r.Breakers[0].Transitions = []Transition{{From: "closed", To: "open", Count: 2}} }},
		{desc: "apply error too long", edit: func(r *Report) { r.LastApplyError = strings.Repeat("x", MaxApplyErrorLength+1) }, wants: []string{"lastApplyError"}},
		{desc: "apply error with a control character", edit: func(r *Report) { r.LastApplyError = "bad\x1b[31m" }, wants: []string{"lastApplyError"}},
		{desc: "bad breaker state", edit: func(r *Report) { r.Breakers[0].State = "ajar" }, wants: []string{"breakers[0].state"}},
		{desc: "degrade level 3", edit: func(r *Report) { r.Degrades[0].Level = 3 }, wants: []string{"degrades[0].level"}},
		{desc: "rule id invalid", edit: func(r *Report) { r.Limits[0].Rule = "Per IP" }, wants: []string{"limits[0].rule"}},
		{desc: "rule twice", edit: func(r *Report) { r.Limits = append(r.Limits, r.Limits[0]) }, wants: []string{"limits[1].rule"}},
		{desc: "negative transition", edit: func(r *Report) { r.Degrades[0].Transitions[0].Count = -1 }, wants: []string{"degrades[0].transitions[0].count"}},
		{desc: "variant counts", edit: func(r *Report) {
			r.Limits[0].Variants = []VariantCounts{{Variant: BaseVariant, Allowed: 5, Rejected: 1}, {Variant: "strict", Allowed: 3, Rejected: 1, ShadowRejected: 2}}
		}},
		{desc: "variant twice", edit: func(r *Report) {
			r.Limits[0].Variants = []VariantCounts{{Variant: "strict"}, {Variant: "strict"}}
		}, wants: []string{"limits[0].variants[1].variant"}},
		{desc: "variant id invalid", edit: func(r *Report) { r.Limits[0].Variants = []VariantCounts{{Variant: "<b>x</b>"}} }, wants: []string{"limits[0].variants[0].variant"}},
		{desc: "negative variant count", edit: func(r *Report) { r.Limits[0].Variants = []VariantCounts{{Variant: "strict", Rejected: -1}} }, wants: []string{"limits[0].variants[0].rejected"}},
		{desc: "variant latency", edit: func(r *Report) {
			r.Limits[0].Variants = []VariantCounts{{Variant: "strict", Allowed: 3, Rejected: 9, ShadowRejected: 2,
				Latency: &LatencyCounts{Bounds: LatencyBounds, Counts: latencyCounts(1, 4, 5)}}}
		}},
		{desc: "variant latency empty", edit: func(r *Report) {
			r.Limits[0].Variants = []VariantCounts{{Variant: "strict", Latency: &LatencyCounts{}}}
		}},
		{desc: "forged variant latency: more requests than the variant let through", edit: func(r *Report) {
			// 3 allowed + 2 shadow-rejected; its 9 rejections were answered
			// 429 and are not in the histogram.
			r.Limits[0].Variants = []VariantCounts{{Variant: "strict", Allowed: 3, Rejected: 9, ShadowRejected: 2,
				Latency: &LatencyCounts{Bounds: LatencyBounds, Counts: latencyCounts(1, 4, 6)}}}
		}, wants: []string{"limits[0].variants[0].latency.counts"}},
		{desc: "forged variant latency: bounds of its choosing", edit: func(r *Report) {
			r.Limits[0].Variants = []VariantCounts{{Variant: "strict", Allowed: 30,
				Latency: &LatencyCounts{Bounds: []float64{0.1, 1}, Counts: []int64{5, 9, 10}}}}
		}, wants: []string{"limits[0].variants[0].latency.bounds"}},
		{desc: "forged variant latency: decreasing", edit: func(r *Report) {
			r.Limits[0].Variants = []VariantCounts{{Variant: "strict", Allowed: 30,
				Latency: &LatencyCounts{Bounds: LatencyBounds, Counts: latencyCounts(5, 4, 10)}}}
		}, wants: []string{"limits[0].variants[0].latency.counts[1]"}},
		{desc: "forged variant latency: negative", edit: func(r *Report) {
			r.Limits[0].Variants = []VariantCounts{{Variant: "strict", Allowed: 30,
				Latency: &LatencyCounts{Bounds: LatencyBounds, Counts: latencyCounts(-1, 4, 10)}}}
		}, wants: []string{"limits[0].variants[0].latency.counts[0]"}},
		{desc: "forged variant latency: without +Inf", edit: func(r *Report) {
			r.Limits[0].Variants = []VariantCounts{{Variant: "strict", Allowed: 30,
				Latency: &LatencyCounts{Bounds: LatencyBounds, Counts: latencyCounts(1, 4, 10)[:len(LatencyBounds)]}}}
		}, wants: []string{"limits[0].variants[0].latency.counts"}},
		{desc: "more variants than a limit can have", edit: func(r *Report) {
			for i := range MaxVariants + 2 {
				r.Limits[0].Variants = append(r.Limits[0].Variants, VariantCounts{Variant: fmt.Sprintf("v%d", i)})
			}
		}, wants: []string{"limits[0].variants"}},
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
		// The red team's reports: 169 KB of latency bounds.
		{desc: "169 KB", id: "gw-1", data: strings.Replace(string(b), `"bounds":[`, `"bounds":[`+strings.Repeat("0.5,", 42250), 1), want: "bytes, over 65536"},
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
		{desc: "transition count backwards", edit: func(r *Report) { r.Seq = 3; r.Degrades[0].Transitions[0].Count = 0 }, want: "degrade coupon transitions 0→1 went backwards"},
		{desc: "transition pair dropped", edit: func(r *Report) { r.Seq = 3; r.Degrades[0].Transitions = nil }, want: "degrade coupon transitions 0→1 went backwards"},
		{desc: "latency backwards", edit: func(r *Report) { r.Seq = 3; r.Latency.Counts = latencyCounts(4, 9, 10) }, want: "latency.counts[0] went backwards"},
		{desc: "variant counts up", edit: func(r *Report) { r.Seq = 3; r.Limits[0].Variants[0].Allowed = 6 }},
		{desc: "a new variant", edit: func(r *Report) {
			r.Seq = 3
			r.Limits[0].Variants = append(r.Limits[0].Variants, VariantCounts{Variant: "loose"})
		}},
		{desc: "a variant dropped (a version without it)", edit: func(r *Report) { r.Seq = 3; r.Limits[0].Variants = r.Limits[0].Variants[:1] }},
		{desc: "variant backwards", edit: func(r *Report) { r.Seq = 3; r.Limits[0].Variants[1].Rejected = 0 }, want: "limit per-ip variant strict rejected went backwards"},
		{desc: "variant latency up", edit: func(r *Report) {
			r.Seq = 3
			r.Limits[0].Variants[1].Latency = &LatencyCounts{Bounds: LatencyBounds, Counts: latencyCounts(2, 3)}
		}},
		{desc: "variant latency backwards", edit: func(r *Report) {
			r.Seq = 3
			r.Limits[0].Variants[1].Latency = &LatencyCounts{Bounds: LatencyBounds, Counts: latencyCounts(0, 3)}
		}, want: "limit per-ip variant strict latency.counts[0] went backwards"},
		{desc: "variant latency dropped, to be sent again lower", edit: func(r *Report) { r.Seq = 3; r.Limits[0].Variants[1].Latency = nil },
			want: "limit per-ip variant strict latency.counts[0] went backwards"},
		{desc: "a variant's first latency", edit: func(r *Report) {
			r.Seq = 3
			r.Limits[0].Variants[0].Latency = &LatencyCounts{Bounds: LatencyBounds, Counts: latencyCounts(1)}
		}},
		{desc: "node latency dropped, to be sent again lower", edit: func(r *Report) { r.Seq = 3; r.Latency = LatencyCounts{} },
			want: "latency.counts[0] went backwards"},
	}
	prev.Limits[0].Variants = []VariantCounts{{Variant: BaseVariant, Allowed: 5, Rejected: 1},
		{Variant: "strict", Allowed: 3, Rejected: 1, Latency: &LatencyCounts{Bounds: LatencyBounds, Counts: latencyCounts(1, 3)}}}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			r := goodReport(now)
			r.Limits[0].Variants = []VariantCounts{{Variant: BaseVariant, Allowed: 5, Rejected: 1},
				{Variant: "strict", Allowed: 3, Rejected: 1, Latency: &LatencyCounts{Bounds: LatencyBounds, Counts: latencyCounts(1, 3)}}}
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

func TestReportCheckRulesVariants(t *testing.T) {
	t.Parallel()
	rs := &RuleSet{Limits: []Limit{{ID: "per-ip", Variants: []LimitVariant{{ID: "strict", Weight: 10}}}, {ID: "plain"}}}
	tests := []struct {
		desc     string
		limit    string
		variants []string
		want     string
	}{
		{desc: "the variants and base", limit: "per-ip", variants: []string{BaseVariant, "strict"}},
		{desc: "a variant the limit does not have", limit: "per-ip", variants: []string{"loose"}, want: "variant per-ip/loose"},
		{desc: "base of a limit without variants", limit: "plain", variants: []string{BaseVariant}, want: "variant plain/base"},
		{desc: "another limit's variant", limit: "plain", variants: []string{"strict"}, want: "variant plain/strict"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			r := goodReport(time.Now())
			r.Breakers, r.Degrades = nil, nil
			r.Limits = []LimitCounts{{Rule: tc.limit}}
			for _, v := range tc.variants {
				r.Limits[0].Variants = append(r.Limits[0].Variants, VariantCounts{Variant: v})
			}
			err := r.CheckRules(rs)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("CheckRules: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("CheckRules: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestReportMaxIncrease(t *testing.T) {
	t.Parallel()
	now := time.Now()
	prev := goodReport(now)
	tests := []struct {
		desc string
		edit func(r *Report)
		want int64
	}{
		{desc: "nothing moved", edit: func(*Report) {}, want: 0},
		{desc: "requests", edit: func(r *Report) { r.Requests.Total += 3e9 }, want: 3e9},
		{desc: "a latency bucket", edit: func(r *Report) { r.Latency.Counts[len(LatencyBounds)] += 7 }, want: 7},
		{desc: "a limit", edit: func(r *Report) { r.Limits[0].ShadowRejected += 11 }, want: 11},
		{desc: "a transition", edit: func(r *Report) { r.Degrades[0].Transitions[0].Count += 4500 }, want: 4500},
		{desc: "a new rule counts whole", edit: func(r *Report) { r.Limits = append(r.Limits, LimitCounts{Rule: "new", Allowed: 99}) }, want: 99},
		{desc: "a new variant counts whole", edit: func(r *Report) { r.Limits[0].Variants = []VariantCounts{{Variant: "strict", Rejected: 77}} }, want: 77},
		{desc: "a variant's latency bucket", edit: func(r *Report) {
			r.Limits[0].Variants = []VariantCounts{{Variant: "strict", Allowed: 90, Latency: &LatencyCounts{Bounds: LatencyBounds, Counts: latencyCounts(3, 88)}}}
		}, want: 90},
		{desc: "a variant's latency alone", edit: func(r *Report) {
			r.Limits[0].Variants = []VariantCounts{{Variant: "strict", Latency: &LatencyCounts{Bounds: LatencyBounds, Counts: latencyCounts(3, 88)}}}
		}, want: 88},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			r := goodReport(now)
			tc.edit(r)
			if got := r.MaxIncrease(prev); got != tc.want {
				t.Errorf("MaxIncrease = %d, want %d", got, tc.want)
			}
		})
	}
	if got := goodReport(now).MaxIncrease(&Report{}); got != 10 {
		t.Errorf("MaxIncrease over a new boot = %d, want the largest count, 10", got)
	}
}
