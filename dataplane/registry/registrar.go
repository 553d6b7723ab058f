// Package registry is a gateway node's presence in etcd, next to the rule
// set it follows (package source):
//
//   - Registrar keeps the node's api.NodeStatus under
//     /sluice/v1/ns/<ns>/nodes/<nodeID>, bound to a lease that it keeps
//     alive. It rewrites the value when the status changes (and at least
//     every TTL/2), re-creates the registration when the lease is lost (etcd
//     restarted, lease expired during a partition, revoked by an operator),
//     and revokes the lease on a clean stop so the node disappears at once.
//   - Overrides follows /sluice/v1/ns/<ns>/overrides/<nodeID> and hands each
//     new api.Override to a callback (the zero Override when the key is
//     deleted or the override expires), refusing values not signed by a
//     trusted key (api.Verifier) when it has one.
//   - Nodes counts the namespace's live registrations, for limits that fall
//     back to limit ÷ live nodes when Redis is unreachable.
//
// Overrides and Nodes use the same protocol as the etcd rule-set source: list
// at revision R, watch from R+1, list again after a compaction, a closed
// watch or a silent one, with capped, jittered exponential backoff.
//
// Each type's Run owns every goroutine it starts and returns when its
// context ends. Only tests link the etcd server.
package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/etcdwatch"
)

// errLeaseLost ends a registration session whose lease is gone.
var errLeaseLost = errors.New("lease lost")

// Registrar registers a node in etcd under a lease. Set the exported fields
// and call Run once; Status is safe for concurrent use.
type Registrar struct {
	// Client is the etcd client; required. The registrar never closes it.
	Client *clientv3.Client
	// Keys lays out the etcd keys; the zero value uses api.DefaultEtcdPrefix.
	Keys api.Keys
	// Namespace and NodeID name the registration key; required.
	Namespace, NodeID string
	// NodeStatus returns the node's current status; required. It is called every
	// Poll from Run's goroutine and must be cheap. NodeID and Namespace are
	// filled in when empty, and UpdatedAt is set at each write. Round the
	// health figures (rps, p99) to what is worth a write: any change is
	// written.
	NodeStatus func() api.NodeStatus
	// TTL is the lease's time to live, in whole seconds; zero means 10s. A
	// node that stops without revoking disappears within TTL.
	TTL time.Duration
	// Poll is how often Status is read; zero means 1s.
	Poll time.Duration
	// Refresh is the longest time between two writes of an unchanged status;
	// zero means TTL/2.
	Refresh time.Duration
	// OpTimeout bounds each etcd call; zero means 5s.
	OpTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before registering again
	// after a failure; zero means 250ms and 10s.
	MinBackoff, MaxBackoff time.Duration
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu     sync.Mutex
	status RegistrarStatus
}

// RegistrarStatus says whether the node is registered, for its /status.
type RegistrarStatus struct {
	Registered bool  `json:"registered"`
	LeaseID    int64 `json:"leaseId,omitempty"`
	// Registrations counts the leases granted: 1 after the first
	// registration, and one more per re-creation.
	Registrations int64     `json:"registrations"`
	LastWrite     time.Time `json:"lastWrite,omitzero"`
	LastError     string    `json:"lastError,omitempty"`
	LastErrorAt   time.Time `json:"lastErrorAt,omitzero"`
}

// Status returns the registration's state. Safe for concurrent use.
func (r *Registrar) Status() RegistrarStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

func (r *Registrar) setError(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status.LastError = err.Error()
	r.status.LastErrorAt = r.Now()
}

func (r *Registrar) defaults() error {
	switch {
	case r.Client == nil:
		return errors.New("registrar: no etcd client")
	case !api.ValidID(r.Namespace):
		return fmt.Errorf("registrar: invalid namespace %q", r.Namespace)
	case !api.ValidNodeID(r.NodeID):
		return fmt.Errorf("registrar: %w", api.ValidateNodeID(r.NodeID))
	case r.NodeStatus == nil:
		return errors.New("registrar: no NodeStatus func")
	}
	if r.TTL <= 0 {
		r.TTL = 10 * time.Second
	}
	if r.TTL < time.Second {
		r.TTL = time.Second
	}
	r.TTL = r.TTL.Round(time.Second)
	if r.Poll <= 0 {
		r.Poll = time.Second
	}
	if r.Refresh <= 0 {
		r.Refresh = r.TTL / 2
	}
	if r.OpTimeout <= 0 {
		r.OpTimeout = 5 * time.Second
	}
	if r.MinBackoff <= 0 {
		r.MinBackoff = 250 * time.Millisecond
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = 10 * time.Second
	}
	if r.MaxBackoff < r.MinBackoff {
		r.MaxBackoff = r.MinBackoff
	}
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	return nil
}

