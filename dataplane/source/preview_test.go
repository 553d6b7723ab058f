package source

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
)

// previewLog records what a PreviewWatch hands the node.
type previewLog struct {
	mu  sync.Mutex
	got []string // change ids, "" for a stop
}

func (l *previewLog) onChange(p *api.Preview, _ *api.Valid) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p == nil {
		l.got = append(l.got, "")
		return
	}
	l.got = append(l.got, p.Change)
}

func (l *previewLog) last() (string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.got) == 0 {
		return "none", 0
	}
	return l.got[len(l.got)-1], len(l.got)
}

func mustPreviewValue(tb testing.TB, ns, change string, until time.Time, sel api.Selector) []byte {
	tb.Helper()
	b, err := json.Marshal(api.Preview{Change: change, Checksum: "sha256:x", Rules: json.RawMessage(fmt.Sprintf(testRules, ns, 5)), Until: until, Selector: sel})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestPreviewWatch: a node runs a signed preview for it; refuses a forged
// one (and keeps what it runs); stops one whose selector misses its labels,
// one whose end has passed, one at its end (the timer), and one deleted.
func TestPreviewWatch(t *testing.T) {
	t.Parallel()
	te := MustEtcd(t)
	c := te.Client(t)
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	_, mallory, _ := ed25519.GenerateKey(rand.Reader)
	signer := mustSigner(t, priv)
	keys := api.Keys{}
	key := keys.Preview("shop")
	var clock struct {
		sync.Mutex
		t time.Time
	}
	clock.t = time.Now()
	now := func() time.Time { clock.Lock(); defer clock.Unlock(); return clock.t }
	var log previewLog
	var rejected []string
	var rmu sync.Mutex
	w := &PreviewWatch{Client: c, Keys: keys, Namespace: "shop", Labels: map[string]string{"zone": "a"}, Verifier: mustTrust(t, priv),
		OnChange: log.onChange, Now: now, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel})),
		OnSignatureRejection: func(r string) { rmu.Lock(); rejected = append(rejected, r); rmu.Unlock() }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	want := func(what, change string, n int) {
		t.Helper()
		waitFor(t, what, func() bool { got, m := log.last(); return got == change && m == n })
	}

	mustPut(t, c, key, mustSign(t, signer, key, mustPreviewValue(t, "shop", "1", now().Add(time.Hour), nil)))
	want("the signed preview runs", "1", 1)
	mustPut(t, c, key, mustSign(t, mustSigner(t, mallory), key, mustPreviewValue(t, "shop", "2", now().Add(time.Hour), nil)))
	waitFor(t, "the forged preview refused", func() bool { return w.SignatureRejections() == 1 })
	if got, n := log.last(); got != "1" || n != 1 || w.Status().Change != "1" {
		t.Fatalf("after a forged value: %q (%d calls), status %+v; want preview 1 still running", got, n, w.Status())
	}
	mustPut(t, c, key, mustSign(t, signer, key, mustPreviewValue(t, "shop", "3", now().Add(time.Hour), api.Selector{"zone": "b"})))
	want("a preview for other nodes stops this one's", "", 2)
	mustPut(t, c, key, mustSign(t, signer, key, mustPreviewValue(t, "shop", "4", now().Add(-time.Second), nil)))
	if got, n := log.last(); got != "" || n != 2 {
		t.Fatalf("a preview already over started: %q (%d)", got, n)
	}
	mustPut(t, c, key, mustSign(t, signer, key, mustPreviewValue(t, "shop", "5", now().Add(time.Hour), api.Selector{"zone": "a"})))
	want("a preview selecting this node runs", "5", 3)
	mustDelete(t, c, key)
	want("deleting the key stops it", "", 4)
	// The end: the node's clock says the end is 20ms away, so the timer
	// stops it without the key changing.
	mustPut(t, c, key, mustSign(t, signer, key, mustPreviewValue(t, "shop", "6", now().Add(20*time.Millisecond), nil)))
	want("the preview stops at its end", "", 6)
	rmu.Lock()
	defer rmu.Unlock()
	if len(rejected) != 1 || rejected[0] != "unknown-key" {
		t.Fatalf("signature rejections %v", rejected)
	}
}
