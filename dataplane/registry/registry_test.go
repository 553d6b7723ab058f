package registry

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
)

// getNode reads a node's registration: its status and lease (0, false when
// absent).
func getNode(tb testing.TB, c *clientv3.Client, ns, id string) (api.NodeStatus, clientv3.LeaseID, bool) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, api.Keys{}.Node(ns, id))
	if err != nil {
		tb.Fatalf("get: %v", err)
	}
	if len(resp.Kvs) == 0 {
		return api.NodeStatus{}, 0, false
	}
	var st api.NodeStatus
	if err := json.Unmarshal(resp.Kvs[0].Value, &st); err != nil {
		tb.Fatalf("registration is not a NodeStatus: %v", err)
	}
	return st, clientv3.LeaseID(resp.Kvs[0].Lease), true
}

func testRegistrar(c *clientv3.Client, id string, status func() api.NodeStatus) *Registrar {
	return &Registrar{
		Client: c, Namespace: "shop", NodeID: id, NodeStatus: status,
		TTL: 2 * time.Second, Poll: 20 * time.Millisecond,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		OpTimeout: 2 * time.Second, Logger: testLogger(),
	}
}

func TestRegistrar(t *testing.T) {
	t.Parallel()
	te := MustEtcd(t)
	c := te.Client(t)
	var version atomic.Int64
	version.Store(1)
	status := func() api.NodeStatus {
		return api.NodeStatus{Address: "10.0.0.1:9000", Labels: map[string]string{"zone": "a"}, Build: "test", Version: version.Load()}
	}
	r := testRegistrar(te.Client(t), "n1", status)
	stop := runUntilCleanup(t, r.Run)

	// Appears, bound to a lease of the TTL.
	var first api.NodeStatus
	var lease clientv3.LeaseID
	waitFor(t, "registration", func() bool {
		var ok bool
		first, lease, ok = getNode(t, c, "shop", "n1")
		return ok
	})
	if first.NodeID != "n1" || first.Namespace != "shop" || first.Version != 1 || first.Labels["zone"] != "a" || first.UpdatedAt.IsZero() {
		t.Errorf("registration: %+v", first)
	}
	if lease == 0 {
		t.Fatal("registration is not bound to a lease")
	}
	ttl, err := c.TimeToLive(context.Background(), lease)
	if err != nil || ttl.GrantedTTL != 2 {
		t.Errorf("lease: %+v, %v", ttl, err)
	}
	// The registrar records the registration in its status when the write
	// returns, which may be just after the test sees the key.
	waitFor(t, "registered status", func() bool {
		st := r.Status()
		return st.Registered && st.LeaseID == int64(lease) && st.Registrations == 1
	})

	// Updates when the status changes.
	version.Store(2)
	waitFor(t, "updated registration", func() bool {
		st, _, ok := getNode(t, c, "shop", "n1")
		return ok && st.Version == 2
	})
	// Refreshed at least every TTL/2 while unchanged.
	st2, _, _ := getNode(t, c, "shop", "n1")
	waitFor(t, "refresh", func() bool {
		st, _, ok := getNode(t, c, "shop", "n1")
		return ok && st.UpdatedAt.After(st2.UpdatedAt)
	})

	// Revoked behind its back: registered again under a new lease.
	if _, err := c.Revoke(context.Background(), lease); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	waitFor(t, "re-registration", func() bool {
		st, l, ok := getNode(t, c, "shop", "n1")
		rs := r.Status()
		return ok && l != 0 && l != lease && st.Version == 2 && rs.Registered && rs.LeaseID == int64(l)
	})
	if st := r.Status(); st.Registrations != 2 || !st.Registered {
		t.Errorf("status after re-registration: %+v", st)
	}

	// A clean stop removes the registration at once.
	stop()
	if st, _, ok := getNode(t, c, "shop", "n1"); ok {
		t.Errorf("registration still there after a clean stop: %+v", st)
	}
	if st := r.Status(); st.Registered {
		t.Errorf("status after stop: %+v", st)
	}
}

func TestRegistrarOutlivesEtcdRestart(t *testing.T) {
	t.Parallel()
	te := MustEtcd(t)
	c := te.Client(t)
	var version atomic.Int64
	version.Store(1)
	r := testRegistrar(te.Client(t), "n1", func() api.NodeStatus { return api.NodeStatus{Version: version.Load()} })
	runUntilCleanup(t, r.Run)
	waitFor(t, "registration", func() bool { _, _, ok := getNode(t, c, "shop", "n1"); return ok })

	te.Stop()
	version.Store(2)                    // changes while etcd is down are written when it is back
	time.Sleep(2500 * time.Millisecond) // longer than the TTL: the client's lease deadline passes
	te.Restart()
	waitFor(t, "registration after the restart", func() bool {
		st, _, ok := getNode(t, c, "shop", "n1")
		return ok && st.Version == 2
	})
}

