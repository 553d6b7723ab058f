package etcd

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

// PreviewService implements sluice.PreviewService: it signs and writes the
// namespace's preview value (api.Keys.Preview) for the nodes to run, and
// sums what their reports say of it. Set Client, Changes, Audit and Fleet;
// the other zero values have the meaning documented on each field. Safe for
// concurrent use.
type PreviewService struct {
	Client  *clientv3.Client
	Keys    api.Keys
	Changes sluice.ChangeDocuments
	Audit   sluice.AuditService
	// Fleet holds the nodes' last reports (the report watcher's Fleet).
	Fleet interface {
		LiveNodes(ns string) []string
		LastReport(ns, node string) (*api.Report, bool)
	}
	// Results keeps a preview's figures when it stops (DELETE, expiry,
	// its change ended or edited), for FindPreview afterwards; nil keeps
	// none (FindPreview then answers ENOTFOUND once the value is gone).
	Results sluice.PreviewResults
	// Signer signs the values written (the rule sets' key); nil writes
	// unsigned values, which nodes with --trust-keys refuse.
	Signer *api.Signer
	// Timeout bounds each etcd call; zero means 5s.
	Timeout time.Duration
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger

	mu sync.Mutex
	// seen is, by namespace, the last figures aggregated from at least one
	// node's report: a preview that expired has left the nodes' reports by
	// the time the sweep notices, so its kept figures are these.
	seen map[string]*sluice.Preview
}

var _ sluice.PreviewService = (*PreviewService)(nil)

func (p *PreviewService) now() time.Time {
	if p.Now == nil {
		return time.Now().UTC()
	}
	return p.Now().UTC()
}

func (p *PreviewService) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, cmp.Or(p.Timeout, 5*time.Second))
}

// current reads the namespace's preview value: the value, its payload
// (nil when absent or unreadable) and its mod revision (0: absent).
func (p *PreviewService) current(ctx context.Context, ns string) (*api.Preview, int64, error) {
	key := p.Keys.Preview(ns)
	cctx, cancel := p.ctx(ctx)
	defer cancel()
	res, err := p.Client.Get(cctx, key)
	if err != nil {
		return nil, 0, sluice.Errorf(sluice.EUNAVAILABLE, "reading the preview from etcd: %v", err)
	}
	if len(res.Kvs) == 0 {
		return nil, 0, nil
	}
	kv := res.Kvs[0]
	payload := kv.Value
	if p.Signer != nil {
		if payload, _, err = p.Signer.Verifier().Open(key, kv.Value); err != nil {
			return nil, kv.ModRevision, nil // not ours: a node refuses it too
		}
	}
	var pv api.Preview
	if json.Unmarshal(payload, &pv) != nil {
		return nil, kv.ModRevision, nil
	}
	return &pv, kv.ModRevision, nil
}

