package limit

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/dataplane/reqview/classify"
)

func testClasses() *classify.Classes {
	rs := (&api.RuleSet{Classes: []api.Class{
		{ID: "critical", Match: api.ClassMatch{Headers: map[string]string{"x-priority": "critical"}}},
		{ID: "batch", Match: api.ClassMatch{Routes: []string{"orders"}, Methods: []string{"POST"}}},
	}}).Normalize()
	return classify.NewClasses(rs.Classes)
}

func TestClassify(t *testing.T) {
	t.Parallel()
	c := testClasses()
	req := func(method, prio string) *http.Request {
		r := get("/")
		r.Method = method
		if prio != "" {
			r.Header.Set("X-Priority", prio)
		}
		return r
	}
	tests := []struct {
		desc    string
		r       *http.Request
		trusted bool // the peer is a trusted proxy
		route   string
		want    string
	}{
		{"header match", req("GET", "critical"), true, "orders", "critical"},
		{"first match wins", req("POST", "critical"), true, "orders", "critical"},
		{"route and method", req("POST", ""), true, "orders", "batch"},
		{"method on another route", req("POST", ""), true, "coupon", "default"},
		{"header value differs", req("GET", "Critical"), true, "orders", "default"},
		{"nothing matches", req("GET", ""), true, "orders", "default"},
		// Issue 26: a header is believed only from a trusted proxy.
		{"header from a direct client", req("GET", "critical"), false, "orders", "default"},
		{"header from a direct client, next class", req("POST", "critical"), false, "orders", "batch"},
		{"route and method from a direct client", req("POST", ""), false, "orders", "batch"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := c.ID(c.Classify(viewOf(tc.r, RequestInfo{TrustedPeer: tc.trusted}), tc.route)); got != tc.want {
				t.Errorf("class %q, want %q", got, tc.want)
			}
		})
	}
	var none *classify.Classes
	if none.Classify(viewOf(get("/"), RequestInfo{}), "x") != 0 || none.ID(0) != api.DefaultClass {
		t.Error("a nil Classes does not classify every request as default")
	}
}

// TestReservePools checks the pools of a limit of 10 with 30% reserved for
// critical: critical may use all 10, others at most the 7 unreserved.
func TestReservePools(t *testing.T) {
	t.Parallel()
	cls := testClasses()
	l := api.Limit{ID: "c", Algorithm: api.Concurrency, Rate: 10, Reserve: map[string]float64{"critical": 0.3}}
	s := mustCompile(t, limitsOf(l), nil, Options{SweepInterval: -1, Classes: cls})
	lo := s.rules[0].local
	crit, batch, def := cls.Index("critical"), cls.Index("batch"), 0
	var pools []int8
	for range 7 {
		d := lo.TakeHashClass(0, 1, t0, def)
		if !d.Allowed {
			t.Fatalf("default refused within the unreserved 7: %+v", d)
		}
		pools = append(pools, d.Pool())
	}
	if d := lo.TakeHashClass(0, 1, t0, batch); d.Allowed {
		t.Fatalf("batch admitted into the reserve: %+v", d)
	}
	for range 3 {
		if d := lo.TakeHashClass(0, 1, t0, crit); !d.Allowed || d.Pool() != 1 {
			t.Fatalf("critical refused its reserve: %+v", d)
		}
	}
	if d := lo.TakeHashClass(0, 1, t0, crit); d.Allowed {
		t.Fatalf("critical admitted past the capacity: %+v", d)
	}
	// A default request finishes: its unreserved slot is anyone's.
	lo.RefundHashPool(0, 1, t0, pools[0])
	if d := lo.TakeHashClass(0, 1, t0, crit); !d.Allowed || d.Pool() != 0 {
		t.Fatalf("critical refused the freed unreserved slot: %+v", d)
	}
	// Critical releases a reserved slot: default still cannot take it.
	lo.RefundHashPool(0, 1, t0, 1)
	if d := lo.TakeHashClass(0, 1, t0, def); d.Allowed {
		t.Fatalf("default took a freed reserved slot: %+v", d)
	}
}