func TestRegistrarSettings(t *testing.T) {
	t.Parallel()
	c := unreachableClient(t)
	status := func() api.NodeStatus { return api.NodeStatus{} }
	tests := []struct {
		desc string
		r    *Registrar
	}{
		{"no client", &Registrar{Namespace: "shop", NodeID: "n1", NodeStatus: status}},
		{"bad namespace", &Registrar{Client: c, Namespace: "Shop!", NodeID: "n1", NodeStatus: status}},
		{"no node id", &Registrar{Client: c, Namespace: "shop", NodeStatus: status}},
		{"node id with a slash", &Registrar{Client: c, Namespace: "shop", NodeID: "a/b", NodeStatus: status}},
		{"no status", &Registrar{Client: c, Namespace: "shop", NodeID: "n1"}},
		// Accepted by the registrar's own rule (only / and whitespace were
		// refused), refused by the control plane's ([A-Za-z0-9._-]{1,128}):
		// the node registered but never showed in the control plane.
		{"node id with a colon", &Registrar{Client: c, Namespace: "shop", NodeID: "gw:1", NodeStatus: status}},
		{"node id not ASCII", &Registrar{Client: c, Namespace: "shop", NodeID: "gw-é", NodeStatus: status}},
		{"node id too long", &Registrar{Client: c, Namespace: "shop", NodeID: strings.Repeat("n", 129), NodeStatus: status}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if err := tc.r.Run(context.Background()); err == nil {
				t.Error("Run accepted invalid settings")
			}
		})
	}
}

// TestOverridesSettings: the override watch refuses the node ids the
// registrar and the control plane refuse (it used to refuse only "").
func TestOverridesSettings(t *testing.T) {
	t.Parallel()
	c := unreachableClient(t)
	for _, id := range []string{"", "a/b", "gw:1", "gw 1"} {
		t.Run(id, func(t *testing.T) {
			err := (&Overrides{Client: c, Namespace: "shop", NodeID: id, Logger: testLogger()}).Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), api.NodeIDRule) {
				t.Fatalf("Run with node id %q: %v, want an error saying %q", id, err, api.NodeIDRule)
			}
		})
	}
}

