package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Node reports: the value a gateway writes every --report-interval under
// Keys.Report, bound to its registration lease, and the control plane
// watches. Counters are CUMULATIVE since the node's boot (BootID): the
// control plane takes deltas between reports of one boot, so a lost report
// loses no count, and a new boot counts from zero. Both sides use
// DecodeReport and Report.Check; the control plane adds Report.CheckRules
// (rule ids of the version the report says it runs) and Report.Follows
// (counters never go backwards within a boot).

// Reports is the prefix of a namespace's node reports.
func (k Keys) Reports(ns string) string { return k.Namespace(ns) + "reports/" }

// Report is one node's report key.
func (k Keys) Report(ns, nodeID string) string { return k.Reports(ns) + nodeID }

// Report is one node's report. The zero value is not a valid report.
type Report struct {
	NodeID string `json:"nodeId"`
	// BootID is random per process start; Seq counts the reports of one
	// boot from 1.
	BootID string `json:"bootId"`
	// BootAt is when the boot started (the process's start).
	BootAt time.Time `json:"bootAt,omitzero"`
	Seq    int64     `json:"seq"`
	At     time.Time `json:"at"`
	// IntervalSeconds is the node's --report-interval.
	IntervalSeconds float64 `json:"intervalSeconds"`
	// Version is the applied version (0 when none or from a file).
	Version  int64          `json:"version"`
	Requests RequestCounts  `json:"requests"`
	Latency  LatencyCounts  `json:"latency"`
	Limits   []LimitCounts  `json:"limits,omitempty"`
	Breakers []BreakerState `json:"breakers,omitempty"`
	Degrades []DegradeState `json:"degrades,omitempty"`
	// ApplyErrors counts the versions the node refused since boot;
	// LastApplyError is the latest refusal.
	ApplyErrors    int64  `json:"applyErrors,omitempty"`
	LastApplyError string `json:"lastApplyError,omitempty"`
	// Preview is what the preview the node runs counted since it started
	// (DESIGN.md "Impact preview and replay"); absent when none runs.
	Preview *PreviewReport `json:"preview,omitempty"`
	// Quotas is what the node learnt of its quotas' usage in their current
	// windows (QuotaUsage), one per quota and tier it decided on.
	Quotas []QuotaUsage `json:"quotas,omitempty"`
}

// RequestCounts count the requests a node answered since boot: all of them,
// those answered 429 or 503 (rejected), and by status class.
type RequestCounts struct {
	Total    int64 `json:"total"`
	Rejected int64 `json:"rejected"`
	Class2xx int64 `json:"class2xx"`
	Class4xx int64 `json:"class4xx"`
	Class5xx int64 `json:"class5xx"`
}

// LatencyCounts is a cumulative latency histogram since boot: Counts[i]
// requests took at most Bounds[i] seconds; Counts has one more element
// (+Inf), the requests with a duration.
type LatencyCounts struct {
	Bounds []float64 `json:"bounds"`
	Counts []int64   `json:"counts"`
}

// LimitCounts are one limit's decisions since boot
// (sluice_limit_decisions_total).
type LimitCounts struct {
	Rule           string `json:"rule"`
	Allowed        int64  `json:"allowed"`
	Rejected       int64  `json:"rejected"`
	ShadowRejected int64  `json:"shadowRejected,omitempty"`
	// Variants are the decisions per variant of a limit with variants
	// (api.LimitVariant): one entry per variant id, and BaseVariant for the
	// clients no variant takes; absent for a limit without variants.
	Variants []VariantCounts `json:"variants,omitempty"`
}

// VariantCounts are one variant's decisions since boot
// (sluice_limit_decisions_total{variant}), and the latency histogram of the
// requests it let through (sluice_limit_variant_request_duration_seconds):
// those it allowed or shadow-rejected and the whole chain of limits
// admitted, each with its request's whole duration as the node's Latency
// counts it. Latency is absent from a node that does not count it; its
// total is at most Allowed+ShadowRejected (VariantCounts.LatencyBound).
type VariantCounts struct {
	Variant        string         `json:"variant"`
	Allowed        int64          `json:"allowed"`
	Rejected       int64          `json:"rejected"`
	ShadowRejected int64          `json:"shadowRejected,omitempty"`
	Latency        *LatencyCounts `json:"latency,omitempty"`
}