// Run registers the node and keeps it registered until ctx ends; then it
// revokes the lease (so the registration disappears at once) and returns
// nil. It returns an error only for invalid settings.
func (r *Registrar) Run(ctx context.Context) error {
	if err := r.defaults(); err != nil {
		return err
	}
	failures := 0
	for {
		registered, err := r.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if registered {
			failures = 0
		}
		failures++
		r.setError(err)
		r.Logger.Warn("node registration lost; registering again", "namespace", r.Namespace, "node", r.NodeID, "err", err)
		t := time.NewTimer(etcdwatch.Backoff(failures, r.MinBackoff, r.MaxBackoff))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// session grants a lease, writes the registration and keeps both up until
// the lease is lost or ctx ends. registered says whether the first write
// succeeded.
func (r *Registrar) session(ctx context.Context) (registered bool, err error) {
	key := r.Keys.Node(r.Namespace, r.NodeID)
	gctx, cancel := context.WithTimeout(ctx, r.OpTimeout)
	lease, err := r.Client.Grant(gctx, int64(r.TTL/time.Second))
	cancel()
	if err != nil {
		return false, fmt.Errorf("granting lease: %w", err)
	}
	id := lease.ID
	defer func() {
		// Revoke on every exit: at a clean stop the node disappears at once;
		// after a failure a lease that may still exist is not left behind.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.OpTimeout)
		defer cancel()
		_, rerr := r.Client.Revoke(rctx, id)
		if ctx.Err() != nil && rerr != nil && !errors.Is(rerr, rpctypes.ErrLeaseNotFound) {
			r.Logger.Warn("revoking the node's lease", "node", r.NodeID, "err", rerr)
		}
		r.mu.Lock()
		r.status.Registered, r.status.LeaseID = false, 0
		r.mu.Unlock()
	}()
	kctx, kcancel := context.WithCancel(ctx)
	defer kcancel()
	alive, err := r.Client.KeepAlive(kctx, id)
	if err != nil {
		return false, fmt.Errorf("keeping lease alive: %w", err)
	}
	var last []byte // the last status written, without UpdatedAt
	var lastWrite time.Time
	write := func(st api.NodeStatus, cmp []byte) error {
		now := r.Now()
		st.UpdatedAt = now.UTC()
		val, err := json.Marshal(st)
		if err != nil {
			return fmt.Errorf("encoding node status: %w", err)
		}
		pctx, cancel := context.WithTimeout(ctx, r.OpTimeout)
		defer cancel()
		if _, err := r.Client.Put(pctx, key, string(val), clientv3.WithLease(id)); err != nil {
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				return errLeaseLost
			}
			return fmt.Errorf("writing node status: %w", err)
		}
		last, lastWrite = cmp, now
		r.mu.Lock()
		r.status.LastWrite = now
		r.mu.Unlock()
		return nil
	}
	st, cmp, err := r.read()
	if err != nil {
		return false, err
	}
	if err := write(st, cmp); err != nil {
		return false, err
	}
	r.mu.Lock()
	r.status.Registered, r.status.LeaseID = true, int64(id)
	r.status.Registrations++
	r.mu.Unlock()
	r.Logger.Info("node registered", "namespace", r.Namespace, "node", r.NodeID, "lease", int64(id), "ttl", r.TTL)

	tick := time.NewTicker(r.Poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return true, nil
		case _, ok := <-alive:
			if !ok {
				if ctx.Err() != nil {
					return true, nil
				}
				return true, fmt.Errorf("lease %x: %w", int64(id), errLeaseLost)
			}
		case <-tick.C:
			st, cmp, err := r.read()
			if err != nil {
				r.setError(err)
				continue
			}
			if bytes.Equal(cmp, last) && r.Now().Sub(lastWrite) < r.Refresh {
				continue
			}
			if err := write(st, cmp); err != nil {
				if errors.Is(err, errLeaseLost) {
					return true, fmt.Errorf("lease %x: %w", int64(id), err)
				}
				// etcd may be briefly unreachable: the lease outlives it, and
				// the next tick writes again (last is unchanged).
				r.setError(err)
			}
		}
	}
}

// read calls NodeStatus and returns it with its comparable form (UpdatedAt
// zeroed).
func (r *Registrar) read() (api.NodeStatus, []byte, error) {
	st := r.NodeStatus()
	if st.NodeID == "" {
		st.NodeID = r.NodeID
	}
	if st.Namespace == "" {
		st.Namespace = r.Namespace
	}
	st.UpdatedAt = time.Time{}
	cmp, err := json.Marshal(st)
	if err != nil {
		return st, nil, fmt.Errorf("encoding node status: %w", err)
	}
	return st, cmp, nil
}