func TestOverrides(t *testing.T) {
	t.Parallel()
	te := MustEtcd(t)
	c := te.Client(t)
	key := api.Keys{}.Override("shop", "n1")
	// An override written before the node starts is delivered at once.
	if _, err := c.Put(context.Background(), key, `{"drain": true, "by": "alice"}`); err != nil {
		t.Fatal(err)
	}
	got := make(chan api.Override, 10)
	o := &Overrides{
		Client: te.Client(t), Namespace: "shop", NodeID: "n1",
		OnChange:  func(ov api.Override) { got <- ov },
		Heartbeat: 100 * time.Millisecond, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		Logger: testLogger(),
	}
	runUntilCleanup(t, o.Run)
	next := func(within time.Duration) api.Override {
		t.Helper()
		select {
		case ov := <-got:
			return ov
		case <-time.After(within):
			t.Fatalf("no override within %v", within)
			return api.Override{}
		}
	}
	none := func() {
		t.Helper()
		select {
		case ov := <-got:
			t.Fatalf("unexpected override %+v", ov)
		default:
		}
	}
	if ov := next(5 * time.Second); !ov.Drain || ov.By != "alice" {
		t.Errorf("initial override: %+v", ov)
	}
	waitFor(t, "connected", func() bool { return o.Status().Connected })

	// A write is taken up within a second.
	start := time.Now()
	if _, err := c.Put(context.Background(), key, `{"degradeLevels": {"coupon": 2}, "reason": "sale"}`); err != nil {
		t.Fatal(err)
	}
	ov := next(time.Second)
	t.Logf("override delivered %v after the write", time.Since(start))
	if ov.Drain || ov.DegradeLevels["coupon"] != 2 || ov.Reason != "sale" {
		t.Errorf("override: %+v", ov)
	}

	// Invalid values are refused; the current override stays.
	for _, bad := range []string{`{nope`, `{"degradeLevels": {"coupon": 5}}`, `{"drain": "yes"}`, `{"dran": true}`} {
		if _, err := c.Put(context.Background(), key, bad); err != nil {
			t.Fatal(err)
		}
	}
	// A valid write after them shows they were all processed.
	if _, err := c.Put(context.Background(), key, `{"degradeLevels": {"coupon": 1}}`); err != nil {
		t.Fatal(err)
	}
	if ov := next(time.Second); ov.DegradeLevels["coupon"] != 1 {
		t.Errorf("override after refusals: %+v", ov)
	}
	none()

	// Deleting the key ends the override.
	if _, err := c.Delete(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if ov := next(time.Second); !isZero(ov) {
		t.Errorf("after delete: %+v, want the zero override", ov)
	}
	if cur := o.Current(); !isZero(cur) {
		t.Errorf("Current after delete: %+v", cur)
	}

	// An override with Expires ends by itself.
	exp := time.Now().Add(300 * time.Millisecond).UTC()
	val, _ := json.Marshal(api.Override{Drain: true, Expires: &exp})
	if _, err := c.Put(context.Background(), key, string(val)); err != nil {
		t.Fatal(err)
	}
	if ov := next(time.Second); !ov.Drain {
		t.Errorf("expiring override: %+v", ov)
	}
	if ov := next(2 * time.Second); !isZero(ov) {
		t.Errorf("after expiry: %+v, want the zero override", ov)
	}
	// One already expired changes nothing.
	past := time.Now().Add(-time.Minute).UTC()
	val, _ = json.Marshal(api.Override{Drain: true, Expires: &past})
	if _, err := c.Put(context.Background(), key, string(val)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(context.Background(), key, `{"drain": true}`); err != nil {
		t.Fatal(err)
	}
	if ov := next(time.Second); !ov.Drain || ov.Expires != nil {
		t.Errorf("override after an expired one: %+v", ov)
	}
	none()
}

func isZero(ov api.Override) bool {
	return len(ov.DegradeLevels) == 0 && !ov.Drain && ov.Expires == nil && ov.By == "" && ov.Reason == "" && ov.Revision == 0
}

func TestNodesCount(t *testing.T) {
	t.Parallel()
	te := MustEtcd(t)
	n := &Nodes{
		Client: te.Client(t), Namespace: "shop",
		Heartbeat: 100 * time.Millisecond, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		Logger: testLogger(),
	}
	if got := n.Count(); got != 1 {
		t.Errorf("Count before Run = %d, want 1", got)
	}
	// Keys under the nodes prefix that are no registration the control
	// plane would list do not count: one without a lease, one under a node
	// id it refuses. (Every key used to count.)
	c := te.Client(t)
	keys := api.Keys{}
	lease, err := c.Grant(context.Background(), 600)
	if err != nil {
		t.Fatal(err)
	}
	for _, put := range []struct {
		key  string
		opts []clientv3.OpOption
	}{
		{keys.Node("shop", "stray"), nil},
		{keys.Node("shop", "gw:1"), []clientv3.OpOption{clientv3.WithLease(lease.ID)}},
	} {
		if _, err := c.Put(context.Background(), put.key, `{"nodeId":"x"}`, put.opts...); err != nil {
			t.Fatal(err)
		}
	}
	runUntilCleanup(t, n.Run)
	waitFor(t, "connected", n.Connected)
	status := func() api.NodeStatus { return api.NodeStatus{} }
	var stops []func()
	for _, id := range []string{"n1", "n2", "n3"} {
		stops = append(stops, runUntilCleanup(t, testRegistrar(te.Client(t), id, status).Run))
	}
	// Another namespace's nodes do not count.
	other := testRegistrar(te.Client(t), "x1", status)
	other.Namespace = "other"
	runUntilCleanup(t, other.Run)
	waitFor(t, "3 nodes", func() bool { return n.Count() == 3 })
	stops[0]()
	stops[1]()
	waitFor(t, "1 node", func() bool { return n.Count() == 1 })

	// The count survives an etcd restart, and follows again afterwards.
	te.Stop()
	waitFor(t, "disconnected", func() bool { return !n.Connected() })
	if got := n.Count(); got != 1 {
		t.Errorf("Count while etcd is down = %d, want the last one (1)", got)
	}
	te.Restart()
	waitFor(t, "connected again", n.Connected)
	r4 := testRegistrar(te.Client(t), "n4", status)
	runUntilCleanup(t, r4.Run)
	waitFor(t, "2 nodes", func() bool { return n.Count() == 2 })
}

// TestCountIsCheap keeps Count to an atomic load: it is called on the
// request path of limits that fall back to limit ÷ live nodes.
func TestCountIsCheap(t *testing.T) {
	var n Nodes
	n.count.Store(4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				if n.Count() != 4 {
					t.Error("wrong count")
					return
				}
			}
		}()
	}
	wg.Wait()
	if allocs := testing.AllocsPerRun(100, func() { _ = n.Count() }); allocs != 0 {
		t.Errorf("Count allocates %v times", allocs)
	}
}

func TestRunReturnsOnCancel(t *testing.T) {
	t.Parallel()
	c := unreachableClient(t)
	runs := map[string]func(context.Context) error{
		"registrar": testRegistrar(c, "n1", func() api.NodeStatus { return api.NodeStatus{} }).Run,
		"overrides": (&Overrides{Client: c, Namespace: "shop", NodeID: "n1", Logger: testLogger()}).Run,
		"nodes":     (&Nodes{Client: c, Namespace: "shop", Logger: testLogger()}).Run,
	}
	for name, run := range runs {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		start := time.Now()
		err := run(ctx)
		cancel()
		if err != nil {
			t.Errorf("%s: Run = %v", name, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: Run took %v to return after its context ended", name, d)
		}
	}
}
