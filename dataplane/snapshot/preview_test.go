package snapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/dataplane/preview"
	"github.com/sluicegw/sluice/dataplane/proxy"
	"github.com/sluicegw/sluice/dataplane/reqview"
)

// countingExchange answers like nopExchange and counts forwards and the
// statuses the request path wrote itself.
type countingExchange struct {
	nopExchange
	forwarded, written int
}

func (x *countingExchange) WriteHeader(int) { x.written++ }
func (x *countingExchange) Forward(u *proxy.Upstream, m proxy.Match) proxy.Outcome {
	x.forwarded++
	return x.nopExchange.Forward(u, m)
}

func previewRules(rate int) string {
	return fmt.Sprintf(`namespace: shop
routes:
  - id: api
    match: {pathPrefix: /api}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
limits:
  - id: per-ip
    routes: [api]
    key: [ip]
    algorithm: token_bucket
    rate: %d
    period: 1s
`, rate)
}

// MustPreview compiles rules as a preview of change ch running until until.
func MustPreview(tb testing.TB, rules string, until time.Time, s preview.Settings) *preview.Preview {
	tb.Helper()
	rs, err := api.Decode([]byte(rules))
	if err != nil {
		tb.Fatal(err)
	}
	doc, err := json.Marshal(rs)
	if err != nil {
		tb.Fatal(err)
	}
	val, err := json.Marshal(api.Preview{Change: "ch-1", Checksum: "sha256:x", Rules: doc, Until: until})
	if err != nil {
		tb.Fatal(err)
	}
	pv, v, err := api.DecodePreview(val)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := preview.New(pv, v, s)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	return p
}

// TestPreviewShadow: live rules admit everything while a preview of a
// limit ten times tighter runs: no request is rejected or held back by the
// preview (every one is forwarded), and the preview counts exactly the
// rejections the tighter rules make when they are live, on the same traffic
// and clock. Once the preview's end has passed, it counts nothing more.
func TestPreviewShadow(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	clock.Store(time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC).UnixNano())
	now := func() int64 { return clock.Load() }
	until := time.Unix(0, clock.Load()).Add(time.Minute)
	var slot atomic.Pointer[preview.Preview]
	slot.Store(MustPreview(t, previewRules(10), until, preview.Settings{Now: now}))
	live := MustCompileOptions(t, previewRules(100), Options{Now: now, Wall: now, Preview: &slot})
	tight := MustCompileOptions(t, previewRules(10), Options{Now: now, Wall: now})

	traffic := func(s *Snapshot, x *countingExchange) {
		for i := range 3000 { // 3 clients at 100/s each for 10 s: 3× the tight rate... ×10
			ip := []string{"192.0.2.1", "192.0.2.2", "2001:db8::3"}[i%3]
			if i%3 == 0 {
				clock.Add(int64(10 * time.Millisecond))
			}
			v := reqview.View{Method: "GET", Host: "shop", RawPath: "/api/x", Path: "/api/x", ClientIP: netip.MustParseAddr(ip), ContentLength: -1}
			v.SetHeader(http.Header{})
			clear(x.h)
			serve(s, x, &v)
		}
	}
	lx := &countingExchange{nopExchange: nopExchange{h: http.Header{}}}
	start := clock.Load()
	traffic(live, lx)
	if lx.forwarded != 3000 || lx.written != 0 {
		t.Fatalf("live rules with a preview running: %d forwarded, %d answered by the gateway; want 3000 and 0", lx.forwarded, lx.written)
	}
	clock.Store(start) // the same traffic, on the same clock, under the tight rules live
	tx := &countingExchange{nopExchange: nopExchange{h: http.Header{}}}
	traffic(tight, tx)
	rep := slot.Load().Report()
	if len(rep.Limits) != 1 || rep.Change != "ch-1" || rep.Approximate {
		t.Fatalf("report %+v", rep)
	}
	c := rep.Limits[0]
	if tx.written == 0 || c.Rejected != int64(tx.written) || c.Allowed != int64(tx.forwarded) {
		t.Fatalf("preview counted %+v; the same rules live rejected %d and admitted %d", c, tx.written, tx.forwarded)
	}
	if len(c.TopKeys) != 3 || !strings.HasPrefix(c.TopKeys[0].Key, "ip=") {
		t.Fatalf("top keys %+v, want the 3 clients", c.TopKeys)
	}
	if c.Clients != 3 || c.Saturated {
		t.Fatalf("preview counted %d distinct clients rejected (saturated %v), want 3", c.Clients, c.Saturated)
	}
	// Past its end, the preview observes nothing.
	clock.Store(until.UnixNano())
	traffic(live, lx)
	if after := slot.Load().Report().Limits[0]; after.Allowed+after.Rejected != c.Allowed+c.Rejected {
		t.Fatalf("preview past its end still counts: %+v, was %+v", after, c)
	}
}

