package gateway

import (
	"github.com/sluicegw/sluice/dataplane/report"
)

// ReportState is what the node runs, for its reports (package report): the
// applied version, its rules and the last apply error. It reads the current
// snapshot; it is not on the request path. Safe for concurrent use.
func (n *Node) ReportState() report.State {
	var st report.State
	if s := n.current.Load(); s != nil {
		st.Version, st.Rules = s.Version, s.Rules
		if n.cfg.QuotaUsage != nil && s.Rules != nil {
			st.Quotas = n.cfg.QuotaUsage(s.Rules.Namespace, s.Rules)
		}
	}
	st.Preview = n.PreviewReport()
	n.statusMu.Lock()
	st.LastApplyError = n.lastApplyError
	n.statusMu.Unlock()
	return st
}