// StartPreview previews change on the namespace's nodes for spec.Duration.
// A running preview of the same change is replaced (a new duration or
// selector); one of another change is ECONFLICT until it ends.
func (p *PreviewService) StartPreview(ctx context.Context, ns string, change int64, spec sluice.PreviewSpec) (*sluice.Preview, error) {
	actor := sluice.ActorFromContext(ctx)
	if !actor.Role.Allows(sluice.RoleEditor) {
		return nil, sluice.Errorf(sluice.EFORBIDDEN, "only editors and up preview changes")
	}
	var fields api.Errors
	if spec.Duration <= 0 || spec.Duration > api.MaxPreviewDuration {
		fields = append(fields, api.FieldError{Path: "duration", Message: fmt.Sprintf("must be positive and at most %s", api.MaxPreviewDuration)})
	}
	if len(spec.Selector) > 0 {
		for _, e := range api.ValidateSelector(spec.Selector) {
			e.Path = "selector" + strings.TrimPrefix(e.Path, "canary.selector")
			fields = append(fields, e)
		}
	}
	if len(fields) > 0 {
		return nil, &sluice.Error{Code: sluice.EINVALID, Message: "invalid preview", Fields: fields}
	}
	doc, checksum, state, err := p.Changes.ChangeDocument(ctx, ns, change)
	if err != nil {
		return nil, err
	}
	if state != sluice.ChangeOpen && state != sluice.ChangeApproved {
		return nil, sluice.Errorf(sluice.ECONFLICT, "change %d is %s: only an open or approved change is previewed", change, state)
	}
	now := p.now()
	pv := api.Preview{Change: strconv.FormatInt(change, 10), Checksum: checksum, Rules: json.RawMessage(doc),
		Until: now.Add(spec.Duration), Selector: spec.Selector, Since: now, By: actor.Name()}
	if _, _, err := api.DecodePreview(mustJSON(pv)); err != nil {
		return nil, sluice.Errorf(sluice.EINVALID, "change %d cannot be previewed: %v", change, err)
	}
	cur, rev, err := p.current(ctx, ns)
	if err != nil {
		return nil, err
	}
	if cur != nil && cur.Change != pv.Change && cur.Until.After(now) {
		return nil, sluice.Errorf(sluice.ECONFLICT, "change %s of namespace %q is being previewed until %s; stop it first", cur.Change, ns, cur.Until.Format(time.RFC3339))
	}
	if cur != nil && cur.Change != pv.Change {
		// Another change's preview expired and the sweep has not kept its
		// figures yet: keep them before the value is replaced.
		if err := p.keep(ctx, ns, cur, sluice.PreviewEndExpired); err != nil {
			return nil, err
		}
	}
	b := mustJSON(pv)
	key := p.Keys.Preview(ns)
	value := b
	if p.Signer != nil {
		if value, err = p.Signer.Sign(key, b); err != nil {
			return nil, fmt.Errorf("signing preview: %w", err)
		}
	}
	cctx, cancel := p.ctx(ctx)
	defer cancel()
	res, err := p.Client.Txn(cctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, string(value))).Commit()
	if err != nil {
		return nil, sluice.Errorf(sluice.EUNAVAILABLE, "writing the preview to etcd: %v", err)
	}
	if !res.Succeeded {
		return nil, sluice.Errorf(sluice.ECONFLICT, "the namespace's preview changed meanwhile; try again")
	}
	var before json.RawMessage
	if cur != nil {
		before = mustJSON(summary(cur))
	}
	if err := p.audit(ctx, sluice.ActionPreviewStart, ns, change, before, mustJSON(summary(&pv))); err != nil {
		return nil, err
	}
	return p.aggregate(ns, change, &pv, now), nil
}

// summary is a preview value as the audit log records it: without its rules
// (the change holds them).
func summary(pv *api.Preview) map[string]any {
	return map[string]any{"change": pv.Change, "checksum": pv.Checksum, "until": pv.Until, "selector": pv.Selector}
}

// FindPreview returns change's preview with the figures the nodes
// reported; ENOTFOUND when the namespace's preview is not of that change.
func (p *PreviewService) FindPreview(ctx context.Context, ns string, change int64) (*sluice.Preview, error) {
	cur, _, err := p.current(ctx, ns)
	if err != nil {
		return nil, err
	}
	if cur == nil || cur.Change != strconv.FormatInt(change, 10) {
		if p.Results == nil {
			return nil, sluice.Errorf(sluice.ENOTFOUND, "change %d of namespace %q has no preview", change, ns)
		}
		return p.Results.FindPreviewResult(ctx, ns, change)
	}
	return p.figures(ns, cur), nil
}

// figures aggregates cur's reports; once no live node carries cur any more
// (it expired and the nodes dropped it), the last figures that had nodes.
func (p *PreviewService) figures(ns string, cur *api.Preview) *sluice.Preview {
	change, _ := strconv.ParseInt(cur.Change, 10, 64)
	out := p.aggregate(ns, change, cur, p.now())
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(out.Nodes) > 0 {
		if p.seen == nil {
			p.seen = map[string]*sluice.Preview{}
		}
		p.seen[ns] = out
		return out
	}
	if last := p.seen[ns]; last != nil && last.Change == change && last.Checksum == cur.Checksum && last.Since.Equal(cur.Since) {
		c := *last
		c.State = out.State
		return &c
	}
	return out
}