// LatencyBound is the most requests v's latency histogram may count: those
// it let through (allowed or shadow-rejected). A request is counted as
// decided before its duration is observed, and a node reads its histogram
// before its decisions, so an honest report never counts more.
func (v VariantCounts) LatencyBound() int64 { return v.Allowed + v.ShadowRejected }

// Total is the number of requests l counts (the +Inf bucket); 0 for none.
func (l LatencyCounts) Total() int64 {
	if len(l.Counts) == 0 {
		return 0
	}
	return l.Counts[len(l.Counts)-1]
}

// check reports through bad every problem of l, a histogram at path: bounds
// other than LatencyBounds (none at all is no histogram), not one count per
// bound plus +Inf, a negative count or one below the previous bucket's.
func (l LatencyCounts) check(path string, bad func(path, msg string)) {
	if len(l.Counts) == 0 && len(l.Bounds) == 0 {
		return
	}
	if !slices.Equal(l.Bounds, LatencyBounds) {
		bad(path+".bounds", fmt.Sprintf("must be exactly api.LatencyBounds (%d bounds), not %d bounds", len(LatencyBounds), len(l.Bounds)))
	} else if len(l.Counts) != len(l.Bounds)+1 {
		bad(path+".counts", "must hold one count per bound plus +Inf")
	}
	for i := range l.Counts {
		if l.Counts[i] < 0 || i > 0 && l.Counts[i] < l.Counts[i-1] {
			bad(fmt.Sprintf("%s.counts[%d]", path, i), "must be >= 0 and never below the previous count")
			break
		}
	}
}

// latencyBack returns back's error for the first bucket of now below the
// same bucket of before (what names the histogram). A histogram absent from
// now (or of another length) counts zero in every bucket: one cannot be
// dropped and sent again lower within a boot. Nothing before is nothing to
// compare.
func latencyBack(what string, now, before []int64, back func(string, int64, int64) error) error {
	for i, b := range before {
		var c int64
		if len(now) == len(before) {
			c = now[i]
		}
		if err := back(fmt.Sprintf("%s.counts[%d]", what, i), c, b); err != nil {
			return err
		}
	}
	return nil
}

// counts is l's counts, nil for no histogram.
func (l *LatencyCounts) counts() []int64 {
	if l == nil {
		return nil
	}
	return l.Counts
}

// Transition counts one kind of state change since boot.
type Transition struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Count int64  `json:"count"`
}

// BreakerState is one breaker's state now (closed, half-open or open; the
// worst over its routes), the requests it refused while open since boot,
// and its transitions since boot.
type BreakerState struct {
	Rule        string       `json:"rule"`
	State       string       `json:"state"`
	Rejected    int64        `json:"rejected,omitempty"`
	Transitions []Transition `json:"transitions,omitempty"`
}

// DegradeState is one degrade rule's level now (0, 1 or 2), the requests it
// shed since boot, and its level changes since boot ("0" → "1", ...).
type DegradeState struct {
	Rule        string       `json:"rule"`
	Level       int          `json:"level"`
	Shed        int64        `json:"shed,omitempty"`
	Transitions []Transition `json:"transitions,omitempty"`
}

// Breaker state names in reports.
var breakerStates = map[string]bool{"closed": true, "half-open": true, "open": true}

// MaxReportBytes bounds a report value: a report of a node running a few
// hundred rules is a few KiB.
const MaxReportBytes = 64 << 10

// LatencyBounds are the upper bounds, in seconds, of the latency histogram
// every report carries (the gateway's request duration buckets): a report
// whose latency.bounds differ is refused, so a report cannot choose how much
// memory the control plane spends on it. Do not modify.
var LatencyBounds = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// DefaultMaxNodeRPS is the default ceiling on the rate a report may claim:
// any counter growing faster than this many per second of the time the
// report covers is refused as beyond what one node can serve.
const DefaultMaxNodeRPS = 1e6

// MaxApplyErrorLength bounds a report's lastApplyError, in bytes.
const MaxApplyErrorLength = 2048

// degradeLevels are the level names of degrade transitions.
var degradeLevels = map[string]bool{"0": true, "1": true, "2": true}

// DefaultReportSkew is how far in the future a report's time may be.
const DefaultReportSkew = 30 * time.Second

// EncodeReport is r as JSON.
func EncodeReport(r *Report) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encoding report: %w", err)
	}
	return b, nil
}

