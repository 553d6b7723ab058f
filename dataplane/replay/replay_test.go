package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/sluicegw/sluice/api"
)

// MustSim compiles the rule-set document doc for replay.
func MustSim(tb testing.TB, doc string) *Sim {
	tb.Helper()
	rs, err := api.Decode([]byte(doc))
	if err != nil {
		tb.Fatalf("decoding the rules: %v", err)
	}
	v, err := api.Validated(rs)
	if err != nil {
		tb.Fatalf("validating the rules: %v", err)
	}
	s, err := New(v, Options{})
	if err != nil {
		tb.Fatalf("compiling the rules: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// replayLog runs log through sims and returns the stats and each sim's result.
func replayLog(tb testing.TB, log string, f Format, sims ...*Sim) (Stats, []Result) {
	tb.Helper()
	lr, err := NewReader(strings.NewReader(log), f)
	if err != nil {
		tb.Fatal(err)
	}
	st, err := Run(context.Background(), lr, sims...)
	if err != nil {
		tb.Fatalf("Run: %v", err)
	}
	var out []Result
	for _, s := range sims {
		r, err := s.Result()
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, r)
	}
	return st, out
}

func rule(tb testing.TB, r Result, id string) RuleResult {
	tb.Helper()
	for _, rr := range r.Rules {
		if rr.ID == id {
			return rr
		}
	}
	tb.Fatalf("no rule %q in %+v", id, r)
	return RuleResult{}
}

// base is a minute-aligned time (fixed and sliding windows start on the
// epoch's multiples of their period).
var base = time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)

// combinedLine is one nginx combined line.
func combinedLine(ip string, t time.Time, method, target, ua string) string {
	return fmt.Sprintf(`%s - - [%s] "%s %s HTTP/1.1" 200 512 "-" "%s"`+"\n", ip, t.Format("02/Jan/2006:15:04:05 -0700"), method, target, ua)
}

const ordersRoute = `namespace: shop
routes:
  - id: orders
    match: {pathPrefix: /api/orders}
    upstream: {targets: [{url: "https://orders.internal:8443"}]}
`

// TestTokenBucketThreeTimesRate: one client sends at 3× a token bucket's
// rate for T seconds, with sub-second timestamps (JSON lines, Unix seconds).
// The bucket (GCRA) admits min(requests, burst + ⌊elapsed/t⌋), t being the
// emission interval: burst at once, then one per t. With requests every t/3
// from 0 to T inclusive (request 3k at exactly k·t) that is exactly
// burst + rate·T.
func TestTokenBucketThreeTimesRate(t *testing.T) {
	t.Parallel()
	const rate, burst, secs = 40, 25, 30
	s := MustSim(t, ordersRoute+fmt.Sprintf(`limits:
  - id: per-ip
    routes: [orders]
    key: [ip]
    algorithm: token_bucket
    rate: %d
    period: 1s
    burst: %d
`, rate, burst))
	emission := time.Second / rate // the bucket's t
	var b strings.Builder
	n := 0
	start := base.Unix()
	var last time.Duration
	for j := range 3*rate*secs + 1 {
		at := time.Duration(j) * emission / 3 // every t/3, rounded down to the nanosecond
		last = at
		fmt.Fprintf(&b, `{"ts": %d.%09d, "ip": "192.0.2.7", "method": "GET", "path": "/api/orders/%d"}`+"\n", start+int64(at/time.Second), at%time.Second, n)
		// A second client well under the rate is never rejected.
		if n%(3*rate) == 0 {
			fmt.Fprintf(&b, `{"ts": "%s", "ip": "2001:db8::1", "method": "POST", "host": "shop.example.com", "path": "/api/orders"}`+"\n", base.Add(at).Format(time.RFC3339Nano))
		}
		n++
	}
	want := min(int64(n), burst+int64(last/emission))
	if want != burst+rate*secs {
		t.Fatalf("test setup: want %d, the formula gives %d", burst+rate*secs, want)
	}
	quiet := int64(secs + 1)
	st, res := replayLog(t, b.String(), FormatJSON, s)
	if st.Format != FormatJSON || st.Unparseable != 0 || st.Replayed != int64(n)+quiet || st.OutOfOrder != 0 {
		t.Fatalf("stats %+v, want %d lines replayed", st, int64(n)+quiet)
	}
	r := rule(t, res[0], "per-ip")
	if r.Admitted != want+quiet || r.Rejected != int64(n)-want || r.Requests != int64(n)+quiet || r.ShadowRejected != 0 {
		t.Fatalf("per-ip: %+v, want %d admitted (%d + the quiet client's %d), %d rejected", r, want+quiet, want, quiet, int64(n)-want)
	}
	if len(r.TopKeys) != 1 || r.TopKeys[0].Key != "ip=192.0.2.7" || r.TopKeys[0].Rejected != r.Rejected || r.TopKeys[0].Error != 0 {
		t.Fatalf("top keys %+v, want only ip=192.0.2.7 with every rejection", r.TopKeys)
	}
	if !st.From.Equal(base) || !st.To.Equal(base.Add(last)) {
		t.Fatalf("clock from %v to %v, want %v to %v", st.From, st.To, base, base.Add(last))
	}
}

// TestTokenBucketCombinedSeconds: the same at the combined format's
// one-second resolution: 3·rate requests stamped each second from 0 to T;
// the bucket admits burst at 0 and rate more each second after.
func TestTokenBucketCombinedSeconds(t *testing.T) {
	t.Parallel()
	const rate, burst, secs = 20, 35, 12
	s := MustSim(t, ordersRoute+fmt.Sprintf(`limits:
  - id: per-ip
    routes: [orders]
    key: [ip]
    algorithm: token_bucket
    rate: %d
    period: 1s
    burst: %d
`, rate, burst))
	var b strings.Builder
	for sec := 0; sec <= secs; sec++ {
		for range 3 * rate {
			b.WriteString(combinedLine("198.51.100.4", base.Add(time.Duration(sec)*time.Second), "GET", "/api/orders?page=2", "curl/8.5"))
		}
	}
	total := int64((secs + 1) * 3 * rate)
	st, res := replayLog(t, b.String(), FormatAuto, s)
	if st.Format != FormatCombined || st.Replayed != total || st.Unparseable != 0 {
		t.Fatalf("stats %+v", st)
	}
	r := rule(t, res[0], "per-ip")
	if want := int64(burst + rate*secs); r.Admitted != want || r.Rejected != total-want {
		t.Fatalf("per-ip: %+v, want %d admitted of %d", r, want, total)
	}
}

// TestWindows: a fixed window admits rate per window, however the traffic
// falls in it; a sliding window counts the previous window's requests
// weighted by how much of it the sliding window still covers.
func TestWindows(t *testing.T) {
	t.Parallel()
	const rate = 100
	s := MustSim(t, ordersRoute+fmt.Sprintf(`limits:
  - id: sliding
    routes: [orders]
    key: [header:User-Agent]
    algorithm: sliding_window
    rate: %d
    period: 1m
    shadow: true
  - id: fixed
    routes: [orders]
    key: [ip]
    algorithm: fixed_window
    rate: %d
    period: 1m
`, rate, rate))
	var b strings.Builder
	// Window 0: 3·rate at its start. Window 1: 3·rate at a quarter in.
	// Window 3 (window 2 empty): 3·rate at its start again.
	bursts := []time.Duration{0, 75 * time.Second, 180 * time.Second}
	for _, at := range bursts {
		for range 3 * rate {
			b.WriteString(combinedLine("203.0.113.9", base.Add(at), "GET", "/api/orders", "shop-app/1.0"))
		}
	}
	_, res := replayLog(t, b.String(), FormatCombined, s)
	total := int64(len(bursts) * 3 * rate)
	fixed := rule(t, res[0], "fixed")
	if want := int64(len(bursts) * rate); fixed.Admitted != want || fixed.Rejected != total-want {
		t.Fatalf("fixed: %+v, want %d admitted", fixed, want)
	}
	// The sliding limit is a shadow, first in the chain (document order
	// among windows): it judges every request and rejects none, so the
	// fixed limit after it sees every request too.
	sliding := rule(t, res[0], "sliding")
	// Window 0: rate. Window 1 at elapsed e = P/4: prev = rate weighs
	// ⌈rate·(P−e)/P⌉, leaving rate − that. Window 3: prev (window 2) is 0.
	p, e := int64(time.Minute), int64(15*time.Second)
	weight := (rate*(p-e) + p - 1) / p
	want := int64(rate) + (rate - weight) + rate
	if sliding.Admitted != want || sliding.ShadowRejected != total-want || sliding.Rejected != 0 || !sliding.Shadow {
		t.Fatalf("sliding: %+v, want %d admitted, %d shadow-rejected", sliding, want, total-want)
	}
	if len(sliding.TopKeys) != 1 || !strings.HasPrefix(sliding.TopKeys[0].Key, "header:User-Agent=") || sliding.TopKeys[0].Rejected != total-want {
		t.Fatalf("sliding top keys %+v", sliding.TopKeys)
	}
}

// TestShadowDoesNotEnforce: a shadow limit tighter than the enforcing one
// counts its would-be rejections; every request it judges goes on to the
// enforcing limit, which alone rejects.
func TestShadowDoesNotEnforce(t *testing.T) {
	t.Parallel()
	s := MustSim(t, ordersRoute+`limits:
  - id: tight-shadow
    routes: [orders]
    key: [ip]
    algorithm: fixed_window
    rate: 10
    period: 1m
    shadow: true
  - id: loose
    routes: [orders]
    key: [ip]
    algorithm: fixed_window
    rate: 50
    period: 1m
`)
	var b strings.Builder
	for range 80 {
		b.WriteString(combinedLine("192.0.2.50", base, "GET", "/api/orders", "-"))
	}
	_, res := replayLog(t, b.String(), FormatCombined, s)
	sh, lo := rule(t, res[0], "tight-shadow"), rule(t, res[0], "loose")
	if sh.Requests != 80 || sh.Admitted != 10 || sh.ShadowRejected != 70 || sh.Rejected != 0 {
		t.Fatalf("tight-shadow: %+v, want 10 admitted, 70 shadow-rejected", sh)
	}
	if lo.Requests != 80 || lo.Admitted != 50 || lo.Rejected != 30 {
		t.Fatalf("loose: %+v, want all 80 requests reaching it, 50 admitted", lo)
	}
}

// TestMalformedLines: unparseable lines are counted, the first MaxErrors
// reported with their line numbers and what is wrong; the good lines
// around them replay.
func TestMalformedLines(t *testing.T) {
	t.Parallel()
	s := MustSim(t, ordersRoute+`limits:
  - id: per-ip
    routes: [orders]
    key: [ip]
    algorithm: fixed_window
    rate: 1000
    period: 1m
`)
	good := combinedLine("192.0.2.1", base, "GET", "/api/orders", "-")
	lines := []string{
		good,
		"not a log line at all\n", // 2
		`300.1.1.1 - - [04/Dec/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1` + "\n", // 3: bad ip
		`192.0.2.1 - - [04/Dec/2026 10:00:00] "GET / HTTP/1.1" 200 1` + "\n",       // 4: bad time
		good, // 5
		`192.0.2.1 - - [04/Dec/2026:10:00:00 +0000] "\x16\x03\x01" 400 0` + "\n", // 6: TLS on a plain port
		"\n", // 7: blank
		`192.0.2.1 - - [04/Dec/2026:10:00:00 +0000] "GET /a HTTP/1.1" 200 1 "-` + "\n", // 8: open quote
		good, // 9
	}
	st, res := replayLog(t, strings.Join(lines, ""), FormatCombined, s)
	if st.Lines != 9 || st.Replayed != 3 || st.Unparseable != 6 || len(st.Errors) != MaxErrors {
		t.Fatalf("stats %+v, want 9 lines, 3 replayed, 6 unparseable, %d listed", st, MaxErrors)
	}
	wantLines := []int64{2, 3, 4, 6, 7}
	wantText := []string{`client address "not"`, `client address "300.1.1.1"`, "time \"04/Dec/2026 10:00:00\"", "request", "blank line"}
	for i, e := range st.Errors {
		if e.Line != wantLines[i] || !strings.Contains(e.Err, wantText[i]) {
			t.Errorf("error %d: %+v, want line %d mentioning %q", i, e, wantLines[i], wantText[i])
		}
	}
	if r := rule(t, res[0], "per-ip"); r.Admitted != 3 {
		t.Fatalf("per-ip: %+v, want the 3 good lines admitted", r)
	}

	// JSON lines: each missing or wrong field named.
	js := strings.Join([]string{
		`{"ts": 1700000000, "ip": "192.0.2.1", "method": "GET", "path": "/api/orders"}`,
		`{"ip": "192.0.2.1", "method": "GET", "path": "/"}`,
		`{"ts": "yesterday", "ip": "192.0.2.1", "method": "GET", "path": "/"}`,
		`{"ts": 1700000000, "ip": "192.0.2.1", "method": "GET", "path": "/", "headers": {"X": 3}}`,
		`{"ts": 1700000000, "ip": "192.0.2.1", "method": "GET", "path": "orders"}`,
		`{"ts": 1700000000, "ip": "192.0.2.1", "path": "/"`,
	}, "\n")
	s2 := MustSim(t, ordersRoute)
	st, _ = replayLog(t, js, FormatJSON, s2)
	wantJS := []string{`line 2: no "ts"`, `line 3: ts "yesterday"`, "line 4: not a JSON object", `line 5: request target "orders"`, "line 6: not a JSON object"}
	if st.Replayed != 1 || st.Unparseable != 5 {
		t.Fatalf("json stats %+v", st)
	}
	for i, e := range st.Errors {
		if !strings.HasPrefix(e.Error(), wantJS[i]) {
			t.Errorf("json error %d: %q, want it to start %q", i, e.Error(), wantJS[i])
		}
	}
}

// TestOutOfOrder: lines replay in file order and the clock never goes
// backwards: an older line is decided at the newer time.
func TestOutOfOrder(t *testing.T) {
	t.Parallel()
	s := MustSim(t, ordersRoute+`limits:
  - id: one-per-minute
    routes: [orders]
    key: [ip]
    algorithm: fixed_window
    rate: 1
    period: 1m
`)
	log := combinedLine("192.0.2.1", base.Add(2*time.Minute), "GET", "/api/orders", "-") +
		// In minute 1's window this would be admitted; at the clock's minute 2 it is the window's second.
		combinedLine("192.0.2.1", base.Add(time.Minute), "GET", "/api/orders", "-")
	st, res := replayLog(t, log, FormatCombined, s)
	if st.OutOfOrder != 1 || !st.To.Equal(base.Add(2*time.Minute)) {
		t.Fatalf("stats %+v, want 1 out of order and the clock at minute 2", st)
	}
	if r := rule(t, res[0], "one-per-minute"); r.Admitted != 1 || r.Rejected != 1 {
		t.Fatalf("%+v, want the older line rejected at the newer time", r)
	}
}

// TestRoutingAndKeys: requests are routed by host, method and path as the
// gateway's router does; unmatched and refused ones are counted; keys read
// headers, query parameters and cookies from the Cookie header.
func TestRoutingAndKeys(t *testing.T) {
	t.Parallel()
	s := MustSim(t, `namespace: shop
routes:
  - id: checkout
    match: {hosts: [shop.example.com], pathPrefix: /checkout, methods: [POST]}
    upstream: {targets: [{url: "http://127.0.0.1:8081"}]}
  - id: search
    match: {pathPrefix: /search}
    upstream: {targets: [{url: "http://127.0.0.1:8082"}]}
limits:
  - id: per-session
    routes: [checkout]
    key: [cookie:sid]
    algorithm: fixed_window
    rate: 2
    period: 1m
  - id: per-query-user
    routes: [search]
    key: [query:user]
    algorithm: fixed_window
    rate: 1
    period: 1m
  - id: cluster-wide
    scope: cluster
    key: [global]
    algorithm: fixed_window
    rate: 1000
    period: 1m
`)
	line := func(host, method, path, cookie string) string {
		h := ""
		if cookie != "" {
			h = fmt.Sprintf(`, "headers": {"cookie": %q}`, cookie)
		}
		return fmt.Sprintf(`{"ts": %d, "ip": "192.0.2.1", "method": %q, "host": %q, "path": %q%s}`+"\n", base.Unix(), method, host, path, h)
	}
	var b strings.Builder
	for range 3 {
		b.WriteString(line("shop.example.com", "POST", "/checkout/pay", "sid=alice; theme=dark"))
		b.WriteString(line("shop.example.com", "POST", "/checkout/pay", "sid=bob"))
	}
	b.WriteString(line("other.example.com", "POST", "/checkout/pay", "sid=alice")) // wrong host: no route
	b.WriteString(line("shop.example.com", "GET", "/checkout/pay", "sid=alice"))   // wrong method: no route
	b.WriteString(line("", "GET", "/search?user=a%20b", ""))
	b.WriteString(line("", "GET", "/search?user=a+b", ""))      // the same user, decoded
	b.WriteString(line("", "GET", "/search?user=x&user=y", "")) // ambiguous: refused before limits
	b.WriteString(line("", "GET", "/a%2Fb", ""))                // encoded slash: refused
	_, res := replayLog(t, b.String(), FormatJSON, s)
	r := res[0]
	if r.Requests != 12 || r.NoRoute != 2 || r.Ambiguous != 1 || r.Invalid != 1 {
		t.Fatalf("result %+v, want 12 requests, 2 without a route, 1 ambiguous, 1 invalid", r)
	}
	ps := rule(t, r, "per-session")
	if ps.Admitted != 4 || ps.Rejected != 2 {
		t.Fatalf("per-session: %+v, want 2 admitted per session", ps)
	}
	if len(ps.TopKeys) != 2 || ps.TopKeys[0].Rejected != 1 || ps.TopKeys[1].Rejected != 1 {
		t.Fatalf("per-session top keys %+v, want both sessions once", ps.TopKeys)
	}
	if q := rule(t, r, "per-query-user"); q.Admitted != 1 || q.Rejected != 1 {
		t.Fatalf("per-query-user: %+v, want a%%20b and a+b to be one user", q)
	}
	cw := rule(t, r, "cluster-wide")
	// Only requests the routes' own limits (earlier in the chain) admitted
	// reach it: 4 checkouts and 1 search.
	if cw.Requests != 5 || cw.Admitted != 5 || cw.Scope != "cluster" {
		t.Fatalf("cluster-wide: %+v, want the 5 requests the routes' limits admitted", cw)
	}
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "one node") {
		t.Fatalf("notes %q, want the one-node note for the cluster limit", r.Notes)
	}
}