// TestReserveNeverOverAdmits runs 64 goroutines of three classes against one
// limit with reserved pools, taking and releasing at random, and checks at
// every instant that no pool, and so not the limit, holds more than its size
// (run with -race).
func TestReserveNeverOverAdmits(t *testing.T) {
	t.Parallel()
	cls := testClasses()
	for _, alg := range []api.Algorithm{api.Concurrency, api.Adaptive} {
		t.Run(string(alg), func(t *testing.T) {
			t.Parallel()
			l := api.Limit{ID: "c", Algorithm: alg, Rate: 20, Reserve: map[string]float64{"critical": 0.3, "batch": 0.2}}
			if alg == api.Adaptive {
				l.Rate = 0
				l.Adaptive = &api.AdaptiveSettings{MinLimit: 20, MaxLimit: 20, InitialLimit: 20}
			}
			s := mustCompile(t, limitsOf(l), nil, Options{SweepInterval: -1, Classes: cls})
			lo := s.rules[0].local
			// Pools by Decision.Pool: 0 unreserved, then the reserved
			// classes in id order (batch, critical); poolClass is the class
			// index each reserved pool belongs to.
			var inPool [3]atomic.Int64
			sizes := [3]int64{10, 4, 6}
			poolClass := [3]int{-1, cls.Index("batch"), cls.Index("critical")}
			var total, over atomic.Int64
			var wg sync.WaitGroup
			for g := range 64 {
				wg.Go(func() {
					class := g % 3 // 0 default, 1 critical, 2 batch
					for i := range 2000 {
						d := lo.TakeHashClass(0, 1, t0, class)
						if !d.Allowed {
							continue
						}
						p := d.Pool()
						if p > 0 && poolClass[p] != class {
							over.Add(1) // a pool taken by another class
						}
						if n := inPool[p].Add(1); n > sizes[p] {
							over.Add(1)
						}
						if n := total.Add(1); n > 20 {
							over.Add(1)
						}
						if i%7 == 0 {
							time.Sleep(time.Microsecond)
						}
						total.Add(-1)
						inPool[p].Add(-1)
						lo.RefundHashPool(0, 1, t0, p)
					}
				})
			}
			wg.Wait()
			if n := over.Load(); n != 0 {
				t.Fatalf("%d over-admissions or pool violations", n)
			}
			if lo.Len() != 0 && !lo.p.idle(0, 0, t0) {
				t.Fatal("state left behind")
			}
		})
	}
}

