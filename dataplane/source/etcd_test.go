package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
)

var logLevel = slog.LevelError

// The embedded etcd the tests run is package etcdtest's.
type TestEtcd = etcdtest.Server

// MustEtcd starts an embedded etcd that the test's cleanup stops.
func MustEtcd(tb testing.TB) *TestEtcd { return etcdtest.Start(tb) }

var (
	freeLoopbackURL   = etcdtest.FreeLoopbackURL
	mustClient        = etcdtest.MustClient
	unreachableClient = etcdtest.UnreachableClient
)

const testRules = `{"namespace": %q,
 "routes": [{"id": "a", "upstream": {"targets": [{"url": "http://127.0.0.1:1"}]}}],
 "limits": [{"id": "l", "algorithm": "token_bucket", "rate": %d}]}`

// mustRules is a valid rule set of namespace ns whose content depends on n.
func mustRules(tb testing.TB, ns string, n int64) *api.RuleSet {
	tb.Helper()
	rs, err := api.Decode(fmt.Appendf(nil, testRules, ns, n))
	if err != nil {
		tb.Fatalf("decoding test rules: %v", err)
	}
	return rs
}

// mustPublished is the ruleset value of version v; rate picks its content
// (0 means v).
func mustPublished(tb testing.TB, ns string, v, rate int64) []byte {
	tb.Helper()
	if rate == 0 {
		rate = v
	}
	rs := mustRules(tb, ns, rate)
	data, err := json.Marshal(api.Published{Version: v, Checksum: rs.Checksum(), PublishedAt: time.Unix(1700000000, 0).UTC(), PublishedBy: "test", Rules: rs})
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

func mustCanary(tb testing.TB, ns string, v, rate int64, sel api.Selector) []byte {
	tb.Helper()
	data, err := json.Marshal(api.Canary{Version: v, Selector: sel, Published: mustPublished(tb, ns, v, rate)})
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

func mustPut(tb testing.TB, c *clientv3.Client, key string, val []byte) int64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Put(ctx, key, string(val))
	if err != nil {
		tb.Fatalf("put %s: %v", key, err)
	}
	return resp.Header.Revision
}

func mustDelete(tb testing.TB, c *clientv3.Client, key string) int64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Delete(ctx, key)
	if err != nil {
		tb.Fatalf("delete %s: %v", key, err)
	}
	return resp.Header.Revision
}

// recorder is an Apply that behaves like the gateway: it decodes and
// validates the rules, and records every update.
type recorder struct {
	tb     testing.TB
	ns     string
	ch     chan Update
	mu     sync.Mutex
	refuse func(Update) error
}

func newRecorder(tb testing.TB, ns string) *recorder {
	return &recorder{tb: tb, ns: ns, ch: make(chan Update, 100)}
}

func (r *recorder) apply(ctx context.Context, u Update) error {
	var err error
	if u.Err == nil {
		rs, derr := api.Decode(u.Data)
		switch {
		case derr != nil:
			r.tb.Errorf("source passed rules that do not decode: %v", derr)
		case rs.Validate() != nil:
			r.tb.Errorf("source passed rules that do not validate: %v", rs.Validate())
		case rs.Namespace != r.ns:
			r.tb.Errorf("source passed rules of namespace %q", rs.Namespace)
		}
		r.mu.Lock()
		if r.refuse != nil {
			err = r.refuse(u)
		}
		r.mu.Unlock()
	}
	r.ch <- u
	if u.Err != nil {
		return u.Err
	}
	return err
}

// next waits for the next update.
func (r *recorder) next() Update {
	r.tb.Helper()
	select {
	case u := <-r.ch:
		return u
	case <-time.After(10 * time.Second):
		r.tb.Fatal("no update within 10s")
		return Update{}
	}
}

// wantVersion waits for the next update and checks it is a document of
// version v.
func (r *recorder) wantVersion(v int64) Update {
	r.tb.Helper()
	u := r.next()
	if u.Err != nil || u.Version != v {
		r.tb.Fatalf("got update version %d err %v, want version %d", u.Version, u.Err, v)
	}
	return u
}

