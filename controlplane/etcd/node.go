package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

// NodeService implements sluice.NodeService over etcd (live registrations,
// overrides, the published and canary rule sets) and the node history kept
// in Postgres by the NodeWatcher. Set Client, History and Audit; other zero
// values have the meaning documented on each field. Safe for concurrent use.
//
// Only what a node really holds is shown: a registration is live only when
// it is bound to a lease (a node's registrar always binds it; a key written
// without one is not a node), and an override is shown only on a listed
// node, while it has not expired and, with a Signer, when it is validly
// signed.
type NodeService struct {
	Client  *clientv3.Client
	Keys    api.Keys
	History sluice.NodeHistory
	Audit   sluice.AuditService
	// Retention is how long gone nodes are listed; zero means 24h.
	Retention time.Duration
	// MaxOverrideTTL bounds an override's lifetime; zero means 30 days.
	MaxOverrideTTL time.Duration
	// Timeout bounds each etcd call; zero means 5s.
	Timeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Signer signs the overrides written, and its keys verify what is read
	// back (overrides, and the rule sets whose degrade rules an override
	// may name); nil writes and reads unsigned values.
	Signer *api.Signer
	// Reports, when set, adds each node's last report to the list.
	Reports interface {
		NodeSummary(ns, node string) (*sluice.NodeReport, bool)
	}
}

var _ sluice.NodeService = (*NodeService)(nil)

func (n *NodeService) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	if n.Timeout == 0 {
		return context.WithTimeout(ctx, 5*time.Second)
	}
	return context.WithTimeout(ctx, n.Timeout)
}

func (n *NodeService) now() time.Time {
	if n.Now == nil {
		return time.Now().UTC()
	}
	return n.Now().UTC()
}

func (n *NodeService) logger() *slog.Logger {
	if n.Logger == nil {
		return slog.Default()
	}
	return n.Logger
}

func (n *NodeService) unavailable(op string, err error) error {
	n.logger().Warn("etcd: "+op, "err", err)
	return sluice.Errorf(sluice.EUNAVAILABLE, "etcd is unavailable")
}

// liveNodes reads ns's registrations and overrides at one revision.
// Registrations that do not decode are skipped.
func (n *NodeService) liveNodes(ctx context.Context, ns string) (map[string]api.NodeStatus, map[string]api.Override, error) {
	ctx, cancel := n.ctx(ctx)
	defer cancel()
	resp, err := n.Client.Txn(ctx).Then(clientv3.OpGet(n.Keys.Nodes(ns), clientv3.WithPrefix()),
		clientv3.OpGet(n.Keys.Overrides(ns), clientv3.WithPrefix())).Commit()
	if err != nil {
		return nil, nil, n.unavailable("reading nodes", err)
	}
	nodes := map[string]api.NodeStatus{}
	prefix := n.Keys.Nodes(ns)
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		if s, ok := decodeNode(prefix, kv); ok {
			nodes[s.NodeID] = s
		}
	}
	overrides := map[string]api.Override{}
	prefix = n.Keys.Overrides(ns)
	now := n.now()
	v := n.verifier()
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		payload, _, err := v.Open(string(kv.Key), kv.Value)
		if err != nil {
			n.logger().Warn("etcd holds an override not signed by this control plane; not shown", "key", string(kv.Key), "err", err)
			continue
		}
		o, err := api.DecodeOverride(payload)
		if err != nil {
			n.logger().Warn("etcd holds an override the node refuses; not shown", "key", string(kv.Key), "err", err)
			continue
		}
		if o.Expires == nil || o.Expires.After(now) {
			o.Revision = kv.ModRevision
			overrides[strings.TrimPrefix(string(kv.Key), prefix)] = o
		}
	}
	return nodes, overrides, nil
}

// verifier checks values read back; nil (no Signer) accepts unsigned ones.
func (n *NodeService) verifier() *api.Verifier {
	if n.Signer == nil {
		return nil
	}
	return n.Signer.Verifier()
}