// TestPreviewClientsCapped: a preview counts every distinct key it
// rejects, not only those its rate-bounded decision log samples, up to
// api.MaxPreviewClients per limit; past it the count stays at the cap and
// says it is saturated.
func TestPreviewClientsCapped(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	clock.Store(time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC).UnixNano())
	now := func() int64 { return clock.Load() }
	p := MustPreview(t, previewRules(1), time.Unix(0, clock.Load()).Add(time.Minute), preview.Settings{Now: now})
	observe := func(clients int) {
		for i := range clients {
			ip := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
			for range 2 { // the second request of each client is rejected
				v := reqview.View{Method: "GET", Host: "shop", RawPath: "/api/x", Path: "/api/x", ClientIP: ip, ContentLength: -1}
				v.SetHeader(http.Header{})
				p.Observe(&v)
			}
		}
	}
	observe(500)
	if c := p.Report().Limits[0]; c.Clients != 500 || c.Saturated || c.Rejected != 500 {
		t.Fatalf("500 clients rejected once each: %+v", c)
	}
	observe(api.MaxPreviewClients + 100)
	c := p.Report().Limits[0]
	if c.Clients != api.MaxPreviewClients || !c.Saturated || c.Rejected <= api.MaxPreviewClients {
		t.Fatalf("%d clients rejected: counted %d (saturated %v), %d rejections", api.MaxPreviewClients+100, c.Clients, c.Saturated, c.Rejected)
	}
	rep := p.Report()
	if errs := (&api.Report{NodeID: "n1", BootID: "b", Seq: 1, At: time.Now(), Preview: &rep}).Check(time.Now(), 0); len(errs) != 0 {
		t.Fatalf("the node's report is refused: %v", errs)
	}
}

// TestPreviewOfLiveRules: once the previewed change is published (the
// snapshot runs rules of the preview's checksum), the preview observes
// nothing more.
func TestPreviewOfLiveRules(t *testing.T) {
	t.Parallel()
	var slot atomic.Pointer[preview.Preview]
	slot.Store(MustPreview(t, previewRules(10), time.Now().Add(time.Hour), preview.Settings{}))
	rs, err := api.Decode([]byte(previewRules(10)))
	if err != nil {
		t.Fatal(err)
	}
	v, err := api.Validated(rs)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Preview: &slot}
	opts.Metrics, opts.Logger = metrics.New(), slog.New(slog.NewJSONHandler(io.Discard, nil))
	for _, tc := range []struct {
		desc, checksum string
		want           int64
	}{{"other rules live", "sha256:other", 1}, {"the preview's rules live", "sha256:x", 0}} {
		s, err := Compile(context.Background(), v, Meta{Version: 2, Checksum: tc.checksum}, nil, opts)
		if err != nil {
			t.Fatal(err)
		}
		before := limitCounts(slot.Load().Report(), "per-ip").Allowed
		x := &countingExchange{nopExchange: nopExchange{h: http.Header{}}}
		rv := reqview.View{Method: "GET", Host: "shop", RawPath: "/api/x", ClientIP: netip.MustParseAddr("192.0.2.9"), ContentLength: -1}
		rv.SetHeader(http.Header{})
		serve(s, x, &rv)
		s.Retire(nil)
		if got := limitCounts(slot.Load().Report(), "per-ip").Allowed - before; got != tc.want {
			t.Fatalf("%s: the preview observed %d requests, want %d", tc.desc, got, tc.want)
		}
	}
}

// limitCounts is the counts of rule in rep (zero when the report leaves
// the limit out, as it does one that decided nothing).
func limitCounts(rep api.PreviewReport, rule string) api.PreviewCounts {
	for _, c := range rep.Limits {
		if c.Rule == rule {
			return c
		}
	}
	return api.PreviewCounts{Rule: rule}
}