// keep stores cur's figures as its change's finished preview, ended now
// for why (nothing without Results). It is called before the value is
// deleted, while the nodes still report it.
func (p *PreviewService) keep(ctx context.Context, ns string, cur *api.Preview, why string) error {
	if p.Results == nil {
		return nil
	}
	f := p.figures(ns, cur)
	now := p.now()
	f.State, f.EndedAt, f.Reason = sluice.PreviewFinished, &now, why
	if err := p.Results.SavePreviewResult(ctx, ns, f); err != nil {
		return err
	}
	p.mu.Lock()
	if last := p.seen[ns]; last != nil && last.Change == f.Change {
		delete(p.seen, ns)
	}
	p.mu.Unlock()
	return nil
}

// StopPreview removes change's preview; ENOTFOUND when the namespace's
// preview is not of that change.
func (p *PreviewService) StopPreview(ctx context.Context, ns string, change int64) error {
	actor := sluice.ActorFromContext(ctx)
	if !actor.Role.Allows(sluice.RoleEditor) {
		return sluice.Errorf(sluice.EFORBIDDEN, "only editors and up stop previews")
	}
	cur, rev, err := p.current(ctx, ns)
	if err != nil {
		return err
	}
	if cur == nil || cur.Change != strconv.FormatInt(change, 10) {
		return sluice.Errorf(sluice.ENOTFOUND, "change %d of namespace %q has no preview", change, ns)
	}
	why := sluice.PreviewEndStopped
	if !cur.Until.After(p.now()) {
		why = sluice.PreviewEndExpired
	}
	if err := p.keep(ctx, ns, cur, why); err != nil {
		return err
	}
	key := p.Keys.Preview(ns)
	cctx, cancel := p.ctx(ctx)
	defer cancel()
	res, err := p.Client.Txn(cctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		return sluice.Errorf(sluice.EUNAVAILABLE, "deleting the preview from etcd: %v", err)
	}
	if !res.Succeeded {
		return sluice.Errorf(sluice.ECONFLICT, "the namespace's preview changed meanwhile; try again")
	}
	return p.audit(ctx, sluice.ActionPreviewStop, ns, change, mustJSON(summary(cur)), nil)
}

// EndPreview stops the namespace's preview if it is of change, because of
// why (sluice.PreviewEnd*): it deletes the value it read (a transaction on its mod
// revision, so a preview started meanwhile stays) and audits
// ActionPreviewStop with the reason, as the actor in ctx. The nodes drop it
// within a report interval. It reports whether it stopped one; a preview of
// another change, or none, is left alone.
func (p *PreviewService) EndPreview(ctx context.Context, ns string, change int64, why string) (bool, error) {
	cur, rev, err := p.current(ctx, ns)
	if err != nil || cur == nil || cur.Change != strconv.FormatInt(change, 10) {
		return false, err
	}
	if err := p.keep(ctx, ns, cur, why); err != nil {
		return false, err
	}
	key := p.Keys.Preview(ns)
	cctx, cancel := p.ctx(ctx)
	defer cancel()
	res, err := p.Client.Txn(cctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		return false, sluice.Errorf(sluice.EUNAVAILABLE, "deleting the preview from etcd: %v", err)
	}
	if !res.Succeeded {
		return false, nil // replaced or stopped meanwhile
	}
	after := map[string]any{"reason": why}
	return true, p.audit(ctx, sluice.ActionPreviewStop, ns, change, mustJSON(summary(cur)), mustJSON(after))
}

// PreviewSweeperActor is the actor of the previews EndStalePreview stops.
const PreviewSweeperActor = "sluice"