// FindNodes lists the live nodes from etcd and the gone ones from the
// history, by node id. A node the history still thinks live but etcd no
// longer holds is listed gone.
func (n *NodeService) FindNodes(ctx context.Context, f sluice.NodeFilter) ([]*sluice.Node, error) {
	live, overrides, err := n.liveNodes(ctx, f.Namespace)
	if err != nil {
		return nil, err
	}
	now := n.now()
	since := f.GoneSince
	if since.IsZero() {
		since = now.Add(-n.retention())
	}
	var recs []*sluice.NodeRecord
	if n.History != nil {
		if recs, err = n.History.FindNodeRecords(ctx, f.Namespace, since); err != nil {
			return nil, err
		}
	}
	out := []*sluice.Node{}
	seen := map[string]*sluice.NodeRecord{}
	for _, r := range recs {
		seen[r.Status.NodeID] = r
	}
	for id, s := range live {
		node := &sluice.Node{NodeStatus: s, Live: true, LastSeen: now, FirstSeen: now}
		if r, ok := seen[id]; ok {
			node.FirstSeen = r.FirstSeen
		}
		out = append(out, node)
	}
	for id, r := range seen {
		if _, ok := live[id]; ok || r.LastSeen.Before(since) {
			continue
		}
		out = append(out, &sluice.Node{NodeStatus: r.Status, FirstSeen: r.FirstSeen, LastSeen: r.LastSeen})
	}
	for _, node := range out {
		if o, ok := overrides[node.NodeID]; ok {
			node.Override = &o
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	n.addVersions(ctx, f.Namespace, out)
	return out, nil
}

func (n *NodeService) retention() time.Duration {
	if n.Retention == 0 {
		return 24 * time.Hour
	}
	return n.Retention
}

// FindRollout reports which nodes applied version v and how long after its
// first write to etcd, and which live nodes have not.
func (n *NodeService) FindRollout(ctx context.Context, ns string, v int64) (*sluice.Rollout, error) {
	if n.History == nil {
		return nil, sluice.Errorf(sluice.EUNAVAILABLE, "the node history is not configured")
	}
	r, err := n.History.FindRollout(ctx, ns, v)
	if err != nil {
		return nil, err
	}
	live, _, err := n.liveNodes(ctx, ns)
	if err != nil {
		return nil, err
	}
	applied := map[string]bool{}
	for _, a := range r.Applied {
		applied[a.NodeID] = true
		if s, ok := live[a.NodeID]; ok {
			a.Live, a.Current = true, s.Version == v
		}
	}
	for id, s := range live {
		if !applied[id] {
			r.Waiting = append(r.Waiting, &sluice.NodeWaiting{NodeID: id, Version: s.Version, LastApplyError: s.LastApplyError})
		}
	}
	sort.Slice(r.Waiting, func(i, j int) bool { return r.Waiting[i].NodeID < r.Waiting[j].NodeID })
	return r, nil
}

// degradeRules reads the ids of the degrade rules of ns's published version
// and of its canary version, if any; ok is false when neither exists.
func (n *NodeService) degradeRules(ctx context.Context, ns string) (ids map[string]bool, ok bool, err error) {
	ctx, cancel := n.ctx(ctx)
	defer cancel()
	resp, err := n.Client.Txn(ctx).Then(clientv3.OpGet(n.Keys.RuleSet(ns)), clientv3.OpGet(n.Keys.Canary(ns))).Commit()
	if err != nil {
		return nil, false, n.unavailable("reading the published rule set", err)
	}
	type doc struct {
		Rules struct {
			Degrades []struct {
				ID string `json:"id"`
			} `json:"degrades"`
		} `json:"rules"`
	}
	ids = map[string]bool{}
	add := func(d doc) {
		ok = true
		for _, r := range d.Rules.Degrades {
			ids[r.ID] = true
		}
	}
	v := n.verifier()
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
		var d doc
		if payload, _, err := v.Open(string(kvs[0].Key), kvs[0].Value); err == nil && json.Unmarshal(payload, &d) == nil {
			add(d)
		}
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 1 {
		var c api.Canary
		var d doc
		if payload, _, err := v.Open(string(kvs[0].Key), kvs[0].Value); err == nil && json.Unmarshal(payload, &c) == nil && json.Unmarshal(c.Published, &d) == nil {
			add(d)
		}
	}
	return ids, ok, nil
}

// PutOverride validates upd against the published (and canary) rules and
// writes it, then audits the write.
func (n *NodeService) PutOverride(ctx context.Context, ns, nodeID string, upd sluice.OverrideUpdate) (*api.Override, error) {
	actor := sluice.ActorFromContext(ctx)
	if !actor.Role.Allows(sluice.RoleApprover) {
		return nil, sluice.Errorf(sluice.EFORBIDDEN, "only approvers and admins override nodes")
	}
	now := n.now()
	maxTTL := n.MaxOverrideTTL
	if maxTTL == 0 {
		maxTTL = 30 * 24 * time.Hour
	}
	var fields api.Errors
	bad := func(path, msg string) { fields = append(fields, api.FieldError{Path: path, Message: msg}) }
	if !api.ValidNodeID(nodeID) {
		bad("id", api.NodeIDRule)
	}
	if len(upd.DegradeLevels) == 0 && !upd.Drain {
		bad("degradeLevels", "an override must force a degrade level or drain the node; DELETE clears it")
	}
	o := api.Override{DegradeLevels: upd.DegradeLevels, Drain: upd.Drain, By: actor.Name(), Reason: strings.TrimSpace(upd.Reason)}
	switch {
	case upd.TTL != 0 && upd.Expires != nil:
		bad("ttl", "give ttl or expires, not both")
	case upd.TTL < 0 || upd.TTL > maxTTL:
		bad("ttl", fmt.Sprintf("must be positive and at most %s", maxTTL))
	case upd.TTL > 0:
		o.Expires = ptr(now.Add(upd.TTL))
	case upd.Expires != nil && !upd.Expires.After(now):
		bad("expires", "must be in the future")
	case upd.Expires != nil && upd.Expires.Sub(now) > maxTTL:
		bad("expires", fmt.Sprintf("must be at most %s away", maxTTL))
	case upd.Expires != nil:
		o.Expires = ptr(upd.Expires.UTC())
	}
	if utf8.RuneCountInString(o.Reason) > 1000 {
		bad("reason", "must be at most 1000 characters")
	}
	fields = append(fields, o.Validate()...)
	ids := slices.Sorted(maps.Keys(upd.DegradeLevels))
	if len(fields) == 0 && len(ids) > 0 {
		known, any, err := n.degradeRules(ctx, ns)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			switch {
			case !any:
				bad("degradeLevels."+id, fmt.Sprintf("namespace %q has no published version", ns))
			case !known[id]:
				bad("degradeLevels."+id, "no degrade rule has this id in the published (or canary) version")
			}
		}
	}
	if len(fields) > 0 {
		sort.SliceStable(fields, func(i, j int) bool { return fields[i].Path < fields[j].Path })
		return nil, &sluice.Error{Code: sluice.EINVALID, Message: "invalid override", Fields: fields}
	}
	b, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("encoding override: %w", err)
	}
	key := n.Keys.Override(ns, nodeID)
	value := b
	if n.Signer != nil {
		if value, err = n.Signer.Sign(key, b); err != nil {
			return nil, fmt.Errorf("signing override: %w", err)
		}
	}
	cctx, cancel := n.ctx(ctx)
	defer cancel()
	resp, err := n.Client.Put(cctx, key, string(value), clientv3.WithPrevKV())
	if err != nil {
		return nil, n.unavailable("writing override", err)
	}
	o.Revision = resp.Header.Revision
	var before json.RawMessage
	if resp.PrevKv != nil {
		before = n.auditValue(resp.PrevKv.Key, resp.PrevKv.Value)
	}
	if err := n.audit(ctx, sluice.ActionNodeOverride, ns, nodeID, before, b); err != nil {
		return nil, err
	}
	return &o, nil
}