// wantApplied waits for an update of version v and for s to record it as
// applied (the recorder sees the update before s saves it).
func (r *recorder) wantApplied(s *Etcd, v int64) {
	r.tb.Helper()
	r.wantVersion(v)
	waitFor(r.tb, fmt.Sprintf("version %d applied", v), func() bool { return s.Status().Version == v })
}

// wantErr waits for the next update and checks it is a refusal mentioning
// want.
func (r *recorder) wantErr(want string) {
	r.tb.Helper()
	u := r.next()
	if u.Err == nil || !strings.Contains(u.Err.Error(), want) {
		r.tb.Fatalf("got update version %d err %v, want an error containing %q", u.Version, u.Err, want)
	}
}

// none checks that no update is pending.
func (r *recorder) none() {
	r.tb.Helper()
	select {
	case u := <-r.ch:
		r.tb.Fatalf("unexpected update: version %d err %v", u.Version, u.Err)
	default:
	}
}

func testSource(c *clientv3.Client, ns string) *Etcd {
	return &Etcd{
		Logger:         slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel})),
		Client:         c,
		Namespace:      ns,
		ConnectTimeout: 500 * time.Millisecond,
		OpTimeout:      time.Second,
		Heartbeat:      100 * time.Millisecond,
		MinBackoff:     20 * time.Millisecond,
		MaxBackoff:     200 * time.Millisecond,
	}
}

// runSource runs s.Run until the test ends.
func runSource(tb testing.TB, s *Etcd, apply Apply) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, apply) }()
	tb.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				tb.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			tb.Error("Run did not return within 10s of cancel")
		}
	})
}

func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestEtcdListAndWatch(t *testing.T) {
	t.Parallel()
	te := MustEtcd(t)
	c := te.Client(t)
	keys := api.Keys{Prefix: "/custom/prefix/"}
	mustPut(t, c, keys.RuleSet("shop"), mustPublished(t, "shop", 1, 0))
	// Another namespace's and another prefix's keys are not followed.
	mustPut(t, c, keys.RuleSet("other"), mustPublished(t, "other", 9, 0))
	mustPut(t, c, api.Keys{}.RuleSet("shop"), mustPublished(t, "shop", 9, 0))

	dir := t.TempDir()
	s := testSource(c, "shop")
	s.Keys, s.StateDir = keys, dir
	rec := newRecorder(t, "shop")
	runSource(t, s, rec.apply)
	u := rec.wantVersion(1)
	if want := "etcd:" + te.Endpoints[0]; u.Source != want {
		t.Errorf("Source = %q, want %q", u.Source, want)
	}
	for v := int64(2); v <= 4; v++ {
		mustPut(t, c, keys.RuleSet("shop"), mustPublished(t, "shop", v, 0))
	}
	for v := int64(2); v <= 4; v++ {
		// Versions may be coalesced (latest wins) but never reordered.
		u := rec.next()
		if u.Err != nil || u.Version < v || u.Version > 4 {
			t.Fatalf("got version %d err %v, want %d..4", u.Version, u.Err, v)
		}
		v = u.Version
	}
	// The same document written again is not applied again.
	rev := mustPut(t, c, keys.RuleSet("shop"), mustPublished(t, "shop", 4, 0))
	waitFor(t, "revision", func() bool { return s.Status().Revision >= rev })
	rec.none()

	st := s.Status()
	if st.State != StateConnected || st.Version != 4 || st.PublishedVersion != 4 || st.Canary {
		t.Errorf("status = %+v", st)
	}
	saved, err := LoadState(dir, "shop")
	if err != nil {
		t.Fatalf("LoadState: %v", err)
	}
	if saved.Doc.Version != 4 || saved.PublishedVersion != 4 || saved.Canary {
		t.Errorf("saved state: version %d published %d canary %v", saved.Doc.Version, saved.PublishedVersion, saved.Canary)
	}
}