// EndStalePreview stops the namespace's preview when its change can no
// longer be previewed as it was: published (whichever replica or the
// scheduler published it), rejected, neither open nor approved, gone, or
// holding other rules than the preview's, or when its until has passed
// (EndPreview, which keeps its figures; audited as
// PreviewSweeperActor). The control plane calls it for every namespace
// every few seconds (SweepPreviews), so a preview never outlives its
// change by more than that even when the request that ended the change
// did not stop it. It returns the reason, "" when the preview stays.
func (p *PreviewService) EndStalePreview(ctx context.Context, ns string) (string, error) {
	cur, _, err := p.current(ctx, ns)
	if err != nil || cur == nil {
		return "", err
	}
	change, err := strconv.ParseInt(cur.Change, 10, 64)
	if err != nil {
		return "", nil
	}
	_, checksum, state, err := p.Changes.ChangeDocument(ctx, ns, change)
	var why string
	switch {
	case sluice.ErrorCode(err) == sluice.ENOTFOUND:
		why = "change gone"
	case err != nil:
		return "", err
	case state == sluice.ChangePublished:
		why = sluice.PreviewEndPublished
	case state == sluice.ChangeRejected:
		why = sluice.PreviewEndRejected
	case state != sluice.ChangeOpen && state != sluice.ChangeApproved:
		why = string(state)
	case checksum != cur.Checksum:
		why = sluice.PreviewEndEdited
	case !cur.Until.After(p.now()):
		why = sluice.PreviewEndExpired
	default:
		p.figures(ns, cur) // remembers the last figures, for when it expires
		return "", nil
	}
	ctx = sluice.NewContextWithActor(ctx, sluice.Actor{User: &sluice.User{Username: PreviewSweeperActor, Role: sluice.RoleAdmin}, Role: sluice.RoleAdmin})
	stopped, err := p.EndPreview(ctx, ns, change, why)
	if !stopped || err != nil {
		return "", err
	}
	return why, nil
}

// SweepPreviews calls EndStalePreview for every namespace of namespaces
// every interval (zero means 2s) until ctx ends; failures are logged.
func (p *PreviewService) SweepPreviews(ctx context.Context, namespaces func(context.Context) ([]string, error), interval time.Duration) {
	if interval <= 0 {
		interval = 2 * time.Second
	}
	defer func() {
		if r := recover(); r != nil && p.Logger != nil {
			p.Logger.Error("preview sweeper panicked", "panic", r)
		}
	}()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		nss, err := namespaces(ctx)
		for _, ns := range nss {
			why, err := p.EndStalePreview(ctx, ns)
			switch {
			case err != nil && ctx.Err() == nil && p.Logger != nil:
				p.Logger.Warn("checking the namespace's preview", "namespace", ns, "err", err)
			case why != "" && p.Logger != nil:
				p.Logger.Info("preview stopped with its change", "namespace", ns, "reason", why)
			}
		}
		if err != nil && ctx.Err() == nil && p.Logger != nil {
			p.Logger.Warn("listing namespaces for previews", "err", err)
		}
	}
}