// DeleteOverride removes a node's override and audits it.
func (n *NodeService) DeleteOverride(ctx context.Context, ns, nodeID string) error {
	if !sluice.ActorFromContext(ctx).Role.Allows(sluice.RoleApprover) {
		return sluice.Errorf(sluice.EFORBIDDEN, "only approvers and admins override nodes")
	}
	if !api.ValidNodeID(nodeID) {
		return &sluice.Error{Code: sluice.EINVALID, Message: "invalid node id", Fields: api.Errors{{Path: "id", Message: api.NodeIDRule}}}
	}
	cctx, cancel := n.ctx(ctx)
	defer cancel()
	resp, err := n.Client.Delete(cctx, n.Keys.Override(ns, nodeID), clientv3.WithPrevKV())
	if err != nil {
		return n.unavailable("deleting override", err)
	}
	if resp.Deleted == 0 {
		return sluice.Errorf(sluice.ENOTFOUND, "node %q of namespace %q has no override", nodeID, ns)
	}
	return n.audit(ctx, sluice.ActionNodeOverrideDel, ns, nodeID, n.auditValue(resp.PrevKvs[0].Key, resp.PrevKvs[0].Value), nil)
}

// auditValue is an override value as the audit log records it: the
// override itself (the payload of a signed envelope), or the value as
// found, verbatim, when it is not validly signed.
func (n *NodeService) auditValue(key, value []byte) json.RawMessage {
	if payload, _, err := n.verifier().Open(string(key), value); err == nil && json.Valid(payload) {
		return payload
	}
	if json.Valid(value) {
		return value
	}
	b, _ := json.Marshal(map[string]string{"invalid": string(value)})
	return b
}

// audit records an override's write after it happened in etcd. When the
// audit log cannot be written the error is returned (and logged): the
// operator sees the write as failed and may repeat it, which audits it.
func (n *NodeService) audit(ctx context.Context, action, ns, nodeID string, before, after json.RawMessage) error {
	err := n.Audit.RecordAuditEvent(ctx, &sluice.AuditEvent{Action: action, Object: "namespace/" + ns + "/node/" + nodeID,
		Namespace: ns, Before: before, After: after})
	if err != nil {
		n.logger().Error("override written to etcd but not audited", "namespace", ns, "node", nodeID, "action", action, "err", err)
	}
	return err
}

func ptr[T any](v T) *T { return &v }