// DecodeReport reads a report found under the key of node id strictly (an
// unknown field is an error) and checks it (Report.Check) at now, allowing
// skew into the future (zero means DefaultReportSkew).
func DecodeReport(id string, data []byte, now time.Time, skew time.Duration) (*Report, error) {
	if err := ValidateNodeID(id); err != nil {
		return nil, err
	}
	if len(data) > MaxReportBytes {
		return nil, fmt.Errorf("report of node %q is %d bytes, over %d", id, len(data), MaxReportBytes)
	}
	var r Report
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("report of node %q is not valid JSON: %w", id, err)
	}
	if r.NodeID != id {
		return nil, fmt.Errorf("report under node %q names node %q", id, r.NodeID)
	}
	if errs := r.Check(now, skew); len(errs) > 0 {
		return nil, fmt.Errorf("report of node %q: %w", id, errs)
	}
	return &r, nil
}

// ValidBootID reports whether s may be a boot id: 1 to 64 of
// [A-Za-z0-9._-].
func ValidBootID(s string) bool { return len(s) <= 64 && ValidNodeID(s) }

// Check returns every problem of r on its own: a valid node id and boot id,
// a positive sequence, a time not after now+skew (zero skew means
// DefaultReportSkew), no negative counter, a latency histogram of exactly
// LatencyBounds (or none) whose counts never decrease, valid and unique rule
// ids, valid and unique variant ids per limit (at most MaxVariants+1: the
// variants and BaseVariant), breaker states and degrade levels, transitions between known states
// (each pair once), and a bounded, printable lastApplyError.
func (r *Report) Check(now time.Time, skew time.Duration) Errors {
	if skew <= 0 {
		skew = DefaultReportSkew
	}
	var errs Errors
	bad := func(path, msg string) { errs = append(errs, FieldError{Path: path, Message: msg}) }
	if !ValidNodeID(r.NodeID) {
		bad("nodeId", NodeIDRule)
	}
	if !ValidBootID(r.BootID) {
		bad("bootId", "must be 1 to 64 of [A-Za-z0-9._-]")
	}
	if r.Seq <= 0 {
		bad("seq", "must be > 0")
	}
	if r.At.IsZero() {
		bad("at", "is required")
	} else if r.At.After(now.Add(skew)) {
		bad("at", fmt.Sprintf("is %s in the future (more than the allowed skew of %s)", r.At.Sub(now).Round(time.Millisecond), skew))
	}
	if !r.BootAt.IsZero() && !r.At.IsZero() && r.BootAt.After(r.At) {
		bad("bootAt", "must not be after at")
	}
	if r.IntervalSeconds < 0 {
		bad("intervalSeconds", "must be >= 0")
	}
	if r.Version < 0 {
		bad("version", "must be >= 0")
	}
	neg := func(path string, v int64) {
		if v < 0 {
			bad(path, "must be >= 0")
		}
	}
	q := r.Requests
	neg("requests.total", q.Total)
	neg("requests.rejected", q.Rejected)
	neg("requests.class2xx", q.Class2xx)
	neg("requests.class4xx", q.Class4xx)
	neg("requests.class5xx", q.Class5xx)
	neg("applyErrors", r.ApplyErrors)
	r.Latency.check("latency", bad)
	seen := map[string]bool{}
	id := func(path, kind, rule string) {
		switch {
		case !ValidID(rule):
			bad(path, fmt.Sprintf("rule id %q is not valid", rule))
		case seen[kind+"/"+rule]:
			bad(path, fmt.Sprintf("%s %q given twice", kind, rule))
		}
		seen[kind+"/"+rule] = true
	}
	trans := func(path string, ts []Transition, states map[string]bool) {
		pairs := map[[2]string]bool{}
		for j, t := range ts {
			p := fmt.Sprintf("%s.transitions[%d]", path, j)
			neg(p+".count", t.Count)
			switch {
			case !states[t.From] || !states[t.To] || t.From == t.To:
				bad(p, "must go from one state to another of the rule's states")
			case pairs[[2]string{t.From, t.To}]:
				bad(p, fmt.Sprintf("%s → %s given twice", t.From, t.To))
			}
			pairs[[2]string{t.From, t.To}] = true
		}
	}
	if len(r.LastApplyError) > MaxApplyErrorLength || !printable(r.LastApplyError) {
		bad("lastApplyError", fmt.Sprintf("must be at most %d bytes of printable UTF-8", MaxApplyErrorLength))
	}
	for i, l := range r.Limits {
		p := fmt.Sprintf("limits[%d]", i)
		id(p+".rule", "limit", l.Rule)
		neg(p+".allowed", l.Allowed)
		neg(p+".rejected", l.Rejected)
		neg(p+".shadowRejected", l.ShadowRejected)
		if len(l.Variants) > MaxVariants+1 {
			bad(p+".variants", fmt.Sprintf("must hold at most %d variants (a limit's %d and %q)", MaxVariants+1, MaxVariants, BaseVariant))
			continue
		}
		variants := map[string]bool{}
		for j, vc := range l.Variants {
			vp := fmt.Sprintf("%s.variants[%d]", p, j)
			switch {
			case !ValidID(vc.Variant):
				bad(vp+".variant", fmt.Sprintf("variant id %q is not valid", vc.Variant))
			case variants[vc.Variant]:
				bad(vp+".variant", fmt.Sprintf("variant %q given twice", vc.Variant))
			}
			variants[vc.Variant] = true
			neg(vp+".allowed", vc.Allowed)
			neg(vp+".rejected", vc.Rejected)
			neg(vp+".shadowRejected", vc.ShadowRejected)
			if l := vc.Latency; l != nil {
				l.check(vp+".latency", bad)
				if t, most := l.Total(), vc.LatencyBound(); t > most {
					bad(vp+".latency.counts", fmt.Sprintf("counts %d requests, more than the %d the variant let through (allowed + shadowRejected)", t, most))
				}
			}
		}
	}
	for i, b := range r.Breakers {
		p := fmt.Sprintf("breakers[%d]", i)
		id(p+".rule", "breaker", b.Rule)
		if !breakerStates[b.State] {
			bad(p+".state", "must be closed, half-open or open")
		}
		neg(p+".rejected", b.Rejected)
		trans(p, b.Transitions, breakerStates)
	}
	for i, d := range r.Degrades {
		p := fmt.Sprintf("degrades[%d]", i)
		id(p+".rule", "degrade", d.Rule)
		if d.Level < 0 || d.Level > 2 {
			bad(p+".level", "must be 0, 1 or 2")
		}
		neg(p+".shed", d.Shed)
		trans(p, d.Transitions, degradeLevels)
	}
	if r.Preview != nil {
		errs = append(errs, r.Preview.check("preview")...)
	}
	if len(r.Quotas) > MaxReportQuotas {
		bad("quotas", fmt.Sprintf("must hold at most %d quotas", MaxReportQuotas))
		return errs
	}
	quotas := map[string]bool{}
	for i, u := range r.Quotas {
		p := fmt.Sprintf("quotas[%d]", i)
		switch {
		case !ValidID(u.Rule):
			bad(p+".rule", fmt.Sprintf("rule id %q is not valid", u.Rule))
		case u.Tier != "" && !ValidID(u.Tier):
			bad(p+".tier", fmt.Sprintf("tier id %q is not valid", u.Tier))
		case quotas[quotaKey(u.Rule, u.Tier)]:
			bad(p, fmt.Sprintf("quota %q tier %q given twice", u.Rule, u.Tier))
		}
		quotas[quotaKey(u.Rule, u.Tier)] = true
		if u.WindowStart.IsZero() || !r.At.IsZero() && u.WindowStart.After(r.At) {
			bad(p+".windowStart", "is required and must not be after at")
		}
		neg(p+".maxUsed", u.MaxUsed)
		neg(p+".overHalf", u.OverHalf)
	}
	return errs
}