func TestEtcdCompactionForcesRelist(t *testing.T) {
	t.Parallel()
	te := MustEtcd(t)
	c := te.Client(t)
	key := api.Keys{}.RuleSet("shop")
	mustPut(t, c, key, mustPublished(t, "shop", 1, 0))
	s := testSource(c, "shop")
	rec := newRecorder(t, "shop")
	// Start lists at R and applies version 1; the watch from R+1 starts only
	// with Run. Meanwhile etcd moves on and compacts past R+1.
	if err := s.Start(context.Background(), rec.apply); err != nil {
		t.Fatalf("Start: %v", err)
	}
	rec.wantVersion(1)
	var rev int64
	for v := int64(2); v <= 5; v++ {
		rev = mustPut(t, c, key, mustPublished(t, "shop", v, 0))
	}
	if _, err := c.Compact(context.Background(), rev); err != nil {
		t.Fatalf("compact: %v", err)
	}
	lists := s.Status().Lists
	runSource(t, s, rec.apply)
	rec.wantVersion(5) // 2..4 were compacted away: the re-list sees 5
	if got := s.Status().Lists; got != lists+1 {
		t.Errorf("lists = %d, want %d (one re-list after the compaction)", got, lists+1)
	}
	mustPut(t, c, key, mustPublished(t, "shop", 6, 0))
	rec.wantVersion(6)
	rec.none()
}

func TestEtcdRefusals(t *testing.T) {
	t.Parallel()
	te := MustEtcd(t)
	c := te.Client(t)
	tests := []struct {
		desc  string
		value func(ns string) []byte
		want  string
	}{
		{"not JSON", func(string) []byte { return []byte("version: 3\n") }, "not valid JSON"},
		{"failing validation", func(ns string) []byte {
			return []byte(`{"version": 3, "checksum": "x", "rules": {"namespace": "` + ns + `", "limits": [{"id": "l", "algorithm": "token_bucket", "rate": 0}]}}`)
		}, "invalid rules"},
		{"unknown field", func(ns string) []byte {
			return []byte(`{"version": 3, "checksum": "x", "rules": {"namespace": "` + ns + `", "bogus": 1}}`)
		}, "bogus"},
		{"wrong checksum", func(ns string) []byte {
			var p map[string]any
			_ = json.Unmarshal(mustPublished(t, ns, 3, 0), &p)
			p["checksum"] = "sha256:0000"
			b, _ := json.Marshal(p)
			return b
		}, "checksum"},
		{"older version", func(ns string) []byte { return mustPublished(t, ns, 1, 0) }, "older than version 2"},
		{"same version, other content", func(ns string) []byte { return mustPublished(t, ns, 2, 7) }, "changed its checksum"},
		{"other namespace", func(string) []byte { return mustPublished(t, "elsewhere", 3, 0) }, `for namespace "elsewhere"`},
		{"bad canary", func(string) []byte { return nil }, "canary"},
	}
	for i, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			ns := fmt.Sprintf("refuse-%d", i)
			keys := api.Keys{}
			mustPut(t, c, keys.RuleSet(ns), mustPublished(t, ns, 2, 0))
			dir := t.TempDir()
			s := testSource(c, ns)
			s.StateDir = dir
			s.Labels = map[string]string{"zone": "a"}
			rec := newRecorder(t, ns)
			runSource(t, s, rec.apply)
			rec.wantVersion(2)
			if v := tc.value(ns); v != nil {
				mustPut(t, c, keys.RuleSet(ns), v)
			} else {
				mustPut(t, c, keys.Canary(ns), []byte(`{"version": 3, "selector": {"zone": "a"}, "published": {"version": 4}}`))
			}
			rec.wantErr(tc.want)
			if st := s.Status(); st.Version != 2 || !strings.Contains(st.LastError, tc.want) {
				t.Errorf("status after refusal: version %d, last error %q", st.Version, st.LastError)
			}
			if saved, err := LoadState(dir, ns); err != nil || saved.Doc.Version != 2 {
				t.Errorf("state after refusal: %v, %v", saved, err)
			}
			// The source goes on: a good newer version is applied.
			mustPut(t, c, keys.RuleSet(ns), mustPublished(t, ns, 5, 0))
			rec.wantApplied(s, 5)
			rec.none()
		})
	}
}

