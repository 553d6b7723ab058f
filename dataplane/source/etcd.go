package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/etcdwatch"
)

// EtcdState is the connection state of an Etcd source.
type EtcdState string

const (
	// StateStarting: Start or Run has not finished its first list yet.
	StateStarting EtcdState = "starting"
	// StateConnected: the source has listed and is watching.
	StateConnected EtcdState = "connected"
	// StateBootedFromCache: etcd could not be reached at start; the node runs
	// the document of its state dir and keeps trying.
	StateBootedFromCache EtcdState = "booted-from-cache"
	// StateReconnecting: the watch broke; the node keeps its applied document
	// and lists again with backoff.
	StateReconnecting EtcdState = "reconnecting"
)

// EtcdStatus is a snapshot of an Etcd source, for the node's /status.
type EtcdStatus struct {
	State     EtcdState `json:"state"`
	Endpoints string    `json:"endpoints"`
	// Revision is the last etcd revision the source has seen.
	Revision int64 `json:"revision"`
	// Version and Checksum are those of the applied document; Canary says it
	// is a canary version.
	Version  int64  `json:"version"`
	Checksum string `json:"checksum,omitempty"`
	Canary   bool   `json:"canary,omitempty"`
	// PublishedVersion is the highest version of the ruleset key accepted.
	PublishedVersion int64 `json:"publishedVersion"`
	// TrustedKeys are the ids of the keys values must be signed by; empty
	// when the node accepts unsigned values, which Warning then says.
	TrustedKeys []string `json:"trustedKeys,omitempty"`
	Warning     string   `json:"warning,omitempty"`
	// SignatureRejections counts the values refused for their signature
	// (unsigned, unknown key, bad signature), the state file's included.
	SignatureRejections int64 `json:"signatureRejections"`
	// Lists counts the lists done (the first one, and one per re-list).
	Lists       int64     `json:"lists"`
	LastError   string    `json:"lastError,omitempty"`
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
	Since       time.Time `json:"since"`
}

// ErrNoState is returned by Start when there is nothing to run: etcd could
// not be reached within ConnectTimeout (or holds no published rule set for
// the namespace) and the state dir has no document.
var ErrNoState = errors.New("no rule set from etcd and none in the state dir")

// Etcd follows one namespace's rule set in etcd. It lists the ruleset and
// canary keys at a revision R, watches them from R+1, and lists again after
// a compaction, a closed watch or a silent one (no answer to a progress
// request within three Heartbeats), waiting an exponential, capped and
// jittered backoff between failed attempts. After each list or batch of
// watch events it computes the effective document for this node — the
// canary's if its selector matches Labels and its version is newer than the
// published one, else the published one — and, when that differs from the
// applied document, passes its rules to apply.
//
// Ordering: a ruleset value older than the newest one accepted is refused,
// and so is an effective document older than the applied one, with one
// exception: a node leaving a canary (the canary key deleted, its selector
// changed, or the published version caught up) returns to the published
// version even though it is older than the canary. A canary replaced by an
// older canary is refused; delete it first.
//
// Signatures: with Verifier set, every value must be an envelope signed by
// a trusted key for the key it is read from (api.Verifier.Open) before
// anything else is read from it; a value that is not is refused, counted in
// Status and passed to OnSignatureRejection. Only verified values move the
// ordering floor, so a forged value, whatever version it claims, never
// blocks a correctly signed one that follows. The state file must be signed
// too (VerifyState): one that is not is refused and the node starts from
// etcd as if there were none. Without Verifier the source accepts unsigned
// values and envelopes alike, unchecked.
//
// Refusals — a value that is not JSON, fails strict decoding or validation,
// has a wrong checksum, belongs to another namespace, or is older — reach
// apply as Update{Err: ...} (once per etcd value) and the applied document
// stays. When apply returns an error the document is not recorded as
// applied and is not offered again until the next list.
//
// With StateDir set, every document apply accepted is saved there (see
// SaveState) after apply returns nil, and Start boots from it when etcd
// cannot be reached.
//
// Set the exported fields before Start or Run and do not change them after.
// Start and Run must be called from one goroutine; Status is safe for
// concurrent use.
type Etcd struct {
	// Client is the etcd client; required. The source never closes it.
	Client *clientv3.Client
	// Namespace is the namespace to follow; required.
	Namespace string
	// Keys lays out the etcd keys; the zero value uses api.DefaultEtcdPrefix.
	Keys api.Keys
	// Labels are this node's labels, matched against canary selectors. Nil
	// means no labels: the node never runs a canary.
	Labels map[string]string
	// StateDir is where applied documents are saved. Empty means nowhere:
	// the node cannot boot without etcd.
	StateDir string
	// ConnectTimeout bounds Start's first list before it falls back to the
	// state dir; zero means 3s.
	ConnectTimeout time.Duration
	// OpTimeout bounds every later list; zero means 5s.
	OpTimeout time.Duration
	// Heartbeat is how often the watch is probed with a progress request; a
	// watch silent for three Heartbeats counts as broken. Zero means 5s.
	Heartbeat time.Duration
	// MinBackoff and MaxBackoff bound the wait between failed lists, which
	// doubles per failure and is jittered; zero means 250ms and 30s.
	MinBackoff, MaxBackoff time.Duration
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Verifier checks the signature of every value; nil accepts unsigned
	// values (--insecure-accept-unsigned).
	Verifier *api.Verifier
	// OnSignatureRejection, when set, is called for every value refused for
	// its signature: what ("ruleset", "canary" or "state") and the reason
	// (api.SignatureReason).
	OnSignatureRejection func(what, reason string)

	mu     sync.Mutex
	status EtcdStatus

	// Owned by the goroutine calling Start and Run.
	inited     bool
	started    bool
	startRev   int64
	pub        *doc // last accepted ruleset value
	pubFloor   int64
	pubSeen    string     // which ruleset value was taken last (seenKey)
	canary     *canaryDoc // last accepted canary value
	canSeen    string
	applied    *doc // what apply accepted last
	appliedCan bool
	refused    string // key of the document apply refused last
	lists      atomic.Int64
}