// aggregate sums the reports of the live nodes that carry pv: per limit
// its decisions and distinct rejected keys (approximate once more than one
// node rejected some, or a node saturated), per degrade plan its sheds and
// highest level.
func (p *PreviewService) aggregate(ns string, change int64, pv *api.Preview, now time.Time) *sluice.Preview {
	out := &sluice.Preview{Change: change, Checksum: pv.Checksum, State: sluice.PreviewRunning, Since: pv.Since, Until: pv.Until,
		By: pv.By, Selector: pv.Selector, Nodes: []string{}, Rules: []sluice.PreviewRule{}}
	if out.Selector == nil {
		out.Selector = map[string]string{}
	}
	if !pv.Until.After(now) {
		out.State = sluice.PreviewDone
	}
	if rs, err := api.Decode(pv.Rules); err == nil {
		for _, l := range rs.Limits {
			out.Rules = append(out.Rules, sluice.PreviewRule{Rule: l.ID, Kind: "limit", TopKeys: []api.PreviewKey{}})
		}
		for _, d := range rs.Degrades {
			out.Rules = append(out.Rules, sluice.PreviewRule{Rule: d.ID, Kind: "degrade", TopKeys: []api.PreviewKey{}})
		}
	}
	keys := map[string]map[string]int64{}
	unknown, clientNodes := map[string]bool{}, map[string]int{}
	if p.Fleet == nil {
		return out
	}
	for _, node := range p.Fleet.LiveNodes(ns) {
		r, live := p.Fleet.LastReport(ns, node)
		if r == nil || !live || r.Preview == nil || r.Preview.Change != pv.Change || r.Preview.Checksum != pv.Checksum {
			continue
		}
		out.Nodes = append(out.Nodes, node)
		out.Approximate = out.Approximate || r.Preview.Approximate
		for i := range out.Rules {
			rule := &out.Rules[i]
			if rule.Kind == "degrade" {
				for _, d := range r.Degrades {
					if d.Rule == rule.Rule {
						rule.Live.Shed += d.Shed
						rule.Live.Level = max(rule.Live.Level, d.Level)
					}
				}
				for _, d := range r.Preview.Degrades {
					if d.Rule == rule.Rule {
						rule.Preview.Shed += d.Shed
						rule.Preview.Level = max(rule.Preview.Level, d.Level)
					}
				}
				continue
			}
			for _, l := range r.Limits {
				if l.Rule == rule.Rule {
					rule.Live.Allowed += l.Allowed
					rule.Live.Rejected += l.Rejected
					rule.Live.ShadowRejected += l.ShadowRejected
				}
			}
			for _, l := range r.Preview.Limits {
				if l.Rule != rule.Rule {
					continue
				}
				rule.Preview.Allowed += l.Allowed
				rule.Preview.Rejected += l.Rejected
				rule.Preview.ShadowRejected += l.ShadowRejected
				switch {
				case l.Clients == 0 && l.Rejected+l.ShadowRejected > 0:
					unknown[rule.Rule] = true // a node that does not count clients
				case l.Clients > 0:
					if clientNodes[rule.Rule]++; rule.ClientsAffected == nil {
						rule.ClientsAffected = &sluice.PreviewClients{}
					}
					rule.ClientsAffected.Count += l.Clients
					// A client may hit several nodes; a saturated node stopped counting.
					rule.ClientsAffected.Approximate = clientNodes[rule.Rule] > 1 || l.Saturated || rule.ClientsAffected.Approximate
				}
				for _, k := range l.TopKeys {
					if keys[rule.Rule] == nil {
						keys[rule.Rule] = map[string]int64{}
					}
					keys[rule.Rule][k.Key] += k.Rejected
				}
			}
		}
	}
	slices.Sort(out.Nodes)
	for i := range out.Rules {
		switch r := &out.Rules[i]; {
		case r.Kind != "limit" || len(out.Nodes) == 0 || unknown[r.Rule]:
			r.ClientsAffected = nil
		case r.ClientsAffected == nil:
			r.ClientsAffected = &sluice.PreviewClients{} // no node rejected anyone
		}
		for k, n := range keys[out.Rules[i].Rule] {
			out.Rules[i].TopKeys = append(out.Rules[i].TopKeys, api.PreviewKey{Key: k, Rejected: n})
		}
		slices.SortFunc(out.Rules[i].TopKeys, func(a, b api.PreviewKey) int {
			return cmp.Or(cmp.Compare(b.Rejected, a.Rejected), cmp.Compare(a.Key, b.Key))
		})
		if len(out.Rules[i].TopKeys) > 10 {
			out.Rules[i].TopKeys = out.Rules[i].TopKeys[:10]
		}
	}
	return out
}

func (p *PreviewService) audit(ctx context.Context, action, ns string, change int64, before, after json.RawMessage) error {
	err := p.Audit.RecordAuditEvent(ctx, &sluice.AuditEvent{Action: action, Object: fmt.Sprintf("namespace/%s/change/%d", ns, change),
		Namespace: ns, Before: before, After: after})
	if err != nil && p.Logger != nil {
		p.Logger.Error("preview written to etcd but not audited", "namespace", ns, "change", change, "action", action, "err", err)
	}
	return err
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only values of this file, which always encode
	}
	return b
}
