package sluice

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
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
// watched). A report counts only from a node with a live registration
// (Register) bound to the same lease as the report key; it is refused
// (counted by reason, never stored) when there is none or its lease
// differs, when its rules are not those of the version it names, when its
// counters went backwards within its boot, or when a counter grew faster
// than MaxNodeRPS over the time the report covers; the report's own checks
// (api.Report.Check) are the watcher's, before Ingest. Cohorts for canary
// analysis come from the registrations (labels and applied version), not
// from the reports' claims.
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
	// MaxNodeRPS is the fastest any counter of a report may grow, per
	// second of the time the report covers (see Ingest); zero means
	// api.DefaultMaxNodeRPS.
	MaxNodeRPS float64
	// Skew is how far ahead of the control plane's clock a node's may be
	// (api.DefaultReportSkew when zero): the time a report covers is at most
	// the time since the previous one was stored plus Skew.
	Skew time.Duration
}

// Refusal reasons, the label of the refused-reports metric.
const (
	RefusedInvalid      = "invalid"        // api.DecodeReport refused it (the watcher counts it)
	RefusedUnknownRules = "unknown_rules"  // rules its version does not hold
	RefusedBackwards    = "backwards"      // counters or sequence went backwards within a boot
	RefusedNoVersion    = "no_version"     // its version could not be read
	RefusedUnregistered = "unregistered"   // no live, valid registration of its node
	RefusedLease        = "lease_mismatch" // its key's lease is not its node's registration's
	RefusedImplausible  = "implausible"    // a counter grew faster than MaxNodeRPS, or an impossible quota usage
)

// Registration is what a Fleet knows of a node's live registration (the
// lease-bound key Keys.Node, valid per api.DecodeRegistration).
type Registration struct {
	// Lease is the registration key's lease; a report counts only when its
	// own key is bound to the same one.
	Lease int64
	// Labels and Version (the applied version) place the node in a canary
	// cohort or the baseline.
	Labels  map[string]string
	Version int64
}

