package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/etcdwatch"
)

// Overrides follows one node's operator override key and hands every change
// to OnChange: the new api.Override, or the zero Override when the key is
// deleted or the override's Expires passes. A value that is not a valid
// override is logged, shown in Status, and ignored: the previous override
// stays. With Verifier set, a value must be signed by a trusted key for the
// override key (api.Verifier.Open); one that is not is refused the same
// way, and counted. Set the exported fields and call Run once; Current and Status are
// safe for concurrent use.
type Overrides struct {
	// Client is the etcd client; required.
	Client *clientv3.Client
	// Keys lays out the etcd keys; the zero value uses api.DefaultEtcdPrefix.
	Keys api.Keys
	// Namespace and NodeID name the override key; required.
	Namespace, NodeID string
	// OnChange receives each new override, from Run's goroutine or from the
	// expiry timer (never two calls at once, never after Run returned); nil
	// means nobody is told (Current still reports).
	OnChange func(api.Override)
	// Heartbeat is how often the watch is probed; a watch silent for three
	// Heartbeats is re-established. Zero means 5s.
	Heartbeat time.Duration
	// OpTimeout bounds each list; zero means 5s.
	OpTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between failed lists; zero
	// means 250ms and 30s.
	MinBackoff, MaxBackoff time.Duration
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Verifier checks the signature of every value; nil accepts unsigned
	// values (--insecure-accept-unsigned).
	Verifier *api.Verifier
	// OnSignatureRejection, when set, is called (o.mu held) for every value
	// refused for its signature, with the reason (api.SignatureReason).
	OnSignatureRejection func(reason string)

	mu        sync.Mutex // guards everything below; held while calling OnChange
	cur       api.Override
	raw       []byte // the value taken last (nil: none)
	expiry    *time.Timer
	stopped   bool
	connected bool
	lastErr   string
	rejected  int64
	refused   int64 // mod revision of the value refused last
}

// OverridesStatus is the state of an override watch.
type OverridesStatus struct {
	Connected bool         `json:"connected"`
	Current   api.Override `json:"current"`
	LastError string       `json:"lastError,omitempty"`
	// SignatureRejections counts the values refused for their signature.
	SignatureRejections int64 `json:"signatureRejections"`
}

// Current returns the override in force (the zero Override when none).
func (o *Overrides) Current() api.Override {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cur
}

// Status returns the watch's state.
func (o *Overrides) Status() OverridesStatus {
	o.mu.Lock()
	defer o.mu.Unlock()
	return OverridesStatus{Connected: o.connected, Current: o.cur, LastError: o.lastErr, SignatureRejections: o.rejected}
}

// Run follows the override key until ctx ends, then returns nil. It returns
// an error only for invalid settings.
func (o *Overrides) Run(ctx context.Context) error {
	if o.Client == nil {
		return errors.New("overrides: no etcd client")
	}
	if !api.ValidID(o.Namespace) {
		return fmt.Errorf("overrides: invalid namespace %q", o.Namespace)
	}
	if err := api.ValidateNodeID(o.NodeID); err != nil {
		return fmt.Errorf("overrides: %w", err)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	defer func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.stopped, o.connected = true, false
		if o.expiry != nil {
			o.expiry.Stop()
		}
	}()
	key := o.Keys.Override(o.Namespace, o.NodeID)
	f, err := etcdwatch.New(etcdwatch.Settings{
		Client:     o.Client,
		Specs:      []etcdwatch.Spec{{Key: key}},
		OpTimeout:  o.OpTimeout,
		Heartbeat:  o.Heartbeat,
		MinBackoff: o.MinBackoff,
		MaxBackoff: o.MaxBackoff,
		Now:        o.Now,
		Listed: func(_ context.Context, _ int64, kvs [][]*mvccpb.KeyValue) error {
			var kv *mvccpb.KeyValue
			if len(kvs) > 0 && len(kvs[0]) > 0 {
				kv = kvs[0][0]
			}
			o.mu.Lock()
			defer o.mu.Unlock()
			o.connected = true
			o.take(kv)
			return nil
		},
		Changed: func(_ context.Context, _ int64, evs []*clientv3.Event) error {
			if len(evs) == 0 {
				return nil
			}
			ev := evs[len(evs)-1] // one key: the last event is its state
			var kv *mvccpb.KeyValue
			if ev.Type == clientv3.EventTypePut {
				kv = ev.Kv
			}
			o.mu.Lock()
			defer o.mu.Unlock()
			o.take(kv)
			return nil
		},
		Broken: func(err error) {
			o.mu.Lock()
			defer o.mu.Unlock()
			o.connected, o.lastErr = false, err.Error()
			o.Logger.Warn("override watch broken; keeping the current override", "node", o.NodeID, "err", err)
		},
	})
	if err != nil {
		return fmt.Errorf("overrides: %w", err)
	}
	return f.Run(ctx, 0)
}

// take records the key's value (nil: none) and delivers the override it
// puts in force. o.mu is held.
func (o *Overrides) take(kv *mvccpb.KeyValue) {
	var raw []byte
	if kv != nil {
		raw = kv.Value
	}
	if kv != nil && o.raw != nil && bytes.Equal(raw, o.raw) {
		return
	}
	if kv != nil && kv.ModRevision == o.refused {
		return // a list finding the refused value again
	}
	var ov api.Override
	if kv != nil {
		payload, _, err := o.Verifier.Open(string(kv.Key), raw)
		if err != nil {
			o.rejected++
			o.refused = kv.ModRevision
			if o.OnSignatureRejection != nil {
				o.OnSignatureRejection(api.SignatureReason(err))
			}
			o.lastErr = fmt.Sprintf("override at revision %d refused: %v", kv.ModRevision, err)
			o.Logger.Warn("override refused; keeping the current one", "node", o.NodeID, "err", o.lastErr)
			return
		}
		if ov, err = api.DecodeOverride(payload); err != nil {
			o.lastErr = fmt.Sprintf("override at revision %d is not valid: %v", kv.ModRevision, err)
			o.Logger.Warn("override refused; keeping the current one", "node", o.NodeID, "err", o.lastErr)
			return
		}
	}
	o.raw = bytes.Clone(raw)
	if o.expiry != nil {
		o.expiry.Stop()
		o.expiry = nil
	}
	if ov.Expires != nil {
		left := ov.Expires.Sub(o.Now())
		if left <= 0 {
			ov = api.Override{}
		} else {
			o.expiry = time.AfterFunc(left, func() {
				o.mu.Lock()
				defer o.mu.Unlock()
				if o.stopped || !bytes.Equal(o.raw, raw) {
					return // stopped, or replaced since
				}
				o.deliver(api.Override{})
			})
		}
	}
	o.deliver(ov)
}

// deliver makes ov current and calls OnChange when it differs. o.mu is held.
func (o *Overrides) deliver(ov api.Override) {
	if reflect.DeepEqual(ov, o.cur) {
		return
	}
	o.cur = ov
	o.Logger.Info("override changed", "node", o.NodeID, "drain", ov.Drain, "degradeLevels", ov.DegradeLevels, "by", ov.By, "reason", ov.Reason)
	if o.OnChange != nil {
		o.OnChange(ov)
	}
}
