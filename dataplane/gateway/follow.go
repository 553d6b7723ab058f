package gateway

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/registry"
	"github.com/sluicegw/sluice/dataplane/report"
	"github.com/sluicegw/sluice/dataplane/source"
)

// FollowFile applies the rules file's rules and returns the components that
// keep following it: the file watch (reload on change) and, with reload
// set, a reload on every value received (SIGHUP). An invalid file is an
// error naming it and its field paths. Call it before Run.
func (n *Node) FollowFile(ctx context.Context, f *source.File, reload <-chan os.Signal) ([]Component, error) {
	first, err := f.Load()
	if err != nil {
		return nil, err
	}
	if err := n.Apply(ctx, first); err != nil {
		return nil, fmt.Errorf("rules file %s is invalid:\n%w", f.Path, err)
	}
	cs := []Component{{Name: "rules-file", Run: func(ctx context.Context) error { return f.Watch(ctx, n.Apply) }}}
	if reload != nil {
		cs = append(cs, Component{Name: "sighup", Run: func(ctx context.Context) error {
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-reload:
					n.log.Info("SIGHUP: reloading rules", "path", f.Path)
					f.Reload()
				}
			}
		}})
	}
	return cs, nil
}

// EtcdFollow is what following the control plane through etcd takes.
type EtcdFollow struct {
	// Client is the etcd client the node boots with (the first list, before
	// the node listens); required.
	Client *clientv3.Client
	// Authed returns the client the components follow with once it is
	// authenticated (with etcd auth the first attempt may fail while etcd
	// is unreachable, and succeed later), nil when ctx ends first. Nil means
	// Client, at once.
	Authed func(ctx context.Context) *clientv3.Client
	// Keys lays out the etcd keys.
	Keys api.Keys
	// Namespace is the namespace whose rules the node runs; NodeID its id
	// in the registry; Labels its labels (canary selectors match them).
	Namespace, NodeID string
	Labels            map[string]string
	// StateDir caches every applied version, to boot from when etcd cannot
	// be reached; empty means the node cannot boot without etcd.
	StateDir string
	// Advertise is the traffic address registered for this node.
	Advertise string
	// Verifier checks the signature of every value; nil accepts unsigned
	// ones (--insecure-accept-unsigned).
	Verifier *api.Verifier
	// OnSignatureRejection, when set, counts a value refused for its
	// signature: what (ruleset, canary, override, state) and why.
	OnSignatureRejection func(what, reason string)
	// Nodes, when set, counts the namespace's live nodes (the Redis
	// limiter's local fallback divides by it); it runs as a component.
	Nodes *registry.Nodes
	// ReportInterval is how often the node writes its report (package
	// report) under the registration's lease; zero means
	// report.DefaultInterval, negative turns reporting off.
	ReportInterval time.Duration
}