func TestEtcdGatewayRefusalIsNotApplied(t *testing.T) {
	t.Parallel()
	te := MustEtcd(t)
	c := te.Client(t)
	key := api.Keys{}.RuleSet("shop")
	mustPut(t, c, key, mustPublished(t, "shop", 1, 0))
	dir := t.TempDir()
	s := testSource(c, "shop")
	s.StateDir = dir
	rec := newRecorder(t, "shop")
	rec.refuse = func(u Update) error {
		if u.Version == 2 {
			return errors.New("compiling rule set: no")
		}
		return nil
	}
	runSource(t, s, rec.apply)
	rec.wantVersion(1)
	mustPut(t, c, key, mustPublished(t, "shop", 2, 0))
	rec.wantVersion(2) // offered, refused
	waitFor(t, "the refusal", func() bool { return s.Status().LastError != "" })
	st := s.Status()
	if st.Version != 1 || !strings.Contains(st.LastError, "refused by the gateway") {
		t.Errorf("status: %+v", st)
	}
	if saved, err := LoadState(dir, "shop"); err != nil || saved.Doc.Version != 1 {
		t.Fatalf("the refused version was saved: %v, %v", saved, err)
	}
	// Version 3 is newer than the applied 1.
	mustPut(t, c, key, mustPublished(t, "shop", 3, 0))
	rec.wantVersion(3)
}

func TestEtcdReconnects(t *testing.T) {
	t.Parallel()
	te := MustEtcd(t)
	c := te.Client(t)
	key := api.Keys{}.RuleSet("shop")
	mustPut(t, c, key, mustPublished(t, "shop", 1, 0))
	s := testSource(c, "shop")
	rec := newRecorder(t, "shop")
	runSource(t, s, rec.apply)
	rec.wantVersion(1)
	waitFor(t, "connected", func() bool { return s.Status().State == StateConnected })

	te.Stop()
	stopped := time.Now()
	waitFor(t, "reconnecting", func() bool {
		st := s.Status()
		if time.Since(stopped) > 9*time.Second {
			t.Logf("still %+v %v after etcd stopped", st, time.Since(stopped))
		}
		return st.State == StateReconnecting
	})
	if st := s.Status(); st.Version != 1 || st.LastError == "" {
		t.Errorf("status while etcd is down: %+v", st)
	}
	rec.none() // the applied document stays; nothing is emitted

	te.Restart()
	mustPut(t, c, key, mustPublished(t, "shop", 2, 0))
	rec.wantVersion(2)
	waitFor(t, "connected again", func() bool { return s.Status().State == StateConnected })
}

func TestEtcdBootsFromStateDir(t *testing.T) {
	t.Parallel()
	te := MustEtcd(t)
	c := te.Client(t)
	key := api.Keys{}.RuleSet("shop")
	mustPut(t, c, key, mustPublished(t, "shop", 1, 0))
	dir := t.TempDir()

	// A first run fills the state dir.
	first := testSource(c, "shop")
	first.StateDir = dir
	rec := newRecorder(t, "shop")
	if err := first.Start(context.Background(), rec.apply); err != nil {
		t.Fatalf("Start: %v", err)
	}
	rec.wantVersion(1)

	te.Stop()
	// Without a state dir a node cannot start.
	bare := testSource(mustClient(t, te.Endpoints), "shop")
	if err := bare.Start(context.Background(), newRecorder(t, "shop").apply); !errors.Is(err, ErrNoState) {
		t.Fatalf("Start without etcd or state: %v, want ErrNoState", err)
	}

	s := testSource(mustClient(t, te.Endpoints), "shop")
	s.StateDir = dir
	rec = newRecorder(t, "shop")
	start := time.Now()
	if err := s.Start(context.Background(), rec.apply); err != nil {
		t.Fatalf("Start from the state dir: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Start took %v with etcd down", d)
	}
	rec.wantVersion(1)
	if st := s.Status(); st.State != StateBootedFromCache || st.Version != 1 || st.LastError == "" {
		t.Errorf("status: %+v", st)
	}
	runSource(t, s, rec.apply)

	te.Restart()
	mustPut(t, c, key, mustPublished(t, "shop", 2, 0))
	rec.wantApplied(s, 2)
	waitFor(t, "connected", func() bool { return s.Status().State == StateConnected })
	if saved, err := LoadState(dir, "shop"); err != nil || saved.Doc.Version != 2 {
		t.Fatalf("state after catching up: %v, %v", saved, err)
	}
	rec.none()
}

