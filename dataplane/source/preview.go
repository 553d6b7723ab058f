package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/etcdwatch"
)

// PreviewWatch follows a namespace's preview key (api.Keys.Preview) the way
// the rule set and canary are followed: list, watch from the next revision,
// list again after a broken watch. A value whose signature Verifier refuses,
// or that does not decode, is refused (logged, counted) and the node keeps
// the preview it runs; a deleted key, an Until that has passed, or a
// selector that does not match Labels stops the preview (OnChange(nil,
// nil)). A preview is stopped at its Until by a timer as well, so a node
// drops it on time even when the control plane never deletes the key.
//
// Run it once; Status is safe for concurrent use.
type PreviewWatch struct {
	Client    *clientv3.Client
	Keys      api.Keys
	Namespace string
	// Labels are this node's labels, matched against the preview's
	// selector (an empty selector matches every node).
	Labels map[string]string
	// Verifier checks each value's signature; nil accepts unsigned values.
	Verifier *api.Verifier
	// OnSignatureRejection, when set, counts a value refused for its
	// signature, with the reason.
	OnSignatureRejection func(reason string)
	// OnChange gets the preview to run, nil (and nil) to stop the running
	// one. It is called with the watch's lock held: it must not call
	// Status.
	OnChange func(p *api.Preview, v *api.Valid)
	Logger   *slog.Logger
	// Now is the wall clock; nil means time.Now.
	Now func() time.Time

	mu       sync.Mutex
	raw      []byte // the value taken last (nil: none)
	running  string // change id of the preview running, "" for none
	timer    *time.Timer
	stopped  bool
	rejected int64
	refused  int64
	lastErr  string
}

// PreviewStatus is the watch's state for /status.
type PreviewStatus struct {
	// Change is the change whose preview runs, empty for none.
	Change              string `json:"change,omitempty"`
	SignatureRejections int64  `json:"signatureRejections"`
	LastError           string `json:"lastError,omitempty"`
}

// Status returns the watch's state.
func (w *PreviewWatch) Status() PreviewStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	return PreviewStatus{Change: w.running, SignatureRejections: w.rejected, LastError: w.lastErr}
}

// SignatureRejections counts the values refused for their signature.
func (w *PreviewWatch) SignatureRejections() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rejected
}

// Run follows the key until ctx ends, then stops the running preview.
func (w *PreviewWatch) Run(ctx context.Context) error {
	if w.Client == nil {
		return errors.New("preview watch: no etcd client")
	}
	if w.Logger == nil {
		w.Logger = slog.Default()
	}
	if w.Now == nil {
		w.Now = time.Now
	}
	defer func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.stopped = true
		w.stop("node stopping")
	}()
	f, err := etcdwatch.New(etcdwatch.Settings{
		Client: w.Client,
		Specs:  []etcdwatch.Spec{{Key: w.Keys.Preview(w.Namespace)}},
		Listed: func(_ context.Context, _ int64, kvs [][]*mvccpb.KeyValue) error {
			var kv *mvccpb.KeyValue
			if len(kvs) > 0 && len(kvs[0]) > 0 {
				kv = kvs[0][0]
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			w.take(kv)
			return nil
		},
		Changed: func(_ context.Context, _ int64, evs []*clientv3.Event) error {
			if len(evs) == 0 {
				return nil
			}
			ev := evs[len(evs)-1]
			var kv *mvccpb.KeyValue
			if ev.Type == clientv3.EventTypePut {
				kv = ev.Kv
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			w.take(kv)
			return nil
		},
		Broken: func(err error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.lastErr = err.Error()
			w.Logger.Warn("preview watch broken; keeping the current preview until its end", "err", err)
		},
	})
	if err != nil {
		return fmt.Errorf("preview watch: %w", err)
	}
	return f.Run(ctx, 0)
}

// take takes the key's value (nil: absent or deleted). w.mu is held.
func (w *PreviewWatch) take(kv *mvccpb.KeyValue) {
	if kv == nil {
		w.raw = nil
		w.stop("preview deleted")
		return
	}
	if w.raw != nil && bytes.Equal(kv.Value, w.raw) || kv.ModRevision == w.refused {
		return
	}
	payload, _, err := w.Verifier.Open(string(kv.Key), kv.Value)
	if err != nil {
		w.rejected++
		w.refused = kv.ModRevision
		if w.OnSignatureRejection != nil {
			w.OnSignatureRejection(api.SignatureReason(err))
		}
		w.lastErr = fmt.Sprintf("preview at revision %d refused: %v", kv.ModRevision, err)
		w.Logger.Warn("preview refused", "err", w.lastErr)
		return
	}
	p, v, err := api.DecodePreview(payload)
	if err == nil && v.Rules().Namespace != w.Namespace {
		err = fmt.Errorf("its rules are for namespace %q", v.Rules().Namespace)
	}
	if err != nil {
		w.refused = kv.ModRevision
		w.lastErr = fmt.Sprintf("preview at revision %d is not valid: %v", kv.ModRevision, err)
		w.Logger.Warn("preview refused", "err", w.lastErr)
		return
	}
	w.raw = bytes.Clone(kv.Value)
	left := p.Until.Sub(w.Now())
	if left <= 0 || !p.Selector.Matches(w.Labels) && len(p.Selector) > 0 {
		w.stop("preview ended or not for this node")
		return
	}
	if w.timer != nil {
		w.timer.Stop()
	}
	raw := w.raw
	w.timer = time.AfterFunc(left, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if !w.stopped && bytes.Equal(w.raw, raw) {
			w.stop("preview ended")
		}
	})
	w.running = p.Change
	w.Logger.Info("preview started", "change", p.Change, "checksum", p.Checksum, "until", p.Until)
	if w.OnChange != nil {
		w.OnChange(p, v)
	}
}

// stop stops the running preview, if any. w.mu is held.
func (w *PreviewWatch) stop(why string) {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if w.running == "" {
		return
	}
	w.Logger.Info("preview stopped", "change", w.running, "why", why)
	w.running = ""
	if w.OnChange != nil {
		w.OnChange(nil, nil)
	}
}
