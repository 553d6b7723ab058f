package sluice

import (
	"strings"
	"testing"

	"github.com/sluicegw/sluice/api"
)

func TestRedisWarning(t *testing.T) {
	t.Parallel()
	added := []api.Warning{{Code: api.WarnClusterLimitAdded, Path: "limits[shared].scope"}}
	node := func(id string, live bool, version int64, applyErr string) *Node {
		return &Node{NodeStatus: api.NodeStatus{NodeID: id, Version: version, LastApplyError: applyErr}, Live: live}
	}
	clusterVersion := func(v int64) bool { return v == 2 } // version 2 holds a cluster limit
	for _, tc := range []struct {
		desc  string
		ws    []api.Warning
		nodes []*Node
		want  string // part of the message; "" for no warning
	}{
		{desc: "no cluster limit added", nodes: []*Node{node("a", true, 1, "")}},
		{desc: "no live node", ws: added, nodes: []*Node{node("gone", false, 2, "")}, want: "no node of namespace shop is live"},
		{desc: "a node never ran a cluster limit", ws: added, nodes: []*Node{node("a", true, 2, ""), node("b", true, 1, "")}, want: "1 of 2 live nodes of namespace shop (b)"},
		{desc: "a node refused its version", ws: added, nodes: []*Node{node("a", true, 2, "a cluster limit needs --redis")}, want: "1 of 1 live nodes"},
		{desc: "every live node runs a cluster limit", ws: added, nodes: []*Node{node("a", true, 2, ""), node("gone", false, 1, "")}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			w := RedisWarning("shop", tc.ws, tc.nodes, clusterVersion)
			switch {
			case tc.want == "" && w != nil:
				t.Fatalf("unexpected %+v", w)
			case tc.want != "" && (w == nil || !strings.Contains(w.Message, tc.want) || w.Code != WarnClusterLimitWithoutRedis || w.Path != "limits[shared].scope"):
				t.Fatalf("warning %+v, want one saying %q", w, tc.want)
			}
		})
	}
}