// CheckQuotas returns an error naming every quota usage of r that cannot
// be one of rs (the version r says it runs) at r's time
// (RuleSet.CheckQuotaUsage): an unknown quota or tier, a window that is not
// the calendar's, a used count over the quota's rate plus burst.
func (r *Report) CheckQuotas(rs *RuleSet) error {
	var bad []string
	for _, u := range r.Quotas {
		if err := rs.CheckQuotaUsage(u, r.At); err != nil {
			bad = append(bad, err.Error())
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("report of node %q: implausible quota usage: %s", r.NodeID, strings.Join(bad, "; "))
	}
	return nil
}

// CheckRules returns an error naming every rule of r that rs (the version
// r says it runs) does not hold, and every variant counted for a limit of
// rs that the limit does not have (BaseVariant only for a limit with
// variants).
func (r *Report) CheckRules(rs *RuleSet) error {
	have := map[string]bool{}
	if rs != nil {
		for _, l := range rs.Limits {
			have["limit/"+l.ID] = true
			if len(l.Variants) > 0 {
				have["variant/"+l.ID+"/"+BaseVariant] = true
			}
			for _, v := range l.Variants {
				have["variant/"+l.ID+"/"+v.ID] = true
			}
		}
		for _, b := range rs.Breakers {
			have["breaker/"+b.ID] = true
		}
		for _, d := range rs.Degrades {
			have["degrade/"+d.ID] = true
		}
	}
	var unknown []string
	check := func(kind, id string) {
		if !have[kind+"/"+id] {
			unknown = append(unknown, kind+" "+id)
		}
	}
	for _, l := range r.Limits {
		check("limit", l.Rule)
		for _, v := range l.Variants {
			check("variant", l.Rule+"/"+v.Variant)
		}
	}
	for _, b := range r.Breakers {
		check("breaker", b.Rule)
	}
	for _, d := range r.Degrades {
		check("degrade", d.Rule)
	}
	if len(unknown) > 0 {
		return fmt.Errorf("report of node %q names rules version %d does not hold: %s", r.NodeID, r.Version, strings.Join(unknown, ", "))
	}
	return nil
}

// Follows reports whether r may follow prev: another boot (any sequence),
// or the same boot with a higher sequence and no counter lower than prev's
// (a rule new in r counts from zero; transition counts included). It returns an error naming the first
// counter that went backwards, or a sequence that did not advance.
func (r *Report) Follows(prev *Report) error {
	if prev == nil || prev.BootID != r.BootID {
		return nil
	}
	if r.Seq <= prev.Seq {
		return fmt.Errorf("report %d of node %q boot %s does not follow report %d", r.Seq, r.NodeID, r.BootID, prev.Seq)
	}
	back := func(what string, now, before int64) error {
		if now < before {
			return fmt.Errorf("report %d of node %q: %s went backwards within boot %s (%d after %d)", r.Seq, r.NodeID, what, r.BootID, now, before)
		}
		return nil
	}
	p, q := prev.Requests, r.Requests
	for _, c := range []struct {
		what        string
		now, before int64
	}{{"requests.total", q.Total, p.Total}, {"requests.rejected", q.Rejected, p.Rejected},
		{"requests.class2xx", q.Class2xx, p.Class2xx}, {"requests.class4xx", q.Class4xx, p.Class4xx},
		{"requests.class5xx", q.Class5xx, p.Class5xx}, {"applyErrors", r.ApplyErrors, prev.ApplyErrors}} {
		if err := back(c.what, c.now, c.before); err != nil {
			return err
		}
	}
	if err := latencyBack("latency", r.Latency.Counts, prev.Latency.Counts, back); err != nil {
		return err
	}
	pl := map[string]LimitCounts{}
	for _, l := range prev.Limits {
		pl[l.Rule] = l
	}
	for _, l := range r.Limits {
		o, ok := pl[l.Rule]
		if !ok {
			continue
		}
		for _, c := range []struct {
			what        string
			now, before int64
		}{{"allowed", l.Allowed, o.Allowed}, {"rejected", l.Rejected, o.Rejected}, {"shadowRejected", l.ShadowRejected, o.ShadowRejected}} {
			if err := back("limit "+l.Rule+" "+c.what, c.now, c.before); err != nil {
				return err
			}
		}
		pv := map[string]VariantCounts{}
		for _, v := range o.Variants {
			pv[v.Variant] = v
		}
		for _, v := range l.Variants {
			w, ok := pv[v.Variant]
			if !ok {
				continue // a variant new in r counts from zero
			}
			for _, c := range []struct {
				what        string
				now, before int64
			}{{"allowed", v.Allowed, w.Allowed}, {"rejected", v.Rejected, w.Rejected}, {"shadowRejected", v.ShadowRejected, w.ShadowRejected}} {
				if err := back("limit "+l.Rule+" variant "+v.Variant+" "+c.what, c.now, c.before); err != nil {
					return err
				}
			}
			if err := latencyBack("limit "+l.Rule+" variant "+v.Variant+" latency", v.Latency.counts(), w.Latency.counts(), back); err != nil {
				return err
			}
		}
	}
	pb := map[string]BreakerState{}
	for _, b := range prev.Breakers {
		pb[b.Rule] = b
	}
	for _, b := range r.Breakers {
		if o, ok := pb[b.Rule]; ok {
			if err := back("breaker "+b.Rule+" rejected", b.Rejected, o.Rejected); err != nil {
				return err
			}
		}
	}
	pd := map[string]DegradeState{}
	for _, d := range prev.Degrades {
		pd[d.Rule] = d
	}
	for _, d := range r.Degrades {
		if o, ok := pd[d.Rule]; ok {
			if err := back("degrade "+d.Rule+" shed", d.Shed, o.Shed); err != nil {
				return err
			}
			if err := transitionsBack("degrade "+d.Rule, d.Transitions, o.Transitions, back); err != nil {
				return err
			}
		}
	}
	for _, b := range r.Breakers {
		if o, ok := pb[b.Rule]; ok {
			if err := transitionsBack("breaker "+b.Rule, b.Transitions, o.Transitions, back); err != nil {
				return err
			}
		}
	}
	return nil
}

// transitionsBack returns back's error for the first transition pair whose
// count in now is below its count in before (a pair missing from now counts
// zero).
func transitionsBack(what string, now, before []Transition, back func(string, int64, int64) error) error {
	have := map[[2]string]int64{}
	for _, t := range now {
		have[[2]string{t.From, t.To}] = t.Count
	}
	for _, t := range before {
		if err := back(what+" transitions "+t.From+"→"+t.To, have[[2]string{t.From, t.To}], t.Count); err != nil {
			return err
		}
	}
	return nil
}

// printable reports whether s is valid UTF-8 without control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, c := range s {
		if unicode.IsControl(c) {
			return false
		}
	}
	return true
}