// FollowEtcd applies the namespace's published rules (or the state dir's
// copy when etcd cannot be reached) and returns the components that keep
// following: the source, the registration, the override watch and, with
// f.Nodes, the live-node count. With nothing published yet (or etcd down
// and no state) the node starts not ready and takes the first version when
// it lands. It adds "etcd", "registration", "override" and "signatures" to
// /status's components. Call it before Run.
func (n *Node) FollowEtcd(ctx context.Context, f EtcdFollow) ([]Component, error) {
	log := n.log
	if f.StateDir == "" {
		log.Warn("no --state-dir: this node cannot boot while etcd is unreachable")
	}
	reject := func(what, reason string) {
		if f.OnSignatureRejection != nil {
			f.OnSignatureRejection(what, reason)
		}
	}
	// Snapshots observe the node's running preview (package preview).
	n.cfg.Snapshot.Preview = &n.preview
	src := &source.Etcd{Client: f.Client, Namespace: f.Namespace, Keys: f.Keys, Labels: f.Labels, StateDir: f.StateDir, Logger: log,
		Verifier: f.Verifier, OnSignatureRejection: reject}
	if err := src.Start(ctx, n.Apply); err != nil {
		if !errors.Is(err, source.ErrNoState) {
			return nil, err
		}
		// Nothing published yet (or etcd down and no cache): serve not-ready
		// (503, /readyz failing) and take the first version when it lands.
		log.Warn("no rule set yet: the node is not ready until the first version arrives", "namespace", f.Namespace, "err", err)
	}
	tmpl := api.NodeStatus{NodeID: f.NodeID, Namespace: f.Namespace, Address: f.Advertise, AdminAddress: n.cfg.Admin, Labels: f.Labels}
	ovr := &registry.Overrides{Client: f.Client, Keys: f.Keys, Namespace: f.Namespace, NodeID: f.NodeID, Logger: log,
		OnChange: n.ApplyOverride, Verifier: f.Verifier,
		OnSignatureRejection: func(reason string) { reject("override", reason) }}
	pw := &source.PreviewWatch{Client: f.Client, Keys: f.Keys, Namespace: f.Namespace, Labels: f.Labels, Verifier: f.Verifier,
		Logger: log, OnSignatureRejection: func(reason string) { reject("preview", reason) },
		OnChange: func(p *api.Preview, v *api.Valid) { n.setPreview(p, v, f.Nodes) }}
	reg := &registry.Registrar{Client: f.Client, Keys: f.Keys, Namespace: f.Namespace, NodeID: f.NodeID, Logger: log,
		NodeStatus: func() api.NodeStatus {
			st := n.NodeStatus(tmpl)
			st.SignatureRejections = src.SignatureRejections() + ovr.Status().SignatureRejections + pw.SignatureRejections()
			st.AcceptsUnsigned = f.Verifier == nil
			return st
		}}
	n.cfg.Stores["etcd"] = func() any { return src.Status() }
	n.cfg.Stores["registration"] = func() any { return reg.Status() }
	n.cfg.Stores["override"] = func() any { return ovr.Current() }
	n.cfg.Stores["preview"] = func() any { return pw.Status() }
	n.cfg.Stores["signatures"] = func() any {
		s := signatureStatus{TrustedKeys: f.Verifier.KeyIDs(), Rejections: src.SignatureRejections() + ovr.Status().SignatureRejections + pw.SignatureRejections()}
		if f.Verifier == nil {
			s.Warning = "accepting unsigned etcd values (--insecure-accept-unsigned): anyone who can write to etcd controls this node's rules"
		}
		if e := ovr.Status().LastError; e != "" {
			s.LastOverrideError = e
		}
		return s
	}
	// Each component starts once the client is authenticated (at once
	// without etcd auth).
	authed := func(name string, run func(ctx context.Context, c *clientv3.Client) error) Component {
		return Component{Name: name, Run: func(ctx context.Context) error {
			c := f.Client
			if f.Authed != nil {
				if c = f.Authed(ctx); c == nil {
					return nil
				}
			}
			return run(ctx, c)
		}}
	}
	cs := []Component{
		authed("etcd-source", func(ctx context.Context, c *clientv3.Client) error { src.Client = c; return src.Run(ctx, n.Apply) }),
		authed("registration", func(ctx context.Context, c *clientv3.Client) error { reg.Client = c; return reg.Run(ctx) }),
		authed("overrides", func(ctx context.Context, c *clientv3.Client) error { ovr.Client = c; return ovr.Run(ctx) }),
		authed("preview", func(ctx context.Context, c *clientv3.Client) error { pw.Client = c; return pw.Run(ctx) }),
	}
	if f.ReportInterval >= 0 {
		rep, err := report.New(report.Settings{Client: f.Client, Keys: f.Keys, Namespace: f.Namespace, NodeID: f.NodeID,
			Interval: f.ReportInterval, Lease: func() int64 { return reg.Status().LeaseID }, Metrics: n.metrics,
			State: n.ReportState, Logger: log})
		if err != nil {
			return nil, err
		}
		n.cfg.Stores["report"] = func() any { return rep.Status() }
		cs = append(cs, authed("report", func(ctx context.Context, c *clientv3.Client) error {
			rep.SetClient(c)
			rep.Run(ctx)
			return nil
		}))
	}
	if f.Nodes != nil {
		cs = append(cs, authed("live-nodes", func(ctx context.Context, c *clientv3.Client) error { f.Nodes.Client = c; return f.Nodes.Run(ctx) }))
	}
	return cs, nil
}

// signatureStatus is the "signatures" component of /status.
type signatureStatus struct {
	// TrustedKeys are the ids of --trust-keys; empty with
	// --insecure-accept-unsigned, which Warning then says.
	TrustedKeys []string `json:"trustedKeys"`
	Warning     string   `json:"warning,omitempty"`
	// Rejections counts the values refused for their signature (rule set,
	// canary, override, state file).
	Rejections        int64  `json:"rejections"`
	LastOverrideError string `json:"lastOverrideError,omitempty"`
}