func TestEtcdStateDirOrdersEtcd(t *testing.T) {
	// The state dir holds version 3; etcd offers an older version 2 (say,
	// restored from an old backup): the node boots on 3 and refuses 2.
	t.Parallel()
	te := MustEtcd(t)
	c := te.Client(t)
	dir := t.TempDir()
	if err := SaveState(dir, &State{Namespace: "shop", Published: mustPublished(t, "shop", 3, 0), PublishedVersion: 3}); err != nil {
		t.Fatal(err)
	}
	mustPut(t, c, api.Keys{}.RuleSet("shop"), mustPublished(t, "shop", 2, 0))
	s := testSource(c, "shop")
	s.StateDir = dir
	rec := newRecorder(t, "shop")
	if err := s.Start(context.Background(), rec.apply); err != nil {
		t.Fatalf("Start: %v", err)
	}
	rec.wantErr("older than version 3")
	rec.wantVersion(3)
	if st := s.Status(); st.State != StateConnected || st.Version != 3 {
		t.Errorf("status: %+v", st)
	}
}

func TestEtcdCorruptState(t *testing.T) {
	t.Parallel()
	good := mustPublished(t, "shop", 1, 0)
	envelope := func(published []byte, extra string) []byte {
		return fmt.Appendf(nil, `{"namespace": "shop", "published": %s, "publishedVersion": 1, "savedAt": "2025-01-01T00:00:00Z"%s}`, published, extra)
	}
	badSum := []byte(strings.Replace(string(good), `"checksum":"`, `"checksum":"x`, 1))
	invalid := []byte(`{"version": 1, "checksum": "x", "rules": {"namespace": "shop", "limits": [{"id": "l", "algorithm": "token_bucket", "rate": -1}]}}`)
	tests := []struct {
		desc string
		data []byte
		want string
	}{
		{"empty file", nil, "not a state document"},
		{"not JSON", []byte("{nope"), "not a state document"},
		{"unknown field", envelope(good, `, "extra": 1`), "unknown field"},
		{"trailing data", append(envelope(good, ""), "{}"...), "trailing data"},
		{"other namespace", []byte(strings.Replace(string(envelope(good, "")), `"namespace": "shop"`, `"namespace": "other"`, 1)), `namespace "other"`},
		{"wrong checksum", envelope(badSum, ""), "checksum"},
		{"failing validation", envelope(invalid, ""), "invalid rules"},
		{"no document", []byte(`{"namespace": "shop", "publishedVersion": 1}`), "not valid JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := StatePath(dir, "shop")
			if err := os.WriteFile(path, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadState(dir, "shop"); !errors.Is(err, ErrCorruptState) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("LoadState: %v, want ErrCorruptState with %q", err, tc.want)
			}
			s := testSource(unreachableClient(t), "shop")
			s.StateDir = dir
			rec := newRecorder(t, "shop")
			err := s.Start(context.Background(), rec.apply)
			if !errors.Is(err, ErrCorruptState) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Start: %v, want ErrCorruptState naming %s and %q", err, path, tc.want)
			}
			rec.none()
		})
	}
}

func TestEtcdStateDirUnusable(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc string
		dir  string
		skip bool
	}{
		{"a regular file", file, false},
		{"under a regular file", filepath.Join(file, "state"), false},
		{"read-only dir", filepath.Join(tmp, "ro"), os.Geteuid() == 0},
	}
	if err := os.Mkdir(filepath.Join(tmp, "ro"), 0o500); err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if tc.skip {
				t.Skip("root writes to read-only dirs")
			}
			s := testSource(unreachableClient(t), "shop")
			s.StateDir = tc.dir
			rec := newRecorder(t, "shop")
			err := s.Start(context.Background(), rec.apply)
			if !errors.Is(err, ErrStateDir) || !strings.Contains(err.Error(), tc.dir) {
				t.Errorf("Start: %v, want ErrStateDir naming %s", err, tc.dir)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := s.Run(ctx, rec.apply); !errors.Is(err, ErrStateDir) {
				t.Errorf("Run: %v, want ErrStateDir", err)
			}
			rec.none()
		})
	}
}