// TestAgainstTwoRuleSets: one pass feeds two rule sets; each decides on
// its own state.
func TestAgainstTwoRuleSets(t *testing.T) {
	t.Parallel()
	doc := func(rate int) string {
		return ordersRoute + fmt.Sprintf(`limits:
  - id: per-ip
    routes: [orders]
    key: [ip, header:User-Agent]
    algorithm: fixed_window
    rate: %d
    period: 1m
`, rate)
	}
	a, b := MustSim(t, doc(10)), MustSim(t, doc(100))
	var log strings.Builder
	const n = 3 * batchSize // several batches, each replayed by both at once
	for i := range n {
		log.WriteString(combinedLine("192.0.2.1", base.Add(time.Duration(i/50)*time.Minute), "GET", "/api/orders", "app/1"))
	}
	_, res := replayLog(t, log.String(), FormatCombined, a, b)
	minutes := int64((n + 49) / 50)
	// 50 requests a minute (the last minute fewer); a window admits up to rate of them.
	want := func(rate int64) int64 { return (minutes-1)*min(rate, 50) + min(rate, int64(n)-50*(minutes-1)) }
	if x, y := rule(t, res[0], "per-ip"), rule(t, res[1], "per-ip"); x.Admitted != want(10) || y.Admitted != want(100) || x.Requests != n || y.Requests != n {
		t.Fatalf("admitted %d and %d of %d, want %d and %d", x.Admitted, y.Admitted, n, want(10), want(100))
	}
	if res[0].Checksum == res[1].Checksum || res[0].Checksum == "" {
		t.Fatalf("checksums %q and %q", res[0].Checksum, res[1].Checksum)
	}
}

