package etcd

import (
	"context"
	"encoding/json"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

// addVersions sets each node's PublishedVersion, CanaryVersion and
// VersionState from the namespace's ruleset and canary keys, and its
// Report from Reports. A key it cannot read or verify leaves the fields
// empty: the list is still worth showing.
func (n *NodeService) addVersions(ctx context.Context, ns string, nodes []*sluice.Node) {
	if n.Reports != nil {
		for _, node := range nodes {
			node.Report, _ = n.Reports.NodeSummary(ns, node.NodeID)
		}
	}
	cctx, cancel := n.ctx(ctx)
	defer cancel()
	resp, err := n.Client.Txn(cctx).Then(clientv3.OpGet(n.Keys.RuleSet(ns)), clientv3.OpGet(n.Keys.Canary(ns))).Commit()
	if err != nil {
		return
	}
	v := n.verifier()
	var published int64
	var canary struct {
		Version  int64        `json:"version"`
		Selector api.Selector `json:"selector"`
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
		if payload, _, err := v.Open(string(kvs[0].Key), kvs[0].Value); err == nil {
			var head struct {
				Version int64 `json:"version"`
			}
			if json.Unmarshal(payload, &head) == nil {
				published = head.Version
			}
		}
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 1 {
		if payload, _, err := v.Open(string(kvs[0].Key), kvs[0].Value); err == nil {
			_ = json.Unmarshal(payload, &canary)
		}
	}
	for _, node := range nodes {
		node.PublishedVersion = published
		want := published
		if canary.Version > published && canary.Selector.Matches(node.Labels) {
			node.CanaryVersion, want = canary.Version, canary.Version
		}
		switch {
		case published == 0:
		case node.Version == want && node.CanaryVersion != 0:
			node.VersionState = "canary"
		case node.Version == want:
			node.VersionState = "current"
		case node.Version < want:
			node.VersionState = "behind"
		default:
			node.VersionState = "ahead"
		}
	}
}
