package sluice

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/sluicegw/sluice/api"
)

// Fleet keeps the last hour of every namespace's node reports in memory, in
// steps of Resolution, and answers stats queries (it implements
// StatsService). Every control-plane replica runs one, fed by its own watch
// of the report keys, so every replica answers the same (for the reports it
// has seen: a replica started 10 minutes ago holds 10 minutes).
//
// Reports carry cumulative counters per boot; Fleet stores deltas: the
// difference with the node's previous report of the same boot, the whole
// counters for the first report of a boot (Seq 1, or a boot that started
// after the Fleet did), and nothing for the first report it sees of a boot
// already under way before (its counts were made before this replica
// watched). A report is refused (counted by reason,
// never stored) when its rules are not those of the version it names, or
// its counters went backwards within its boot; the report's own checks
// (api.Report.Check) are the watcher's, before Ingest.
//
// Safe for concurrent use.
type Fleet struct {
	s     FleetSettings
	slots int

	started time.Time

	mu      sync.RWMutex
	spaces  map[string]*fleetSpace
	rules   map[string]*api.RuleSet // "ns/version"
	refused map[string]int64
	stored  int64
}

// FleetSettings configures a Fleet. Rules is required.
type FleetSettings struct {
	// Resolution is the stats step; zero means 5s.
	Resolution time.Duration
	// Retention is how far back stats are kept; zero means 1h.
	Retention time.Duration
	// Rules returns the rule set of version n of ns (versions are
	// immutable: Fleet caches the answer).
	Rules func(ctx context.Context, ns string, n int64) (*api.RuleSet, error)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Refusal reasons, the label of the refused-reports metric.
const (
	RefusedInvalid      = "invalid"       // api.DecodeReport refused it (the watcher counts it)
	RefusedUnknownRules = "unknown_rules" // rules its version does not hold
	RefusedBackwards    = "backwards"     // counters or sequence went backwards within a boot
	RefusedNoVersion    = "no_version"    // its version could not be read
)

// RefusedError is a report Fleet.Ingest refused, with the reason counted.
type RefusedError struct {
	Reason string
	Err    error
}

func (e *RefusedError) Error() string { return "report refused (" + e.Reason + "): " + e.Err.Error() }
func (e *RefusedError) Unwrap() error { return e.Err }

// NewFleet returns an empty Fleet.
func NewFleet(s FleetSettings) *Fleet {
	if s.Resolution <= 0 {
		s.Resolution = 5 * time.Second
	}
	if s.Retention <= 0 {
		s.Retention = time.Hour
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	return &Fleet{s: s, started: s.Now(), slots: int(s.Retention/s.Resolution) + 2, spaces: map[string]*fleetSpace{},
		rules: map[string]*api.RuleSet{}, refused: map[string]int64{}}
}

// Resolution is the stats step.
func (f *Fleet) Resolution() time.Duration { return f.s.Resolution }

// Counts returns the number of reports stored and refused by reason.
func (f *Fleet) Counts() (stored int64, refused map[string]int64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.stored, maps(f.refused)
}

func maps(m map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Refuse counts a report refused before Ingest (reason RefusedInvalid).
func (f *Fleet) Refuse(reason string) {
	f.mu.Lock()
	f.refused[reason]++
	f.mu.Unlock()
}

// ring holds per-slot vectors of n counts, each slot stamped with the step
// number it holds. Counts are int32: one node's count over one 5s step
// stays far below 2^31, and an hour of 1,000 nodes fits in about 130 MB.
type ring struct {
	n     int
	epoch []int64
	vals  []int32
}

func newRing(slots, n int) *ring {
	r := &ring{n: n, epoch: make([]int64, slots), vals: make([]int32, slots*n)}
	for i := range r.epoch {
		r.epoch[i] = -1
	}
	return r
}

// at returns the vector of step b, clearing the slot when it held an older
// step.
func (r *ring) at(b int64) []int32 {
	i := int(b % int64(len(r.epoch)))
	v := r.vals[i*r.n : (i+1)*r.n]
	if r.epoch[i] != b {
		clear(v)
		r.epoch[i] = b
	}
	return v
}

// get returns the vector of step b, or nil when the ring does not hold it.
func (r *ring) get(b int64) []int32 {
	i := int(b % int64(len(r.epoch)))
	if r.epoch[i] != b {
		return nil
	}
	return r.vals[i*r.n : (i+1)*r.n]
}

// Rule vector elements (StatsColumns without the time).
const (
	rAllowed = iota
	rRejected
	rShed
	rShadow
	rBreaker
	ruleN
)

// Node vector elements: request counts, then the latency histogram's
// per-bucket (not cumulative) counts, then the node's version in that step.
const (
	nRequests = iota
	nRejected
	n2xx
	n4xx
	n5xx
	nVersion
	nLatency // first latency bucket
)

type fleetSpace struct {
	nodes map[string]*fleetNode
	fleet map[string]*ring // rule key → fleet-wide sums
	kinds map[string]string
	// bounds are the latency bucket bounds of the first report seen; a
	// report with other bounds contributes no latency.
	bounds []float64
	total  *ring // fleet-wide node vector
}

type fleetNode struct {
	last      *api.Report
	createRev int64
	nodeVec   *ring
	rules     map[string]*ring
	gone      bool
	summary   *NodeReport
}

func ruleKey(kind, id string) string { return kind + "/" + id }

// Ingest stores the deltas of report r of node r.NodeID in namespace ns,
// read from a report key created at etcd revision createRev, and returns
// the events it makes: node_joined for a new report key, degrade and
// breaker transitions, apply errors. Each event's Key identifies it so that
// every replica makes the same one. A duplicate (same boot and sequence as
// the last one stored) is ignored; a refused report returns an error naming
// why (see Counts).
func (f *Fleet) Ingest(ctx context.Context, ns string, r *api.Report, createRev int64) ([]*Event, error) {
	rs, err := f.ruleSet(ctx, ns, r.Version)
	if err != nil {
		f.Refuse(RefusedNoVersion)
		return nil, &RefusedError{Reason: RefusedNoVersion, Err: err}
	}
	if err := r.CheckRules(rs); err != nil {
		f.Refuse(RefusedUnknownRules)
		return nil, &RefusedError{Reason: RefusedUnknownRules, Err: err}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	sp := f.spaces[ns]
	if sp == nil {
		sp = &fleetSpace{nodes: map[string]*fleetNode{}, fleet: map[string]*ring{}, kinds: map[string]string{}, total: nil}
		f.spaces[ns] = sp
	}
	n := sp.nodes[r.NodeID]
	if n == nil {
		n = &fleetNode{rules: map[string]*ring{}}
		sp.nodes[r.NodeID] = n
	}
	prev := n.last
	if prev != nil && prev.BootID == r.BootID && prev.Seq == r.Seq {
		n.gone = false
		return nil, nil // seen already (a re-list)
	}
	if err := r.Follows(prev); err != nil {
		f.refused[RefusedBackwards]++
		return nil, &RefusedError{Reason: RefusedBackwards, Err: err}
	}
	var evs []*Event
	if createRev != n.createRev {
		evs = append(evs, &Event{Namespace: ns, At: r.At, Kind: EventNodeJoined, Node: r.NodeID, Version: r.Version,
			Key: "node_joined/" + r.NodeID + "/" + strconv.FormatInt(createRev, 10)})
		n.createRev = createRev
	}
	n.gone = false
	base := prev
	switch {
	case prev != nil && prev.BootID == r.BootID:
	case r.Seq == 1 || !r.BootAt.IsZero() && !r.BootAt.Before(f.started):
		// A new boot counts from zero; so does the first report seen of a
		// boot that started after this Fleet did (its namespace was
		// followed late): every count of it is since then.
		base = &api.Report{}
	default:
		base = nil // a boot already under way: its counts predate this watch
	}
	f.stored++
	n.last = r
	n.summary = summarise(r, base)
	if base == nil {
		return evs, nil
	}
	now := f.s.Now()
	at := r.At
	if at.Before(now.Add(-f.s.Retention)) {
		return evs, nil
	}
	step := at.Unix() / int64(f.s.Resolution/time.Second)
	f.storeDeltas(sp, n, step, base, r)
	return append(evs, transitionEvents(ns, base, r)...), nil
}

// storeDeltas adds r minus base to step b of the node's and the fleet's
// rings.
func (f *Fleet) storeDeltas(sp *fleetSpace, n *fleetNode, b int64, base, r *api.Report) {
	if sp.bounds == nil && len(r.Latency.Bounds) > 0 {
		sp.bounds = slices.Clone(r.Latency.Bounds)
	}
	width := nLatency + len(sp.bounds) + 1
	if n.nodeVec == nil || n.nodeVec.n != width {
		n.nodeVec = newRing(f.slots, width)
	}
	if sp.total == nil || sp.total.n != width {
		sp.total = newRing(f.slots, width)
	}
	nv, tv := n.nodeVec.at(b), sp.total.at(b)
	add := func(i int, d int64) {
		nv[i] += int32(d)
		tv[i] += int32(d)
	}
	q, p := r.Requests, base.Requests
	add(nRequests, q.Total-p.Total)
	add(nRejected, q.Rejected-p.Rejected)
	add(n2xx, q.Class2xx-p.Class2xx)
	add(n4xx, q.Class4xx-p.Class4xx)
	add(n5xx, q.Class5xx-p.Class5xx)
	nv[nVersion] = int32(r.Version)
	if slices.Equal(r.Latency.Bounds, sp.bounds) {
		prevCounts := base.Latency.Counts
		for i, c := range r.Latency.Counts {
			cum := c
			if i < len(prevCounts) {
				cum -= prevCounts[i]
			}
			below := int64(0)
			if i > 0 {
				below = r.Latency.Counts[i-1]
				if i-1 < len(prevCounts) {
					below -= prevCounts[i-1]
				}
			}
			add(nLatency+i, cum-below)
		}
	}
	rule := func(kind, id string, d [ruleN]int64) {
		k := ruleKey(kind, id)
		sp.kinds[k] = kind
		nr := n.rules[k]
		if nr == nil {
			nr = newRing(f.slots, ruleN)
			n.rules[k] = nr
		}
		fr := sp.fleet[k]
		if fr == nil {
			fr = newRing(f.slots, ruleN)
			sp.fleet[k] = fr
		}
		a, c := nr.at(b), fr.at(b)
		for i, v := range d {
			a[i] += int32(v)
			c[i] += int32(v)
		}
	}
	pl := map[string]api.LimitCounts{}
	for _, l := range base.Limits {
		pl[l.Rule] = l
	}
	for _, l := range r.Limits {
		o := pl[l.Rule]
		rule("limit", l.Rule, [ruleN]int64{rAllowed: l.Allowed - o.Allowed, rRejected: l.Rejected - o.Rejected, rShadow: l.ShadowRejected - o.ShadowRejected})
	}
	pb := map[string]api.BreakerState{}
	for _, x := range base.Breakers {
		pb[x.Rule] = x
	}
	for _, x := range r.Breakers {
		rule("breaker", x.Rule, [ruleN]int64{rBreaker: x.Rejected - pb[x.Rule].Rejected})
	}
	pd := map[string]api.DegradeState{}
	for _, x := range base.Degrades {
		pd[x.Rule] = x
	}
	for _, x := range r.Degrades {
		rule("degrade", x.Rule, [ruleN]int64{rShed: x.Shed - pd[x.Rule].Shed})
	}
}

// transitionEvents are the degrade and breaker transitions and the apply
// errors r counts beyond base, one event per rule and (from, to) pair. An
// event's key is the node's boot and the pair's count after it (not the
// report it was first seen in), so that replicas that saw different reports
// of a node (one saw every report, another only the newest) store a
// transition once.
func transitionEvents(ns string, base, r *api.Report) []*Event {
	var evs []*Event
	key := func(kind EventKind, rule, from, to string, count int64) string {
		return string(kind) + "/" + r.NodeID + "/" + r.BootID + "/" + rule + "/" + from + "/" + to + "/" + strconv.FormatInt(count, 10)
	}
	emit := func(kind EventKind, rule string, prev, now []api.Transition) {
		was := map[[2]string]int64{}
		for _, t := range prev {
			was[[2]string{t.From, t.To}] = t.Count
		}
		for _, t := range now {
			if d := t.Count - was[[2]string{t.From, t.To}]; d > 0 {
				detail, _ := json.Marshal(map[string]any{"count": d, "bootId": r.BootID, "seq": r.Seq})
				evs = append(evs, &Event{Namespace: ns, At: r.At, Kind: kind, Node: r.NodeID, Rule: rule, From: t.From, To: t.To,
					Version: r.Version, Detail: detail, Key: key(kind, rule, t.From, t.To, t.Count)})
			}
		}
	}
	pd := map[string][]api.Transition{}
	for _, d := range base.Degrades {
		pd[d.Rule] = d.Transitions
	}
	for _, d := range r.Degrades {
		emit(EventDegrade, d.Rule, pd[d.Rule], d.Transitions)
	}
	pb := map[string][]api.Transition{}
	for _, b := range base.Breakers {
		pb[b.Rule] = b.Transitions
	}
	for _, b := range r.Breakers {
		emit(EventBreaker, b.Rule, pb[b.Rule], b.Transitions)
	}
	if r.ApplyErrors > base.ApplyErrors {
		detail, _ := json.Marshal(map[string]any{"error": r.LastApplyError, "count": r.ApplyErrors - base.ApplyErrors})
		evs = append(evs, &Event{Namespace: ns, At: r.At, Kind: EventApplyError, Node: r.NodeID, Version: r.Version, Detail: detail,
			Key: "apply_error/" + r.NodeID + "/" + r.BootID + "/" + strconv.FormatInt(r.ApplyErrors, 10)})
	}
	return evs
}

// Gone records that node's report key (created at createRev) was deleted:
// its lease ended. It returns the node_left event, nil for a node never
// seen or a key already replaced.
func (f *Fleet) Gone(ns, node string, createRev int64, at time.Time) *Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	sp := f.spaces[ns]
	if sp == nil {
		return nil
	}
	n := sp.nodes[node]
	if n == nil || n.gone || createRev != 0 && n.createRev != createRev {
		return nil
	}
	n.gone = true
	ev := &Event{Namespace: ns, At: at, Kind: EventNodeLeft, Node: node, Key: "node_left/" + node + "/" + strconv.FormatInt(n.createRev, 10)}
	if n.last != nil {
		ev.Version = n.last.Version
	}
	return ev
}

func (f *Fleet) ruleSet(ctx context.Context, ns string, n int64) (*api.RuleSet, error) {
	if n == 0 {
		return nil, nil
	}
	k := ns + "/" + strconv.FormatInt(n, 10)
	f.mu.RLock()
	rs, ok := f.rules[k]
	f.mu.RUnlock()
	if ok {
		return rs, nil
	}
	rs, err := f.s.Rules(ctx, ns, n)
	if err != nil {
		return nil, fmt.Errorf("reading the rules of version %d of %s: %w", n, ns, err)
	}
	f.mu.Lock()
	f.rules[k] = rs
	f.mu.Unlock()
	return rs, nil
}

// LastReport returns node's last stored report in ns, nil when none.
func (f *Fleet) LastReport(ns, node string) (r *api.Report, live bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if sp := f.spaces[ns]; sp != nil {
		if n := sp.nodes[node]; n != nil {
			return n.last, !n.gone
		}
	}
	return nil, false
}

// FindStats answers q from memory. EINVALID for a step that is not a
// positive multiple of the resolution or is over the retention.
func (f *Fleet) FindStats(_ context.Context, q StatsQuery) (*Stats, error) {
	res := f.s.Resolution
	step := q.Step
	if step == 0 {
		step = res
	}
	if step < res || step%res != 0 || step > f.s.Retention {
		return nil, &Error{Code: EINVALID, Message: "invalid query parameter", Fields: api.Errors{{Path: "step",
			Message: fmt.Sprintf("must be a multiple of %s, at most %s", res, f.s.Retention)}}}
	}
	now := f.s.Now()
	floor := now.Add(-f.s.Retention)
	since := q.Since
	if since.IsZero() || since.Before(floor) {
		since = floor
	}
	resSec, stepSec := int64(res/time.Second), int64(step/time.Second)
	from, to := since.Unix()/resSec, now.Unix()/resSec
	out := &Stats{Namespace: q.Namespace, Step: step.String(), StepSeconds: stepSec, Since: since.UTC(), Until: now.UTC(),
		Columns: StatsColumns, NodeColumns: NodeStatsColumns, Series: []*StatsSeries{}, Nodes: []*NodeStatsSeries{}}
	f.mu.RLock()
	defer f.mu.RUnlock()
	sp := f.spaces[q.Namespace]
	if sp == nil {
		return out, nil
	}
	rulePoints := func(r *ring) [][]float64 {
		var pts [][]float64
		var cur []float64
		for b := from; b <= to; b++ {
			v := r.get(b)
			if v == nil {
				continue
			}
			t := (b * resSec) / stepSec * stepSec
			if cur == nil || int64(cur[0]) != t {
				cur = make([]float64, 1+ruleN)
				cur[0] = float64(t)
				pts = append(pts, cur)
			}
			for i := range ruleN {
				cur[1+i] += float64(v[i])
			}
		}
		if pts == nil {
			pts = [][]float64{}
		}
		return pts
	}
	keys := make([]string, 0, len(sp.fleet))
	for k := range sp.fleet {
		if q.Rule == "" || k[len(sp.kinds[k])+1:] == q.Rule {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if q.Node == "" {
		for _, k := range keys {
			out.Series = append(out.Series, &StatsSeries{Rule: k[len(sp.kinds[k])+1:], Kind: sp.kinds[k], Points: rulePoints(sp.fleet[k])})
		}
		if sp.total != nil {
			out.Nodes = append(out.Nodes, &NodeStatsSeries{Node: "", Points: nodePoints(sp.total, sp.bounds, from, to, resSec, stepSec)})
		}
		return out, nil
	}
	n := sp.nodes[q.Node]
	if n == nil {
		return out, nil
	}
	for _, k := range keys {
		if r := n.rules[k]; r != nil {
			out.Series = append(out.Series, &StatsSeries{Rule: k[len(sp.kinds[k])+1:], Kind: sp.kinds[k], Node: q.Node, Points: rulePoints(r)})
		}
	}
	if n.nodeVec != nil {
		out.Nodes = append(out.Nodes, &NodeStatsSeries{Node: q.Node, Points: nodePoints(n.nodeVec, sp.bounds, from, to, resSec, stepSec)})
	}
	return out, nil
}

// nodePoints sums a node ring's steps into points of NodeStatsColumns.
func nodePoints(r *ring, bounds []float64, from, to, resSec, stepSec int64) [][]float64 {
	pts := [][]float64{}
	var cur []float64
	var hist []int64
	flush := func() {
		if cur != nil {
			cur[6] = P99(bounds, hist)
		}
	}
	for b := from; b <= to; b++ {
		v := r.get(b)
		if v == nil {
			continue
		}
		t := (b * resSec) / stepSec * stepSec
		if cur == nil || int64(cur[0]) != t {
			flush()
			cur = make([]float64, 7)
			cur[0] = float64(t)
			hist = make([]int64, len(v)-nLatency)
			pts = append(pts, cur)
		}
		for i := nRequests; i <= n5xx; i++ {
			cur[1+i] += float64(v[i])
		}
		for i := range hist {
			hist[i] += int64(v[nLatency+i])
		}
	}
	flush()
	return pts
}

// P99 is the 99th percentile of a latency histogram of per-bucket counts
// (the last one +Inf) with upper bounds, interpolated within the bucket as
// Prometheus's histogram_quantile does; 0 without requests.
func P99(bounds []float64, counts []int64) float64 {
	var total int64
	for _, c := range counts {
		total += c
	}
	if total == 0 || len(bounds) == 0 {
		return 0
	}
	target := 0.99 * float64(total)
	var cum float64
	for i, c := range counts {
		next := cum + float64(c)
		if next >= target {
			if i >= len(bounds) {
				return bounds[len(bounds)-1]
			}
			lo := 0.0
			if i > 0 {
				lo = bounds[i-1]
			}
			if c == 0 {
				return bounds[i]
			}
			return lo + (bounds[i]-lo)*(target-cum)/float64(c)
		}
		cum = next
	}
	return bounds[len(bounds)-1]
}

// Cohort sums, over the steps [from, to) (unix seconds), the figures of the
// nodes of ns for which canary(node, version in that step) is true
// (inCanary) or false (the baseline). A step in which a node's version
// changed (it differs from the node's previous step) counts in neither: its
// counts, taken since the node's previous report, mix traffic served under
// both versions (a canary's first step would carry the rejections of the
// version it replaced).
func (f *Fleet) Cohort(ns string, from, to time.Time, inCanary func(node string, version int64) bool) (canary, baseline *CohortFigures) {
	canary, baseline = &CohortFigures{Nodes: []string{}}, &CohortFigures{Nodes: []string{}}
	f.mu.RLock()
	defer f.mu.RUnlock()
	sp := f.spaces[ns]
	if sp == nil {
		return canary, baseline
	}
	resSec := int64(f.s.Resolution / time.Second)
	bFrom, bTo := from.Unix()/resSec, to.Unix()/resSec // steps fully inside [from, to)
	if from.Unix()%resSec != 0 {
		bFrom++
	}
	hists := map[*CohortFigures][]int64{}
	ids := make([]string, 0, len(sp.nodes))
	for id := range sp.nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		n := sp.nodes[id]
		if n.nodeVec == nil {
			continue
		}
		seen := map[*CohortFigures]bool{}
		for b := bFrom; b < bTo; b++ {
			v := n.nodeVec.get(b)
			if v == nil {
				continue
			}
			if p := n.nodeVec.get(b - 1); p != nil && p[nVersion] != v[nVersion] {
				continue // the node switched versions in this step
			}
			c := baseline
			if inCanary(id, int64(v[nVersion])) {
				c = canary
			}
			if !seen[c] {
				seen[c] = true
				c.Nodes = append(c.Nodes, id)
			}
			c.Requests += int64(v[nRequests])
			c.Rejected += int64(v[nRejected])
			c.Errors5xx += int64(v[n5xx])
			h := hists[c]
			if h == nil {
				h = make([]int64, len(v)-nLatency)
				hists[c] = h
			}
			for i := range h {
				h[i] += int64(v[nLatency+i])
			}
		}
	}
	for _, c := range []*CohortFigures{canary, baseline} {
		if c.Requests > 0 {
			c.RejectRate = float64(c.Rejected) / float64(c.Requests)
			c.ErrorRate5xx = float64(c.Errors5xx) / float64(c.Requests)
		}
		c.P99Seconds = P99(sp.bounds, hists[c])
	}
	return canary, baseline
}

// Tick returns the StatsTick of step b (unix seconds / resolution) of ns:
// fleet-wide series and node figures with that step's point.
func (f *Fleet) Tick(ns string, b int64) *StatsTick {
	resSec := int64(f.s.Resolution / time.Second)
	t := &StatsTick{Namespace: ns, At: time.Unix(b*resSec, 0).UTC(), StepSeconds: resSec, Series: []*StatsSeries{}, Nodes: []*NodeStatsSeries{}}
	f.mu.RLock()
	defer f.mu.RUnlock()
	sp := f.spaces[ns]
	if sp == nil {
		return t
	}
	keys := make([]string, 0, len(sp.fleet))
	for k := range sp.fleet {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := sp.fleet[k].get(b)
		if v == nil {
			continue
		}
		p := make([]float64, 1+ruleN)
		p[0] = float64(b * resSec)
		for i := range ruleN {
			p[1+i] = float64(v[i])
		}
		t.Series = append(t.Series, &StatsSeries{Rule: k[len(sp.kinds[k])+1:], Kind: sp.kinds[k], Points: [][]float64{p}})
	}
	ids := make([]string, 0, len(sp.nodes))
	for id := range sp.nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if n := sp.nodes[id]; n.nodeVec != nil && n.nodeVec.get(b) != nil {
			t.Nodes = append(t.Nodes, &NodeStatsSeries{Node: id, Points: nodePoints(n.nodeVec, sp.bounds, b, b, resSec, resSec)})
		}
	}
	return t
}

// Namespaces lists the namespaces with reports.
func (f *Fleet) Namespaces() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]string, 0, len(f.spaces))
	for ns := range f.spaces {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

var _ StatsService = (*Fleet)(nil)

// NodeReport summarises a node's last report for the nodes list and the
// stream: rates over the interval since its previous report of the same
// boot.
type NodeReport struct {
	At           time.Time         `json:"at"`
	BootID       string            `json:"bootId"`
	Seq          int64             `json:"seq"`
	Version      int64             `json:"version"`
	RPS          float64           `json:"rps"`
	RejectRate   float64           `json:"rejectRate"`
	ErrorRate5xx float64           `json:"errorRate5xx"`
	P99Seconds   float64           `json:"p99Seconds"`
	Breakers     map[string]string `json:"breakers,omitempty"`
	Degrades     map[string]int    `json:"degrades,omitempty"`
}

// summarise is r's NodeReport against base (nil: no rates).
func summarise(r, base *api.Report) *NodeReport {
	s := &NodeReport{At: r.At, BootID: r.BootID, Seq: r.Seq, Version: r.Version}
	for _, b := range r.Breakers {
		if s.Breakers == nil {
			s.Breakers = map[string]string{}
		}
		s.Breakers[b.Rule] = b.State
	}
	for _, d := range r.Degrades {
		if s.Degrades == nil {
			s.Degrades = map[string]int{}
		}
		s.Degrades[d.Rule] = d.Level
	}
	if base == nil {
		return s
	}
	secs := r.At.Sub(base.At).Seconds()
	if base.At.IsZero() || secs <= 0 {
		secs = r.IntervalSeconds
	}
	total := r.Requests.Total - base.Requests.Total
	if total > 0 && secs > 0 {
		s.RPS = float64(total) / secs
		s.RejectRate = float64(r.Requests.Rejected-base.Requests.Rejected) / float64(total)
		s.ErrorRate5xx = float64(r.Requests.Class5xx-base.Requests.Class5xx) / float64(total)
	}
	if len(r.Latency.Counts) > 0 {
		per := make([]int64, len(r.Latency.Counts))
		for i, c := range r.Latency.Counts {
			d := c
			if i < len(base.Latency.Counts) {
				d -= base.Latency.Counts[i]
			}
			per[i] = d
		}
		for i := len(per) - 1; i > 0; i-- {
			per[i] -= per[i-1]
		}
		s.P99Seconds = P99(r.Latency.Bounds, per)
	}
	return s
}

// NodeSummary returns node's last report summarised, and whether its
// report key exists; nil when Fleet holds no report of it.
func (f *Fleet) NodeSummary(ns, node string) (*NodeReport, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if sp := f.spaces[ns]; sp != nil {
		if n := sp.nodes[node]; n != nil {
			return n.summary, !n.gone
		}
	}
	return nil, false
}

// LiveNodes lists the nodes of ns whose report key exists.
func (f *Fleet) LiveNodes(ns string) []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []string
	if sp := f.spaces[ns]; sp != nil {
		for id, n := range sp.nodes {
			if !n.gone {
				out = append(out, id)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Forget drops the nodes whose report key is gone and whose last report is
// older than the retention (their steps have all expired), so that a fleet
// whose nodes come and go (new ids per deployment) does not grow without
// bound. It returns how many it dropped.
func (f *Fleet) Forget() int {
	cutoff := f.s.Now().Add(-f.s.Retention)
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, sp := range f.spaces {
		for id, node := range sp.nodes {
			if node.gone && (node.last == nil || node.last.At.Before(cutoff)) {
				delete(sp.nodes, id)
				n++
			}
		}
	}
	return n
}