// MaxIncrease returns the largest increase of any of r's counters over
// base's (the previous report of its boot; the zero Report for a boot's
// counts since it started): requests, latency buckets, limit decisions,
// limit decisions and latency buckets per variant, breaker refusals, degrade sheds, transitions
// and apply errors. The caller compares it with what a node can serve in the
// time between the two (see DefaultMaxNodeRPS).
func (r *Report) MaxIncrease(base *Report) int64 {
	var m int64
	up := func(now, before int64) { m = max(m, now-before) }
	q, p := r.Requests, base.Requests
	up(q.Total, p.Total)
	up(q.Rejected, p.Rejected)
	up(q.Class2xx, p.Class2xx)
	up(q.Class4xx, p.Class4xx)
	up(q.Class5xx, p.Class5xx)
	up(r.ApplyErrors, base.ApplyErrors)
	hist := func(now, before *LatencyCounts) {
		if now == nil {
			return
		}
		for i, c := range now.Counts {
			var b int64
			if before != nil && i < len(before.Counts) {
				b = before.Counts[i]
			}
			up(c, b)
		}
	}
	hist(&r.Latency, &base.Latency)
	pl := map[string]LimitCounts{}
	for _, l := range base.Limits {
		pl[l.Rule] = l
	}
	for _, l := range r.Limits {
		o := pl[l.Rule]
		up(l.Allowed, o.Allowed)
		up(l.Rejected, o.Rejected)
		up(l.ShadowRejected, o.ShadowRejected)
		pv := map[string]VariantCounts{}
		for _, v := range o.Variants {
			pv[v.Variant] = v
		}
		for _, v := range l.Variants {
			w := pv[v.Variant]
			up(v.Allowed, w.Allowed)
			up(v.Rejected, w.Rejected)
			up(v.ShadowRejected, w.ShadowRejected)
			hist(v.Latency, w.Latency)
		}
	}
	trans := func(now, before []Transition) {
		was := map[[2]string]int64{}
		for _, t := range before {
			was[[2]string{t.From, t.To}] = t.Count
		}
		for _, t := range now {
			up(t.Count, was[[2]string{t.From, t.To}])
		}
	}
	pb := map[string]BreakerState{}
	for _, b := range base.Breakers {
		pb[b.Rule] = b
	}
	for _, b := range r.Breakers {
		up(b.Rejected, pb[b.Rule].Rejected)
		trans(b.Transitions, pb[b.Rule].Transitions)
	}
	pd := map[string]DegradeState{}
	for _, d := range base.Degrades {
		pd[d.Rule] = d
	}
	for _, d := range r.Degrades {
		up(d.Shed, pd[d.Rule].Shed)
		trans(d.Transitions, pd[d.Rule].Transitions)
	}
	return m
}