// TestTopKeysSpaceSaving: exact under the cap; beyond it every key counted
// more than total/cap times is kept, with a count at most Error too high.
func TestTopKeysSpaceSaving(t *testing.T) {
	t.Parallel()
	tk := newTopKeys(4)
	for i, k := range []string{"a", "b", "a", "c", "a", "b"} {
		_ = i
		tk.add(k)
	}
	if got := tk.top(2); len(got) != 2 || got[0] != (KeyCount{Key: "a", Rejected: 3}) || got[1] != (KeyCount{Key: "b", Rejected: 2}) {
		t.Fatalf("exact top: %+v", got)
	}
	tk = newTopKeys(4)
	total := 0
	for i := range 1000 {
		tk.add("heavy")
		tk.add(fmt.Sprintf("light-%d", i))
		total += 2
	}
	got := tk.top(1)[0]
	if got.Key != "heavy" || got.Rejected-got.Error > 1000 || got.Rejected < 1000 {
		t.Fatalf("top under churn: %+v, want heavy with a true count of 1000 within its bounds", got)
	}
}

func TestKeyText(t *testing.T) {
	t.Parallel()
	short := "ip=192.0.2.1"
	if keyText(short) != short {
		t.Fatal("a short key changed")
	}
	long1, long2 := "header:X-Api-Key="+strings.Repeat("é", 40)+"1", "header:X-Api-Key="+strings.Repeat("é", 40)+"2"
	a, b := keyText(long1), keyText(long2)
	if len(a) > MaxKeyText || len(b) > MaxKeyText || a == b || !strings.HasPrefix(a, "header:X-Api-Key=é") {
		t.Fatalf("long keys %q and %q: want at most %d bytes each, distinct", a, b, MaxKeyText)
	}
	if !strings.Contains(a, "…#") || !utf8Valid(a) {
		t.Fatalf("%q: want valid UTF-8 ending in …#hash", a)
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// TestErrorsAcrossBatches: lines are read a batch ahead; unparseable lines
// keep their numbers and the records their order across batches.
func TestErrorsAcrossBatches(t *testing.T) {
	t.Parallel()
	s := MustSim(t, ordersRoute+`limits:
  - id: per-ip
    routes: [orders]
    key: [ip]
    algorithm: fixed_window
    rate: 1
    period: 1m
`)
	var b strings.Builder
	bad := map[int]bool{1500: true, 2049: true, 3001: true}
	const n = 3 * batchSize
	for i := 1; i <= n; i++ {
		if bad[i] {
			b.WriteString("garbage\n")
			continue
		}
		// One request a minute: every one admitted, and out of order only if
		// the batches were.
		b.WriteString(combinedLine("192.0.2.1", base.Add(time.Duration(i)*time.Minute), "GET", "/api/orders", "-"))
	}
	st, res := replayLog(t, b.String(), FormatCombined, s)
	if st.Lines != n || st.Unparseable != 3 || st.OutOfOrder != 0 || len(st.Errors) != 3 {
		t.Fatalf("stats %+v", st)
	}
	for i, want := range []int64{1500, 2049, 3001} {
		if st.Errors[i].Line != want {
			t.Fatalf("errors %+v, want lines 1500, 2049, 3001", st.Errors)
		}
	}
	if r := rule(t, res[0], "per-ip"); r.Admitted != n-3 || r.Rejected != 0 {
		t.Fatalf("per-ip: %+v, want every good line admitted", r)
	}
}

// TestRunStops: a done context stops the replay with its error, and a
// failed read is returned.
func TestRunStops(t *testing.T) {
	t.Parallel()
	s := MustSim(t, ordersRoute)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	lr, _ := NewReader(strings.NewReader(strings.Repeat(combinedLine("192.0.2.1", base, "GET", "/", "-"), 5000)), FormatCombined)
	if _, err := Run(ctx, lr, s); err != context.Canceled {
		t.Fatalf("Run with a cancelled context: %v, want context.Canceled", err)
	}
	lr, _ = NewReader(io.MultiReader(strings.NewReader(combinedLine("192.0.2.1", base, "GET", "/", "-")), iotest.ErrReader(errors.New("disk on fire"))), FormatCombined)
	st, err := Run(context.Background(), lr, s)
	if err == nil || !strings.Contains(err.Error(), "disk on fire") || st.Replayed != 1 {
		t.Fatalf("Run over a failing reader: %+v %v, want the line before and the read error", st, err)
	}
}