// TestPreviewReportLeavesOutIdleLimits: a preview's report leaves out a
// limit that decided no request (the control plane reads it as zero) and
// the zero counts of the others, and stays a valid report.
func TestPreviewReportLeavesOutIdleLimits(t *testing.T) {
	t.Parallel()
	rules := previewRules(1) + `  - {id: other-ip, routes: [other], key: [ip], algorithm: token_bucket, rate: 1, period: 1s}
`
	rules = strings.Replace(rules, "limits:\n", `  - id: other
    match: {pathPrefix: /other}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
limits:
`, 1)
	p := MustPreview(t, rules, time.Now().Add(time.Hour), preview.Settings{})
	check := func(rep api.PreviewReport) []byte {
		t.Helper()
		r := api.Report{NodeID: "n1", BootID: "b", Seq: 1, At: time.Now(), Preview: &rep}
		if errs := r.Check(time.Now(), 0); len(errs) != 0 {
			t.Fatalf("the node's report is refused: %v", errs)
		}
		b, err := api.EncodeReport(&r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if rep := p.Report(); len(rep.Limits) != 0 {
		t.Fatalf("before any request the report lists %+v, want no limit", rep.Limits)
	}
	v := reqview.View{Method: "GET", Host: "shop", RawPath: "/api/x", Path: "/api/x", ClientIP: netip.MustParseAddr("192.0.2.1"), ContentLength: -1}
	v.SetHeader(http.Header{})
	p.Observe(&v)
	rep := p.Report()
	if len(rep.Limits) != 1 || !reflect.DeepEqual(rep.Limits[0], api.PreviewCounts{Rule: "per-ip", Allowed: 1}) {
		t.Fatalf("one request on api: report lists %+v, want per-ip with 1 allowed only", rep.Limits)
	}
	if b := check(rep); !strings.Contains(string(b), `"limits":[{"rule":"per-ip","allowed":1}]`) {
		t.Fatalf("the report carries zero counts or the idle limit: %s", b)
	}
}

// TestPreviewNoCost: a node that can hold a preview but holds none serves
// with 0 allocations.
func TestPreviewNoCost(t *testing.T) {
	var slot atomic.Pointer[preview.Preview]
	s := MustCompileOptions(t, accessRules, Options{Preview: &slot})
	x := &nopExchange{h: http.Header{}}
	base := accessView()
	if n := testing.AllocsPerRun(200, func() {
		v := base
		clear(x.h)
		serve(s, x, &v)
	}); n != 0 {
		t.Fatalf("Serve with no preview running: %v allocs per request, want 0", n)
	}
}

// twentyLimits is a rule set of 20 limits on one route, each keyed on the
// client address, none rejecting at the benchmark's rate.
func twentyLimits(rate int) string {
	var b strings.Builder
	b.WriteString(`namespace: bench
routes:
  - id: api
    match: {pathPrefix: /api}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
limits:
`)
	for i := range 20 {
		fmt.Fprintf(&b, "  - {id: l%d, routes: [api], key: [ip, header:X-User], algorithm: token_bucket, rate: %d, period: 1s}\n", i, rate)
	}
	return b.String()
}

// BenchmarkPreview: the engine-neutral request path (Serve, upstream left
// out) under 20 limits, without a preview (the peer) and with a preview of
// 20 limits ten times tighter running.
func BenchmarkPreview(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		var slot atomic.Pointer[preview.Preview]
		if on {
			name = "on"
			slot.Store(MustPreview(b, twentyLimits(100_000_000), time.Now().Add(time.Hour), preview.Settings{}))
		}
		b.Run(name, func(b *testing.B) {
			s := MustCompileOptions(b, twentyLimits(1_000_000_000), Options{Preview: &slot})
			x := &nopExchange{h: http.Header{}}
			r := accessView()
			r.RawPath, r.Path = "/api/x", "/api/x"
			r.SetHeader(http.Header{"X-User": {"alice"}})
			b.ReportAllocs()
			for b.Loop() {
				v := r
				clear(x.h)
				serve(s, x, &v)
			}
		})
	}
}

// failingExchange forwards every request to an upstream that answers 503.
type failingExchange struct{ countingExchange }

func (x *failingExchange) Forward(u *proxy.Upstream, m proxy.Match) proxy.Outcome {
	x.forwarded++
	return proxy.Outcome{Status: http.StatusServiceUnavailable}
}

// degradePreviewRules are previewRules(1000) with a degrade plan on api:
// manual at level, or (level < 0) auto, stepping to 2 when the success
// rate of a 1s window is below 0.5.
func degradePreviewRules(level int) string {
	plan := fmt.Sprintf("{id: shed, routes: [api], mode: manual, level: %d}", level)
	if level < 0 {
		plan = "{id: shed, routes: [api], mode: auto, window: 1s, recoverAfter: 3, triggers: {level2: {successRateBelow: 0.5}}}"
	}
	return previewRules(1000) + "degrades:\n  - " + plan + "\n"
}

// TestPreviewDegrade: a change's degrade plan runs in the preview too,
// before its limits and in shadow: a manual level 2 plan would shed every
// request (the live rules, without a plan, forward them all), its sheds
// take no preview limit token, and the report names the plan's level and
// sheds; an auto plan reads the live upstream outcomes (Record) and steps
// up when they fail; a preview without a plan reports none.
func TestPreviewDegrade(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	clock.Store(time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC).UnixNano())
	now := func() int64 { return clock.Load() }
	until := time.Unix(0, clock.Load()).Add(time.Hour)
	traffic := func(s *Snapshot, x forwarder, n int) {
		for range n {
			clock.Add(int64(10 * time.Millisecond))
			v := reqview.View{Method: "GET", Host: "shop", RawPath: "/api/x", Path: "/api/x", ClientIP: netip.MustParseAddr("192.0.2.1"), ContentLength: -1}
			v.SetHeader(http.Header{})
			serve(s, x, &v)
		}
	}

	var slot atomic.Pointer[preview.Preview]
	slot.Store(MustPreview(t, degradePreviewRules(2), until, preview.Settings{Now: now}))
	live := MustCompileOptions(t, previewRules(1000), Options{Now: now, Wall: now, Preview: &slot})
	x := &countingExchange{nopExchange: nopExchange{h: http.Header{}}}
	traffic(live, x, 50)
	rep := slot.Load().Report()
	if x.forwarded != 50 || x.written != 0 {
		t.Fatalf("live: %d forwarded, %d answered by the gateway; want 50 and 0", x.forwarded, x.written)
	}
	if len(rep.Degrades) != 1 || rep.Degrades[0] != (api.PreviewDegrade{Rule: "shed", Level: 2, Shed: 50}) {
		t.Fatalf("preview degrades %+v, want shed at level 2 shedding 50", rep.Degrades)
	}
	if l := limitCounts(rep, "per-ip"); l.Allowed+l.Rejected != 0 || len(rep.Limits) != 0 {
		t.Fatalf("the preview's limit decided %+v requests its plan shed", l)
	}

	// Auto: the live upstream fails, the preview's plan steps up to 2.
	slot.Store(MustPreview(t, degradePreviewRules(-1), until, preview.Settings{Now: now}))
	fx := &failingExchange{countingExchange{nopExchange: nopExchange{h: http.Header{}}}}
	traffic(live, fx, 250) // 2.5 s of 100 rps, every answer 503
	rep = slot.Load().Report()
	if fx.forwarded != 250 || len(rep.Degrades) != 1 || rep.Degrades[0].Level != 2 || rep.Degrades[0].Shed == 0 {
		t.Fatalf("auto plan on a failing upstream: forwarded %d, preview degrades %+v; want level 2 and sheds", fx.forwarded, rep.Degrades)
	}
	// The same plan with a healthy upstream stays at 0.
	slot.Store(MustPreview(t, degradePreviewRules(-1), until, preview.Settings{Now: now}))
	traffic(live, &countingExchange{nopExchange: nopExchange{h: http.Header{}}}, 250)
	if d := slot.Load().Report().Degrades; len(d) != 1 || d[0] != (api.PreviewDegrade{Rule: "shed"}) {
		t.Fatalf("auto plan on a healthy upstream: %+v", d)
	}

	slot.Store(MustPreview(t, previewRules(10), until, preview.Settings{Now: now}))
	if d := slot.Load().Report().Degrades; d != nil {
		t.Fatalf("a preview without a plan reports %+v", d)
	}
}