func TestEtcdCanary(t *testing.T) {
	t.Parallel()
	te := MustEtcd(t)
	c := te.Client(t)
	keys := api.Keys{}
	ns := "shop"
	mustPut(t, c, keys.RuleSet(ns), mustPublished(t, ns, 1, 0))

	dirA := t.TempDir()
	a := testSource(c, ns)
	a.Labels, a.StateDir = map[string]string{"zone": "a", "tier": "edge"}, dirA
	b := testSource(c, ns)
	b.Labels = map[string]string{"zone": "b", "tier": "edge"}
	recA, recB := newRecorder(t, ns), newRecorder(t, ns)
	runSource(t, a, recA.apply)
	runSource(t, b, recB.apply)
	recA.wantVersion(1)
	recB.wantVersion(1)
	seen := func(s *Etcd, rev int64) {
		t.Helper()
		waitFor(t, "revision", func() bool { return s.Status().Revision >= rev })
	}

	// A canary for zone a: only A runs it.
	rev := mustPut(t, c, keys.Canary(ns), mustCanary(t, ns, 2, 0, api.Selector{"zone": "a"}))
	recA.wantApplied(a, 2)
	seen(b, rev)
	recB.none()
	if st := a.Status(); !st.Canary || st.Version != 2 || st.PublishedVersion != 1 {
		t.Errorf("A status: %+v", st)
	}
	if saved, err := LoadState(dirA, ns); err != nil || !saved.Canary || saved.Doc.Version != 2 || saved.PublishedVersion != 1 {
		t.Errorf("A state: %+v, %v", saved, err)
	}

	// A canary replaced by an older one is refused.
	mustPut(t, c, keys.RuleSet(ns), mustPublished(t, ns, 1, 0)) // unchanged value, new revision: ignored
	rev = mustPut(t, c, keys.Canary(ns), mustCanary(t, ns, 3, 0, api.Selector{"zone": "a"}))
	recA.wantVersion(3)
	mustPut(t, c, keys.Canary(ns), mustCanary(t, ns, 2, 0, api.Selector{"zone": "a"}))
	recA.wantErr("not newer than applied version 3")

	// Canary aborted: A returns to the published version 1.
	mustDelete(t, c, keys.Canary(ns))
	recA.wantApplied(a, 1)
	if st := a.Status(); st.Canary || st.Version != 1 {
		t.Errorf("A status after abort: %+v", st)
	}

	// A selector that matches nobody: nothing changes.
	rev = mustPut(t, c, keys.Canary(ns), mustCanary(t, ns, 4, 0, api.Selector{"zone": "a", "tier": "core"}))
	seen(a, rev)
	seen(b, rev)
	recA.none()
	recB.none()

	// Canary 4 for the edge tier, then promoted: published 4 with the same
	// content. A and B already run it; nothing is applied again.
	mustPut(t, c, keys.Canary(ns), mustCanary(t, ns, 4, 0, api.Selector{"tier": "edge"}))
	recA.wantVersion(4)
	recB.wantVersion(4)
	mustPut(t, c, keys.RuleSet(ns), mustPublished(t, ns, 4, 0))
	rev = mustDelete(t, c, keys.Canary(ns))
	seen(a, rev)
	seen(b, rev)
	recA.none()
	recB.none()
	if st := a.Status(); st.Canary || st.Version != 4 || st.PublishedVersion != 4 {
		t.Errorf("A status after promotion: %+v", st)
	}
	if saved, err := LoadState(dirA, ns); err != nil || saved.Canary || saved.PublishedVersion != 4 {
		t.Errorf("A state after promotion: %+v, %v", saved, err)
	}
}

// TestGatewayDoesNotLinkEtcdServer keeps the embedded etcd server (which
// these tests use) out of the gateway binary and the packages it wires in.
func TestGatewayDoesNotLinkEtcdServer(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command(goBin, "list", "-e", "-deps", "../cmd/sluice-gateway", "./", "../registry").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "go.etcd.io/etcd/client/v3") {
		t.Log("note: the gateway does not link the etcd client yet")
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		if strings.Contains(line, "go.etcd.io/etcd/server") || strings.Contains(line, "go.etcd.io/bbolt") || strings.Contains(line, "go.etcd.io/raft") {
			t.Errorf("the gateway, source or registry links %s", line)
		}
	}
}
