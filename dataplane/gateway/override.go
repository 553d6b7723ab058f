package gateway

import (
	"errors"
	"math"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/api/buildinfo"
	"github.com/sluicegw/sluice/dataplane/degrade"
)

// ErrDrained is the readiness error while an operator override drains the node.
var ErrDrained = errors.New("drained by an operator override")

// ApplyOverride takes up an operator override for this node (from etcd):
// forced degrade levels by rule id, and drain, which fails /readyz so load
// balancers stop sending traffic while the node keeps serving what arrives.
// The zero Override clears everything. Levels for rules the applied rule set
// does not have are logged and skipped.
func (n *Node) ApplyOverride(ov api.Override) {
	n.ovMu.Lock()
	defer n.ovMu.Unlock()
	old := n.override
	n.override = ov
	n.drained.Store(ov.Drain)
	s := n.current.Load()
	if s == nil {
		return
	}
	s.Degrades().ApplyOperatorOverride(old, ov, n.log)
	n.log.Info("operator override applied", "drain", ov.Drain, "degradeLevels", ov.DegradeLevels, "by", ov.By, "reason", ov.Reason)
}

// applyLevelsLocked (re)sets the override's degrade levels on set (a new
// rule set's), renewing them (degrade.Set.ApplyOperatorOverride).
func (n *Node) applyLevelsLocked(set *degrade.Set) {
	set.ApplyOperatorOverride(api.Override{}, n.override, n.log)
}

// Override returns the operator override in force.
func (n *Node) Override() api.Override {
	n.ovMu.Lock()
	defer n.ovMu.Unlock()
	return n.override
}

// NodeStatus is the node's registration value: identity from the given
// template, applied version, last apply error, and last-minute traffic.
func (n *Node) NodeStatus(tmpl api.NodeStatus) api.NodeStatus {
	st := n.Status()
	tmpl.Build = buildinfo.Version
	tmpl.StartedAt = n.started
	tmpl.Version, tmpl.Checksum, tmpl.AppliedAt, tmpl.Source = st.Version, st.Checksum, st.AppliedAt, st.Source
	tmpl.LastApplyError = st.LastApplyError
	tmpl.Draining = n.draining.Load() || n.drained.Load()
	rps, reject, p99 := n.stats.lastMinute()
	tmpl.RPS, tmpl.RejectRate, tmpl.P99Seconds = round(rps, 1), round(reject, 3), round(p99, 4)
	return tmpl
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}