// TestClassAndVariantLabels checks that decisions of a limit with a reserve
// are counted by class, those of a limit with variants by variant, and that
// a rejection's log line carries both.
func TestClassAndVariantLabels(t *testing.T) {
	t.Parallel()
	cls := testClasses()
	m := metrics.New()
	var logs bytes.Buffer
	limits := limitsOf(
		api.Limit{ID: "conc", Routes: []string{"orders"}, Algorithm: api.Concurrency, Rate: 2, Reserve: map[string]float64{"critical": 0.5}},
		api.Limit{ID: "ab", Routes: []string{"orders"}, Key: []string{"header:X-User"}, Algorithm: api.TokenBucket, Rate: 1000, Period: api.Duration(time.Second),
			Variants: []api.LimitVariant{{ID: "tight", Weight: 50, Rate: 1}}},
	)
	s := mustCompile(t, limits, nil, Options{SweepInterval: -1, Classes: cls, Metrics: m,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	// A user in the tight variant, one in the base.
	info := ipInfo("192.0.2.1")
	var tight, base string
	for i := 0; tight == "" || base == ""; i++ {
		u := "u" + itoa(i)
		r := get("/")
		r.Header.Set("X-User", u)
		switch VariantOf(&s.rules[1].l, s.rules[1].key.Text(viewOf(r, info))) {
		case "tight":
			tight = u
		case BaseVariant:
			base = u
		}
	}
	// Check the key text VariantOf takes is the one Admit hashes.
	r := get("/")
	r.Header.Set("X-User", tight)
	if k := s.rules[1].key.Text(viewOf(r, info)); VariantOf(&s.rules[1].l, k) != "tight" {
		t.Fatalf("key text %q is not in the tight variant", k)
	}
	req := func(user, prio string) *http.Request {
		r := get("/")
		r.Header.Set("X-User", user)
		if prio != "" {
			r.Header.Set("X-Priority", prio)
		}
		return r
	}
	run := func(user, prio string) bool {
		r := req(user, prio)
		in := info
		in.Class = cls.Classify(viewOf(r, RequestInfo{TrustedPeer: true}), "orders")
		_, done, ok := admit(s, r, in)
		if ok {
			done()
		}
		return ok
	}
	if !run(tight, "") || run(tight, "") {
		t.Fatal("the tight variant (1/s) did not admit one and refuse the next")
	}
	for range 3 {
		if !run(base, "critical") {
			t.Fatal("base variant refused")
		}
	}
	count := func(rule, decision, class, variant string) float64 {
		return testutil.ToFloat64(m.LimitDecision(rule, decision, class, variant, ""))
	}
	for _, c := range []struct {
		rule, decision, class, variant string
		want                           float64
	}{
		{"ab", metrics.DecisionAllow, "", "tight", 1},
		{"ab", metrics.DecisionReject, "", "tight", 1},
		{"ab", metrics.DecisionAllow, "", BaseVariant, 3},
		{"conc", metrics.DecisionAllow, "default", "", 1}, // the second tight request stops at ab (rate limits come first)
		{"conc", metrics.DecisionAllow, "critical", "", 3},
	} {
		if got := count(c.rule, c.decision, c.class, c.variant); got != c.want {
			t.Errorf("%s %s class=%q variant=%q = %v, want %v", c.rule, c.decision, c.class, c.variant, got, c.want)
		}
	}
	if !strings.Contains(logs.String(), `"variant":"tight"`) || !strings.Contains(logs.String(), `"class":"default"`) {
		t.Errorf("rejection log lacks class or variant: %s", logs.String())
	}
}

// TestVariantShareIsStable checks issue 15's variant case: 10% of 1,000
// distinct clients get the variant, the same ones on two nodes (two Sets
// compiled independently) and after a restart (the buckets are pinned here:
// a fixed hash, not a per-process seed).
func TestVariantShareIsStable(t *testing.T) {
	t.Parallel()
	l := api.Limit{ID: "orders-adaptive", Key: []string{"ip"}, Algorithm: api.TokenBucket, Rate: 100, Period: api.Duration(time.Second),
		Variants: []api.LimitVariant{{ID: "weighted", Weight: 10, Rate: 1000}}}
	nodeA := mustCompile(t, limitsOf(l), nil, Options{SweepInterval: -1})
	nodeB := mustCompile(t, limitsOf(l), nil, Options{SweepInterval: -1})
	in := 0
	for i := range 1000 {
		ip := "10.0." + itoa(i/256) + "." + itoa(i%256)
		info := ipInfo(ip)
		ka := nodeA.rules[0].key.Text(viewOf(get("/"), info))
		kb := nodeB.rules[0].key.Text(viewOf(get("/"), info))
		va, vb := nodeA.rules[0].pick(viewOf(get("/"), info)), nodeB.rules[0].pick(viewOf(get("/"), info))
		if ka != kb || va.variant != vb.variant {
			t.Fatalf("client %s: node A %q/%q, node B %q/%q", ip, ka, va.variant, kb, vb.variant)
		}
		if va.variant == "weighted" {
			in++
		}
	}
	if in < 80 || in > 120 {
		t.Errorf("%d of 1,000 clients in the 10%% variant", in)
	}
	// Pinned: these buckets are what every node computes, in every process.
	if got := VariantBucket("orders-adaptive", "ip=10.0.0.1"); got != pinnedBucket {
		t.Errorf("bucket of ip=10.0.0.1 = %d, pinned %d: the hash changed, and with it every client's variant", got, pinnedBucket)
	}
	if in != pinnedIn {
		t.Errorf("%d clients in the variant, pinned %d: the hash changed", in, pinnedIn)
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// The variant buckets of TestVariantShareIsStable, computed by an
// independent FNV-1a implementation (Python: fnv1a64(b"orders-adaptive\0" +
// key) % 100).
const (
	pinnedBucket = 61
	pinnedIn     = 104
)