// ReportKey is what etcd says of a report key: its create revision and
// lease.
type ReportKey struct {
	CreateRevision int64
	Lease          int64
}

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
	if s.MaxNodeRPS <= 0 {
		s.MaxNodeRPS = api.DefaultMaxNodeRPS
	}
	if s.Skew <= 0 {
		s.Skew = api.DefaultReportSkew
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
// number it holds. Counts are int64 (a fleet's sum over a step, or one
// node's first report after a long boot, may pass 2^31); the width n is
// fixed by the code (ruleN, nodeWidth), never by a report.
type ring struct {
	n     int
	epoch []int64
	vals  []int64
}

func newRing(slots, n int) *ring {
	r := &ring{n: n, epoch: make([]int64, slots), vals: make([]int64, slots*n)}
	for i := range r.epoch {
		r.epoch[i] = -1
	}
	return r
}

// at returns the vector of step b, clearing the slot when it held an older
// step.
func (r *ring) at(b int64) []int64 {
	i := int(b % int64(len(r.epoch)))
	v := r.vals[i*r.n : (i+1)*r.n]
	if r.epoch[i] != b {
		clear(v)
		r.epoch[i] = b
	}
	return v
}

// get returns the vector of step b, or nil when the ring does not hold it.
func (r *ring) get(b int64) []int64 {
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

// nodeWidth is a node vector's length: api.LatencyBounds fixes the
// histogram.
var nodeWidth = nLatency + len(api.LatencyBounds) + 1

// A variant vector is a rule vector, then the per-bucket (not cumulative)
// counts of the variant's latency histogram from vLatency on.
const vLatency = ruleN

var variantWidth = vLatency + len(api.LatencyBounds) + 1

// latencyDeltas adds to out (per-bucket, not cumulative) the requests the
// cumulative histogram now counts beyond before (nil or a shorter one:
// none before). now must hold len(out) counts (api.Report.Check fixed the
// bounds); otherwise nothing is added.
func latencyDeltas(out []int64, now, before []int64) {
	if len(now) != len(out) {
		return
	}
	at := func(c []int64, i int) int64 {
		if i < 0 || i >= len(c) {
			return 0
		}
		return c[i]
	}
	for i := range now {
		cum := now[i] - at(before, i)
		below := at(now, i-1) - at(before, i-1)
		out[i] += cum - below
	}
}

type fleetSpace struct {
	quotas map[quotaWindow]*quotaFold // quota usage of the windows not yet over
	nodes  map[string]*fleetNode
	fleet  map[string]*ring // rule key → fleet-wide sums
	kinds  map[string]string
	// variants are the limits' per-variant sums, fleet-wide
	// (variantKey → ring of variant vectors: allowed, rejected, shadow,
	// latency buckets).
	variants map[string]*ring
	total    *ring // fleet-wide node vector
	regs     map[string]Registration
}

type fleetNode struct {
	last      *api.Report
	stored    time.Time // when last was stored, by the Fleet's clock
	createRev int64
	nodeVec   *ring
	rules     map[string]*ring
	variants  map[string]*ring // variantKey → the node's per-variant sums
	gone      bool
	summary   *NodeReport
	labels    map[string]string // its registration's, when it last reported
}

// space returns ns's space, made on first use. f.mu is held.
func (f *Fleet) space(ns string) *fleetSpace {
	sp := f.spaces[ns]
	if sp == nil {
		sp = &fleetSpace{nodes: map[string]*fleetNode{}, fleet: map[string]*ring{}, kinds: map[string]string{}, variants: map[string]*ring{}, regs: map[string]Registration{}}
		f.spaces[ns] = sp
	}
	return sp
}

// Register records node's live, valid registration in ns (its lease,
// labels and applied version), replacing any before.
func (f *Fleet) Register(ns, node string, reg Registration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.space(ns).regs[node] = reg
}

// Unregister records that node's registration in ns ended, or is no longer
// valid: its reports are refused from now on.
func (f *Fleet) Unregister(ns, node string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if sp := f.spaces[ns]; sp != nil {
		delete(sp.regs, node)
	}
}

// SyncRegistrations replaces every registration of ns (a whole listing).
func (f *Fleet) SyncRegistrations(ns string, regs map[string]Registration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.space(ns).regs = maps2(regs)
}

func maps2(m map[string]Registration) map[string]Registration {
	out := make(map[string]Registration, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func ruleKey(kind, id string) string { return kind + "/" + id }

// variantKey names a limit's variant in the variant rings; "/" is in no
// id, so the key splits back (splitVariantKey).
func variantKey(rule, variant string) string { return rule + "/" + variant }

func splitVariantKey(k string) (rule, variant string) {
	rule, variant, _ = strings.Cut(k, "/")
	return rule, variant
}

// Ingest stores the deltas of report r of node r.NodeID in namespace ns,
// read from report key k, and returns the events it makes: node_joined for
// a new report key, degrade and breaker transitions, apply errors. Each
// event's Key identifies it so that every replica makes the same one. A
// duplicate (same boot and sequence as the last one stored) is ignored; a
// refused report returns a *RefusedError naming why (see Counts):
//
//   - RefusedUnregistered: the node has no live, valid registration;
//     RefusedLease: the report key's lease is not the registration's (a
//     key written by someone else than the node's registrar session);
//   - RefusedImplausible: a quota usage that cannot be one of its version's
//     (api.Report.CheckQuotas: unknown quota, a window not the calendar's,
//     a used count over the quota's rate plus burst); or a counter grew by
//     more than MaxNodeRPS times the
//     seconds the report covers: since the previous report of its boot (at
//     most the time since that one was stored, plus Skew), or, for a boot's
//     first counts, since the boot started (at most the Retention). A new
//     boot's implausible first report still becomes its baseline, so that
//     the boot's next reports count as deltas.
func (f *Fleet) Ingest(ctx context.Context, ns string, r *api.Report, k ReportKey) ([]*Event, error) {
	f.mu.RLock()
	var reg Registration
	registered := false
	if sp := f.spaces[ns]; sp != nil {
		reg, registered = sp.regs[r.NodeID]
	}
	f.mu.RUnlock()
	switch {
	case !registered:
		f.Refuse(RefusedUnregistered)
		return nil, &RefusedError{Reason: RefusedUnregistered, Err: fmt.Errorf("node %q of %s has no live, valid registration", r.NodeID, ns)}
	case reg.Lease != k.Lease:
		f.Refuse(RefusedLease)
		return nil, &RefusedError{Reason: RefusedLease, Err: fmt.Errorf("the report key of node %q of %s is bound to lease %x, its registration to lease %x", r.NodeID, ns, k.Lease, reg.Lease)}
	}
	rs, err := f.ruleSet(ctx, ns, r.Version)
	if err != nil {
		f.Refuse(RefusedNoVersion)
		return nil, &RefusedError{Reason: RefusedNoVersion, Err: err}
	}
	if err := r.CheckRules(rs); err != nil {
		f.Refuse(RefusedUnknownRules)
		return nil, &RefusedError{Reason: RefusedUnknownRules, Err: err}
	}
	if err := r.CheckQuotas(rs); err != nil {
		f.Refuse(RefusedImplausible)
		return nil, &RefusedError{Reason: RefusedImplausible, Err: err}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	sp := f.space(ns)
	if cur, ok := sp.regs[r.NodeID]; !ok || cur.Lease != k.Lease {
		// The registration ended or changed while the rules were read.
		f.refused[RefusedUnregistered]++
		return nil, &RefusedError{Reason: RefusedUnregistered, Err: fmt.Errorf("node %q of %s is no longer registered under the report's lease", r.NodeID, ns)}
	}
	n := sp.nodes[r.NodeID]
	if n == nil {
		n = &fleetNode{rules: map[string]*ring{}, variants: map[string]*ring{}}
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
	now := f.s.Now()
	base := prev
	var covered time.Duration // the time base to r covers
	switch {
	case prev != nil && prev.BootID == r.BootID:
		covered = min(r.At.Sub(prev.At), now.Sub(n.stored)+f.s.Skew)
	case r.Seq == 1 || !r.BootAt.IsZero() && !r.BootAt.Before(f.started):
		// A new boot counts from zero; so does the first report seen of a
		// boot that started after this Fleet did (its namespace was
		// followed late): every count of it is since then.
		base = &api.Report{}
		covered = 0
		if !r.BootAt.IsZero() {
			covered = min(r.At.Sub(r.BootAt), f.s.Retention)
		}
	default:
		base = nil // a boot already under way: its counts predate this watch
	}
	if base != nil {
		limit := f.s.MaxNodeRPS * max(covered.Seconds(), 1)
		if inc := r.MaxIncrease(base); float64(inc) > limit {
			err := &RefusedError{Reason: RefusedImplausible, Err: fmt.Errorf("report %d of node %q boot %s: a counter grew by %d in %s, over %g/s",
				r.Seq, r.NodeID, r.BootID, inc, max(covered, time.Second), f.s.MaxNodeRPS)}
			f.refused[RefusedImplausible]++
			if prev == nil || prev.BootID != r.BootID {
				n.last, n.stored = r, now // the baseline of the boot's next reports
			}
			return nil, err
		}
	}
	var evs []*Event
	if k.CreateRevision != n.createRev {
		evs = append(evs, &Event{Namespace: ns, At: r.At, Kind: EventNodeJoined, Node: r.NodeID, Version: reg.Version,
			Key: "node_joined/" + r.NodeID + "/" + strconv.FormatInt(k.CreateRevision, 10)})
		n.createRev = k.CreateRevision
	}
	n.gone = false
	n.labels = reg.Labels
	f.stored++
	f.foldQuotas(sp, rs, prev, r, now)
	n.last, n.stored = r, now
	n.summary = summarise(r, base)
	if base == nil {
		return evs, nil
	}
	at := r.At
	if at.Before(now.Add(-f.s.Retention)) {
		return evs, nil
	}
	step := at.Unix() / int64(f.s.Resolution/time.Second)
	f.storeDeltas(sp, n, step, base, r, reg.Version)
	return append(evs, transitionEvents(ns, base, r)...), nil
}

// storeDeltas adds r minus base to step b of the node's and the fleet's
// rings; version is the node's applied version by its registration.
func (f *Fleet) storeDeltas(sp *fleetSpace, n *fleetNode, b int64, base, r *api.Report, version int64) {
	if n.nodeVec == nil {
		n.nodeVec = newRing(f.slots, nodeWidth)
	}
	if sp.total == nil {
		sp.total = newRing(f.slots, nodeWidth)
	}
	nv, tv := n.nodeVec.at(b), sp.total.at(b)
	add := func(i int, d int64) {
		nv[i] += d
		tv[i] += d
	}
	q, p := r.Requests, base.Requests
	add(nRequests, q.Total-p.Total)
	add(nRejected, q.Rejected-p.Rejected)
	add(n2xx, q.Class2xx-p.Class2xx)
	add(n4xx, q.Class4xx-p.Class4xx)
	add(n5xx, q.Class5xx-p.Class5xx)
	nv[nVersion] = version
	lat := make([]int64, len(api.LatencyBounds)+1)
	latencyDeltas(lat, r.Latency.Counts, base.Latency.Counts)
	for i, d := range lat {
		add(nLatency+i, d)
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
			a[i] += v
			c[i] += v
		}
	}
	pl := map[string]api.LimitCounts{}
	for _, l := range base.Limits {
		pl[l.Rule] = l
	}
	for _, l := range r.Limits {
		o := pl[l.Rule]
		rule("limit", l.Rule, [ruleN]int64{rAllowed: l.Allowed - o.Allowed, rRejected: l.Rejected - o.Rejected, rShadow: l.ShadowRejected - o.ShadowRejected})
		pv := map[string]api.VariantCounts{}
		for _, v := range o.Variants {
			pv[v.Variant] = v
		}
		for _, v := range l.Variants {
			w := pv[v.Variant] // a variant new in r counts from zero
			k := variantKey(l.Rule, v.Variant)
			nr, fr := n.variants[k], sp.variants[k]
			if nr == nil {
				nr = newRing(f.slots, variantWidth)
				n.variants[k] = nr
			}
			if fr == nil {
				fr = newRing(f.slots, variantWidth)
				sp.variants[k] = fr
			}
			d := make([]int64, variantWidth)
			d[rAllowed], d[rRejected], d[rShadow] = v.Allowed-w.Allowed, v.Rejected-w.Rejected, v.ShadowRejected-w.ShadowRejected
			if v.Latency != nil {
				var before []int64
				if w.Latency != nil {
					before = w.Latency.Counts
				}
				latencyDeltas(d[vLatency:], v.Latency.Counts, before)
			}
			a, c := nr.at(b), fr.at(b)
			for i, x := range d {
				a[i] += x
				c[i] += x
			}
		}
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
		Columns: StatsColumns, NodeColumns: NodeStatsColumns, VariantColumns: VariantColumns, Series: []*StatsSeries{}, Nodes: []*NodeStatsSeries{}, Variants: []*VariantStatsSeries{}}
	f.mu.RLock()
	defer f.mu.RUnlock()
	sp := f.spaces[q.Namespace]
	if sp == nil {
		return out, nil
	}
	series := func(r *ring) [][]float64 { return rulePoints(r, false, from, to, resSec, stepSec) }
	keys := make([]string, 0, len(sp.fleet))
	for k := range sp.fleet {
		if q.Rule == "" || k[len(sp.kinds[k])+1:] == q.Rule {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	// variants lists the per-variant series of rings (the fleet's or a
	// node's) that q's rule keeps, by rule then variant.
	variants := func(rings map[string]*ring, node string) {
		vks := make([]string, 0, len(rings))
		for k := range rings {
			if rule, _ := splitVariantKey(k); q.Rule == "" || rule == q.Rule {
				vks = append(vks, k)
			}
		}
		sort.Strings(vks)
		for _, k := range vks {
			rule, variant := splitVariantKey(k)
			out.Variants = append(out.Variants, &VariantStatsSeries{Rule: rule, Variant: variant, Node: node,
				Points: rulePoints(rings[k], true, from, to, resSec, stepSec)})
		}
	}
	if q.Node == "" {
		for _, k := range keys {
			out.Series = append(out.Series, &StatsSeries{Rule: k[len(sp.kinds[k])+1:], Kind: sp.kinds[k], Points: series(sp.fleet[k])})
		}
		variants(sp.variants, "")
		if sp.total != nil {
			out.Nodes = append(out.Nodes, &NodeStatsSeries{Node: "", Points: nodePoints(sp.total, api.LatencyBounds, from, to, resSec, stepSec)})
		}
		return out, nil
	}
	n := sp.nodes[q.Node]
	if n == nil {
		return out, nil
	}
	for _, k := range keys {
		if r := n.rules[k]; r != nil {
			out.Series = append(out.Series, &StatsSeries{Rule: k[len(sp.kinds[k])+1:], Kind: sp.kinds[k], Node: q.Node, Points: series(r)})
		}
	}
	variants(n.variants, q.Node)
	if n.nodeVec != nil {
		out.Nodes = append(out.Nodes, &NodeStatsSeries{Node: q.Node, Points: nodePoints(n.nodeVec, api.LatencyBounds, from, to, resSec, stepSec)})
	}
	return out, nil
}

// rulePoints sums a rule ring's steps into points of StatsColumns; with
// p99, a variant ring's into points of VariantColumns (the p99 of the
// latency its steps counted last).
func rulePoints(r *ring, p99 bool, from, to, resSec, stepSec int64) [][]float64 {
	pts := [][]float64{}
	var cur []float64
	var hist []int64
	flush := func() {
		if cur != nil && p99 {
			cur[1+ruleN] = P99(api.LatencyBounds, hist)
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
			if p99 {
				cur = make([]float64, 2+ruleN)
				hist = make([]int64, len(v)-vLatency)
			} else {
				cur = make([]float64, 1+ruleN)
			}
			cur[0] = float64(t)
			pts = append(pts, cur)
		}
		for i := range ruleN {
			cur[1+i] += float64(v[i])
		}
		for i := range hist {
			hist[i] += v[vLatency+i]
		}
	}
	flush()
	return pts
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

// CohortSide is where a canary comparison places a node.
type CohortSide int

// The sides of a canary comparison.
const (
	SideNeither  CohortSide = iota // in no cohort (a canary node not yet on its version, ...)
	SideCanary                     // a canary node running the canary's version
	SideBaseline                   // a node outside the canary running another version
)

// Cohort gathers, over the steps [from, to) (unix seconds), the figures of
// the nodes of ns by side(node, labels, version): labels are the node's
// registration's, version the applied version its registration gave in that
// step (never a report's own claim). A step in which a node's version
// changed (it differs from the node's previous step) counts in neither: its
// counts, taken since the node's previous report, mix traffic served under
// both versions (a canary's first step would carry the rejections of the
// version it replaced).
//
// Requests, Rejected and Errors5xx are sums over the cohort's nodes; the
// rates and the p99 are robust: RejectRate and ErrorRate5xx are the median
// of the per-node rates of the nodes that served at least one request in
// the window, P99Seconds the median of their per-node p99s, so that one
// node (or fewer than half of a cohort) cannot move a cohort's figure past
// the honest nodes' range, whatever it claims.
func (f *Fleet) Cohort(ns string, from, to time.Time, side func(node string, labels map[string]string, version int64) CohortSide) (canary, baseline *CohortFigures) {
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
	type perNode struct {
		requests, rejected, errors int64
		hist                       []int64
	}
	nodes := map[*CohortFigures][]*perNode{}
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
		mine := map[*CohortFigures]*perNode{}
		for b := bFrom; b < bTo; b++ {
			v := n.nodeVec.get(b)
			if v == nil {
				continue
			}
			if p := n.nodeVec.get(b - 1); p != nil && p[nVersion] != v[nVersion] {
				continue // the node switched versions in this step
			}
			var c *CohortFigures
			switch side(id, n.labels, v[nVersion]) {
			case SideCanary:
				c = canary
			case SideBaseline:
				c = baseline
			default:
				continue
			}
			pn := mine[c]
			if pn == nil {
				pn = &perNode{hist: make([]int64, len(v)-nLatency)}
				mine[c] = pn
				c.Nodes = append(c.Nodes, id)
				nodes[c] = append(nodes[c], pn)
			}
			pn.requests += v[nRequests]
			pn.rejected += v[nRejected]
			pn.errors += v[n5xx]
			for i := range pn.hist {
				pn.hist[i] += v[nLatency+i]
			}
		}
	}
	for _, c := range []*CohortFigures{canary, baseline} {
		var rej, errs, p99 []float64
		for _, pn := range nodes[c] {
			c.Requests += pn.requests
			c.Rejected += pn.rejected
			c.Errors5xx += pn.errors
			if pn.requests > 0 {
				rej = append(rej, float64(pn.rejected)/float64(pn.requests))
				errs = append(errs, float64(pn.errors)/float64(pn.requests))
			}
			if slices.ContainsFunc(pn.hist, func(x int64) bool { return x > 0 }) {
				p99 = append(p99, P99(api.LatencyBounds, pn.hist))
			}
		}
		c.RejectRate, c.ErrorRate5xx, c.P99Seconds = median(rej), median(errs), median(p99)
	}
	return canary, baseline
}

// median is the middle value of xs (the mean of the two middle ones for an
// even count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	m := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[m]
	}
	return (xs[m-1] + xs[m]) / 2
}

// Tick returns the StatsTick of step b (unix seconds / resolution) of ns:
// fleet-wide series and node figures with that step's point.
func (f *Fleet) Tick(ns string, b int64) *StatsTick {
	resSec := int64(f.s.Resolution / time.Second)
	t := &StatsTick{Namespace: ns, At: time.Unix(b*resSec, 0).UTC(), StepSeconds: resSec, Series: []*StatsSeries{}, Nodes: []*NodeStatsSeries{}, Variants: []*VariantStatsSeries{}}
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
		if p := tickPoint(sp.fleet[k], false, b, resSec); p != nil {
			t.Series = append(t.Series, &StatsSeries{Rule: k[len(sp.kinds[k])+1:], Kind: sp.kinds[k], Points: [][]float64{p}})
		}
	}
	vks := make([]string, 0, len(sp.variants))
	for k := range sp.variants {
		vks = append(vks, k)
	}
	sort.Strings(vks)
	for _, k := range vks {
		if p := tickPoint(sp.variants[k], true, b, resSec); p != nil {
			rule, variant := splitVariantKey(k)
			t.Variants = append(t.Variants, &VariantStatsSeries{Rule: rule, Variant: variant, Points: [][]float64{p}})
		}
	}
	ids := make([]string, 0, len(sp.nodes))
	for id := range sp.nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if n := sp.nodes[id]; n.nodeVec != nil && n.nodeVec.get(b) != nil {
			t.Nodes = append(t.Nodes, &NodeStatsSeries{Node: id, Points: nodePoints(n.nodeVec, api.LatencyBounds, b, b, resSec, resSec)})
		}
	}
	return t
}

// tickPoint is r's point of step b as rulePoints makes it (StatsColumns;
// VariantColumns with p99), or nil when r has none.
func tickPoint(r *ring, p99 bool, b, resSec int64) []float64 {
	if r.get(b) == nil {
		return nil
	}
	return rulePoints(r, p99, b, b, resSec, resSec)[0]
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

// quotaWindow names one quota's (or tier's) window.
type quotaWindow struct {
	rule, tier string
	start      int64 // Unix nanoseconds
}

// quotaFold is the fleet's usage of one quota window: the highest MaxUsed
// any report carried, and the OverHalf of every boot summed (each node's
// crossings are its own: one Redis reply each).
type quotaFold struct {
	start    time.Time
	end      time.Time
	maxUsed  int64
	overHalf int64
}

// MaxQuotaWindows bounds the quota windows a Fleet keeps per namespace; a
// report's usage of a window past it is not kept (its counts still are).
const MaxQuotaWindows = 4096

// foldQuotas adds report r's quota usage (checked against rs, its
// version) to ns's folds: MaxUsed by maximum, OverHalf by what it grew
// since prev, the node's previous report of the same boot and window (all
// of it for a new boot or window; a count lower than prev's, which a rule
// swap that changed the window back can make, counts whole). f.mu is held.
func (f *Fleet) foldQuotas(sp *fleetSpace, rs *api.RuleSet, prev, r *api.Report, now time.Time) {
	if len(r.Quotas) == 0 {
		return
	}
	was := map[quotaWindow]int64{}
	if prev != nil && prev.BootID == r.BootID {
		for _, u := range prev.Quotas {
			was[quotaWindow{u.Rule, u.Tier, u.WindowStart.UnixNano()}] = u.OverHalf
		}
	}
	if sp.quotas == nil {
		sp.quotas = map[quotaWindow]*quotaFold{}
	}
	for _, u := range r.Quotas {
		k := quotaWindow{u.Rule, u.Tier, u.WindowStart.UnixNano()}
		q := sp.quotas[k]
		if q == nil {
			l, err := rs.QuotaLimit(u.Rule, u.Tier)
			if err != nil {
				continue // CheckQuotas refused it already
			}
			_, end, _ := l.QuotaWindow(u.WindowStart)
			if !end.After(now) || len(sp.quotas) >= MaxQuotaWindows {
				continue
			}
			q = &quotaFold{start: u.WindowStart, end: end}
			sp.quotas[k] = q
		}
		q.maxUsed = max(q.maxUsed, u.MaxUsed)
		grew := u.OverHalf
		if p, ok := was[k]; ok && p <= u.OverHalf {
			grew -= p
		}
		q.overHalf += grew
	}
}

// QuotaUsage returns what the nodes of ns reported of their quotas' usage,
// folded over nodes and boots (api.QuotaUsage: the highest MaxUsed, the
// summed OverHalf), for the windows not over at now; the input of
// api.WarningsIn. Sorted by rule, tier and window.
func (f *Fleet) QuotaUsage(ns string, now time.Time) []api.QuotaUsage {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []api.QuotaUsage
	if sp := f.spaces[ns]; sp != nil {
		for k, q := range sp.quotas {
			if q.end.After(now) {
				out = append(out, api.QuotaUsage{Rule: k.rule, Tier: k.tier, WindowStart: q.start, MaxUsed: q.maxUsed, OverHalf: q.overHalf})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Rule != b.Rule {
			return a.Rule < b.Rule
		}
		if a.Tier != b.Tier {
			return a.Tier < b.Tier
		}
		return a.WindowStart.Before(b.WindowStart)
	})
	return out
}

// Forget drops the nodes whose report key is gone and whose last report is
// older than the retention (their steps have all expired), so that a fleet
// whose nodes come and go (new ids per deployment) does not grow without
// bound, and the quota windows that are over. It returns how many nodes it
// dropped.
func (f *Fleet) Forget() int {
	cutoff := f.s.Now().Add(-f.s.Retention)
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	now := f.s.Now()
	for _, sp := range f.spaces {
		for k, q := range sp.quotas {
			if !q.end.After(now) {
				delete(sp.quotas, k)
			}
		}
		for id, node := range sp.nodes {
			if node.gone && (node.last == nil || node.last.At.Before(cutoff)) {
				delete(sp.nodes, id)
				n++
			}
		}
	}
	return n
}