// doc is one checked published document.
type doc struct {
	raw    []byte // the api.Published JSON as read
	signed []byte // the etcd value it came from when signed (nil: unsigned)
	rules  []byte // its rules member, passed to apply
	pub    *api.Published
	rev    int64
}

func (d *doc) key() string { return fmt.Sprintf("%d/%s", d.pub.Version, d.pub.Checksum) }

type canaryDoc struct {
	doc      *doc
	selector api.Selector
}

func newDoc(raw []byte, pub *api.Published, rev int64, signed []byte) (*doc, error) {
	var r struct {
		Rules json.RawMessage `json:"rules"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("reading rules: %w", err)
	}
	return &doc{raw: slices.Clone(raw), rules: r.Rules, pub: pub, rev: rev, signed: slices.Clone(signed)}, nil
}

// open checks the signature of a value read from key (see Verifier) and
// returns its payload, and the envelope when it is signed.
func (e *Etcd) open(what, key string, value []byte) (payload, signed []byte, err error) {
	payload, kid, err := e.Verifier.Open(key, value)
	if err != nil {
		e.rejectedSignature(what, err)
		return nil, nil, err
	}
	if kid != "" || len(payload) != len(value) {
		signed = value // an envelope (checked, or unwrapped without a verifier)
	}
	return payload, signed, nil
}

func (e *Etcd) rejectedSignature(what string, err error) {
	e.mu.Lock()
	e.status.SignatureRejections++
	e.mu.Unlock()
	if e.OnSignatureRejection != nil {
		e.OnSignatureRejection(what, api.SignatureReason(err))
	}
}

// SignatureRejections is Status().SignatureRejections, cheaper.
func (e *Etcd) SignatureRejections() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.status.SignatureRejections
}

func (e *Etcd) init() error {
	if e.inited {
		return nil
	}
	if e.Client == nil {
		return errors.New("etcd source: no client")
	}
	if !api.ValidID(e.Namespace) {
		return fmt.Errorf("etcd source: invalid namespace %q", e.Namespace)
	}
	if e.ConnectTimeout <= 0 {
		e.ConnectTimeout = 3 * time.Second
	}
	// OpTimeout, Heartbeat and the backoff bounds are the follower's:
	// etcdwatch.New fills their defaults.
	if e.Logger == nil {
		e.Logger = slog.Default()
	}
	if e.Now == nil {
		e.Now = time.Now
	}
	e.mu.Lock()
	e.status.State = StateStarting
	e.status.Endpoints = e.endpoints()
	e.status.Since = e.Now()
	if e.Verifier != nil {
		e.status.TrustedKeys = e.Verifier.KeyIDs()
	} else {
		e.status.Warning = "accepting unsigned values: no trusted keys (--insecure-accept-unsigned)"
	}
	e.mu.Unlock()
	e.inited = true
	return nil
}

// endpoints lists the client's endpoints without credentials.
func (e *Etcd) endpoints() string {
	eps := e.Client.Endpoints()
	out := make([]string, 0, len(eps))
	for _, ep := range eps {
		if u, err := url.Parse(ep); err == nil && u.User != nil {
			u.User = nil
			ep = u.String()
		}
		out = append(out, ep)
	}
	return strings.Join(out, ",")
}

// Name is the Update.Source of this source's documents: "etcd:" and the
// client's endpoints, without credentials.
func (e *Etcd) Name() string { return "etcd:" + e.endpoints() }

// Status returns the source's connection state, revision, applied version and
// last error (StateStarting and zeros before Start or Run). Safe for
// concurrent use.
func (e *Etcd) Status() EtcdStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.status
	st.Lists = e.lists.Load()
	if st.State == "" {
		st.State = StateStarting
	}
	return st
}

func (e *Etcd) setState(s EtcdState) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.status.State != s {
		e.status.State = s
		e.status.Since = e.Now()
	}
}

func (e *Etcd) setRevision(rev int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if rev > e.status.Revision {
		e.status.Revision = rev
	}
}

func (e *Etcd) setError(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.status.LastError = err.Error()
	e.status.LastErrorAt = e.Now()
}

// refuse reports a refused etcd value to apply and in Status.
func (e *Etcd) refuse(ctx context.Context, apply Apply, err error) {
	e.setError(err)
	e.Logger.Warn("etcd rule set refused; keeping the applied one", "namespace", e.Namespace, "err", err)
	_ = apply(ctx, Update{Source: e.Name(), ReadAt: e.Now(), Err: err})
}

// Start prepares the state dir, lists etcd (waiting at most ConnectTimeout)
// and applies the first document: the effective one from etcd, or the state
// dir's when etcd cannot be reached, holds nothing, holds only older or
// refused documents, or apply refuses etcd's. It returns nil once apply
// accepted a document, and otherwise an error wrapping ErrStateDir,
// ErrCorruptState or ErrNoState, or apply's error. After ErrNoState the
// caller may still call Run, which waits for etcd. Start is optional: Run
// calls it when it was not called or failed.
func (e *Etcd) Start(ctx context.Context, apply Apply) error {
	if err := e.init(); err != nil {
		return err
	}
	var cached *State
	if e.StateDir != "" {
		if err := CheckStateDir(e.StateDir); err != nil {
			return err
		}
		st, err := LoadState(e.StateDir, e.Namespace)
		switch {
		case err == nil:
			cached = st
		case isNotExist(err):
		default:
			return err
		}
	}
	if cached != nil && e.Verifier != nil && e.applied == nil {
		if err := VerifyState(cached, e.Verifier, e.Keys); err != nil {
			err = fmt.Errorf("state %s refused: %w", StatePath(e.StateDir, e.Namespace), err)
			e.rejectedSignature("state", err)
			e.setError(err)
			e.Logger.Error("state file refused; starting from etcd as if there were none", "namespace", e.Namespace, "err", err)
			cached = nil
		}
	}
	if cached != nil && e.applied == nil {
		d, err := newDoc(cached.Published, cached.Doc, cached.Revision, cached.Envelope)
		if err != nil {
			return fmt.Errorf("%w %s: %v", ErrCorruptState, StatePath(e.StateDir, e.Namespace), err)
		}
		e.pubFloor = max(e.pubFloor, cached.PublishedVersion)
		if !cached.Canary && e.pub == nil {
			e.pub = d
		}
		// The cache orders what etcd offers, but apply has not seen it yet.
		e.applied, e.appliedCan = d, cached.Canary
		defer func() {
			if !e.started {
				e.applied = nil
			}
		}()
	}
	lctx, cancel := context.WithTimeout(ctx, e.ConnectTimeout)
	rev, kvs, listErr := e.list(lctx)
	cancel()
	if listErr == nil {
		e.take(ctx, apply, kvs)
		e.setRevision(rev)
		if cand, canary, ok := e.effective(ctx, apply); ok {
			if err := e.emit(ctx, apply, cand, canary); err == nil {
				e.started, e.startRev = true, rev
				e.setState(StateConnected)
				return nil
			}
		}
	} else {
		e.setError(fmt.Errorf("listing etcd: %w", listErr))
	}
	if cached == nil {
		if listErr != nil {
			return fmt.Errorf("%w: listing etcd %s: %v", ErrNoState, e.endpoints(), listErr)
		}
		return fmt.Errorf("%w: namespace %q has no applicable published rule set", ErrNoState, e.Namespace)
	}
	// Fall back to the cached document.
	d := e.applied
	e.applied = nil
	if err := e.emit(ctx, apply, d, cached.Canary); err != nil {
		return fmt.Errorf("applying state %s: %w", StatePath(e.StateDir, e.Namespace), err)
	}
	e.started = true
	if listErr == nil {
		e.startRev = rev
		e.setState(StateConnected)
	} else {
		e.setState(StateBootedFromCache)
		e.Logger.Warn("etcd unreachable; booted from the state dir", "namespace", e.Namespace,
			"path", StatePath(e.StateDir, e.Namespace), "version", d.pub.Version, "err", listErr)
	}
	return nil
}

// Run follows etcd until ctx ends, calling apply with every new effective
// document and with refusals. It calls Start first when Start has not
// succeeded, and then tolerates ErrNoState (it waits for etcd). It returns
// nil when ctx ends, or Start's state-dir errors.
func (e *Etcd) Run(ctx context.Context, apply Apply) error {
	if err := e.init(); err != nil {
		return err
	}
	if !e.started {
		if err := e.Start(ctx, apply); err != nil {
			if errors.Is(err, ErrStateDir) || errors.Is(err, ErrCorruptState) {
				return err
			}
			if ctx.Err() != nil {
				return nil
			}
			e.Logger.Warn("etcd source: no initial rule set; waiting for etcd", "namespace", e.Namespace, "err", err)
		}
	}
	f, err := etcdwatch.New(etcdwatch.Settings{
		Client:     e.Client,
		Specs:      []etcdwatch.Spec{{Key: e.Keys.RuleSet(e.Namespace)}, {Key: e.Keys.Canary(e.Namespace)}},
		OpTimeout:  e.OpTimeout,
		Heartbeat:  e.Heartbeat,
		MinBackoff: e.MinBackoff,
		MaxBackoff: e.MaxBackoff,
		Now:        e.Now,
		Listed: func(ctx context.Context, rev int64, kvs [][]*mvccpb.KeyValue) error {
			e.lists.Add(1)
			e.refused = "" // a document apply refused gets one more try per list
			e.setState(StateConnected)
			e.take(ctx, apply, kvs)
			e.converge(ctx, apply)
			e.setRevision(rev)
			return nil
		},
		Changed: func(ctx context.Context, rev int64, evs []*clientv3.Event) error {
			if len(evs) == 0 {
				e.setRevision(rev) // progress: nothing changed up to rev
				return nil
			}
			// The ruleset and canary keys are followed by one etcd watch
			// each, and the two watches' events can reach us out of order
			// (a canary's delete before the ruleset put that preceded it,
			// which would run the old published version for a moment).
			// So an event only says that something changed: both keys are
			// read again in one transaction, and the state taken is one
			// etcd had, never older than the last one read.
			readRev, kvs, err := e.read(ctx)
			if err != nil {
				return fmt.Errorf("reading the rule set and canary after a change: %w", err)
			}
			e.take(ctx, apply, kvs)
			e.converge(ctx, apply)
			e.setRevision(max(rev, readRev))
			return nil
		},
		Broken: func(err error) {
			e.setError(err)
			e.mu.Lock()
			booted := e.status.State == StateBootedFromCache
			e.mu.Unlock()
			if !booted {
				e.setState(StateReconnecting)
			}
			e.Logger.Warn("etcd watch broken; keeping the applied rule set", "namespace", e.Namespace, "err", err)
		},
	})
	if err != nil {
		return fmt.Errorf("etcd source: %w", err)
	}
	startRev := e.startRev
	e.startRev = 0
	return f.Run(ctx, startRev)
}

// list reads the ruleset and canary keys at one revision.
func (e *Etcd) list(ctx context.Context) (int64, [][]*mvccpb.KeyValue, error) {
	e.lists.Add(1)
	return e.read(ctx)
}

// read reads the ruleset and canary keys at one revision (the newest).
func (e *Etcd) read(ctx context.Context) (int64, [][]*mvccpb.KeyValue, error) {
	if e.OpTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.OpTimeout)
		defer cancel()
	}
	resp, err := e.Client.Txn(ctx).Then(
		clientv3.OpGet(e.Keys.RuleSet(e.Namespace)),
		clientv3.OpGet(e.Keys.Canary(e.Namespace)),
	).Commit()
	if err != nil {
		return 0, nil, err
	}
	kvs := make([][]*mvccpb.KeyValue, len(resp.Responses))
	for i, r := range resp.Responses {
		kvs[i] = r.GetResponseRange().GetKvs()
	}
	return resp.Header.GetRevision(), kvs, nil
}

// take records a list's values. The caller sets the status's revision
// once what the values change is applied (converge), so that a status at a
// revision shows that revision's effective document.
func (e *Etcd) take(ctx context.Context, apply Apply, kvs [][]*mvccpb.KeyValue) {
	first := func(i int) *mvccpb.KeyValue {
		if i < len(kvs) && len(kvs[i]) > 0 {
			return kvs[i][0]
		}
		return nil
	}
	e.takeRuleset(ctx, apply, first(0))
	e.takeCanary(ctx, apply, first(1))
}

// seenKey names a key's value (nil: absent) so that a list finding the same
// value again, or a watch replaying it, does not report it twice.
func seenKey(kv *mvccpb.KeyValue) string {
	if kv == nil {
		return "absent"
	}
	return fmt.Sprintf("rev %d", kv.ModRevision)
}

// takeRuleset records the ruleset key's value (nil: absent or deleted), or
// refuses it.
func (e *Etcd) takeRuleset(ctx context.Context, apply Apply, kv *mvccpb.KeyValue) {
	if seenKey(kv) == e.pubSeen {
		return
	}
	e.pubSeen = seenKey(kv)
	if kv == nil {
		if e.pub != nil {
			e.refuse(ctx, apply, fmt.Errorf("ruleset key of namespace %q was deleted; keeping version %d", e.Namespace, e.pub.pub.Version))
		}
		return
	}
	payload, signed, err := e.open("ruleset", string(kv.Key), kv.Value)
	if err != nil {
		e.refuse(ctx, apply, fmt.Errorf("ruleset at revision %d refused: %w", kv.ModRevision, err))
		return
	}
	pub, err := api.DecodePublished(payload)
	if err == nil && pub.Rules.Namespace != e.Namespace {
		err = fmt.Errorf("published version %d is for namespace %q", pub.Version, pub.Rules.Namespace)
	}
	if err == nil && pub.Version < e.pubFloor {
		err = fmt.Errorf("published version %d is older than version %d already accepted", pub.Version, e.pubFloor)
	}
	if err == nil && e.pub != nil && pub.Version == e.pub.pub.Version && pub.Checksum != e.pub.pub.Checksum {
		err = fmt.Errorf("published version %d changed its checksum from %s to %s", pub.Version, e.pub.pub.Checksum, pub.Checksum)
	}
	var d *doc
	if err == nil {
		d, err = newDoc(payload, pub, kv.ModRevision, signed)
	}
	if err != nil {
		e.refuse(ctx, apply, fmt.Errorf("ruleset at revision %d: %w", kv.ModRevision, err))
		return
	}
	e.pub, e.pubFloor = d, pub.Version
	e.mu.Lock()
	e.status.PublishedVersion = pub.Version
	e.mu.Unlock()
}

// takeCanary records the canary key's value (nil: absent or deleted), or
// refuses it and keeps the previous one.
func (e *Etcd) takeCanary(ctx context.Context, apply Apply, kv *mvccpb.KeyValue) {
	if seenKey(kv) == e.canSeen {
		return
	}
	e.canSeen = seenKey(kv)
	if kv == nil {
		e.canary = nil
		return
	}
	payload, signed, err := e.open("canary", string(kv.Key), kv.Value)
	if err != nil {
		e.refuse(ctx, apply, fmt.Errorf("canary at revision %d refused: %w", kv.ModRevision, err))
		return
	}
	c, pub, err := api.DecodeCanary(payload)
	if err == nil && pub.Rules.Namespace != e.Namespace {
		err = fmt.Errorf("canary version %d is for namespace %q", pub.Version, pub.Rules.Namespace)
	}
	var d *doc
	if err == nil {
		d, err = newDoc(c.Published, pub, kv.ModRevision, signed)
	}
	if err != nil {
		e.refuse(ctx, apply, fmt.Errorf("canary at revision %d: %w", kv.ModRevision, err))
		return
	}
	e.canary = &canaryDoc{doc: d, selector: c.Selector}
}

// effective picks this node's document and checks its order against the
// applied one. ok is false when there is nothing (new) to apply.
func (e *Etcd) effective(ctx context.Context, apply Apply) (cand *doc, canary bool, ok bool) {
	cand = e.pub
	if c := e.canary; c != nil && c.selector.Matches(e.Labels) && (e.pub == nil || c.doc.pub.Version > e.pub.pub.Version) {
		cand, canary = c.doc, true
	}
	if cand == nil {
		return nil, false, false
	}
	if a := e.applied; a != nil {
		if cand.key() == a.key() {
			if canary != e.appliedCan {
				// Same document, now by the other track (a canary promoted):
				// nothing to apply, but the state file must say so.
				e.appliedCan = canary
				e.save(cand, canary)
				e.mu.Lock()
				e.status.Canary = canary
				e.mu.Unlock()
			}
			return nil, false, false
		}
		leavingCanary := e.appliedCan && !canary
		if cand.pub.Version <= a.pub.Version && !leavingCanary {
			if cand.key() != e.refused {
				e.refused = cand.key()
				e.refuse(ctx, apply, fmt.Errorf("version %d (checksum %s) is not newer than applied version %d", cand.pub.Version, cand.pub.Checksum, a.pub.Version))
			}
			return nil, false, false
		}
	}
	if cand.key() == e.refused {
		return nil, false, false
	}
	return cand, canary, true
}

// converge applies the effective document if it is new.
func (e *Etcd) converge(ctx context.Context, apply Apply) {
	if cand, canary, ok := e.effective(ctx, apply); ok {
		_ = e.emit(ctx, apply, cand, canary)
	}
}

// emit passes d to apply and, when accepted, records and saves it.
func (e *Etcd) emit(ctx context.Context, apply Apply, d *doc, canary bool) error {
	err := apply(ctx, Update{Data: d.rules, Version: d.pub.Version, Source: e.Name(), ReadAt: e.Now()})
	if err != nil {
		e.refused = d.key()
		e.setError(fmt.Errorf("version %d refused by the gateway: %w", d.pub.Version, err))
		return err
	}
	e.applied, e.appliedCan = d, canary
	e.save(d, canary)
	e.mu.Lock()
	e.status.Version, e.status.Checksum, e.status.Canary = d.pub.Version, d.pub.Checksum, canary
	e.mu.Unlock()
	return nil
}

// save writes the applied document to the state dir; a failure is logged and
// shown in Status, and the node keeps running.
func (e *Etcd) save(d *doc, canary bool) {
	if e.StateDir == "" {
		return
	}
	st := &State{Namespace: e.Namespace, Published: d.raw, Canary: canary, PublishedVersion: e.pubFloor, Revision: d.rev, SavedAt: e.Now().UTC(), Envelope: d.signed}
	if err := SaveState(e.StateDir, st); err != nil {
		err = fmt.Errorf("saving applied version %d: %w", d.pub.Version, err)
		e.setError(err)
		e.Logger.Error("cannot save the applied rule set", "namespace", e.Namespace, "err", err)
	}
}
