package replay

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
)

// benchRules is a 100-limit rule set over 40 routes: per route a token
// bucket per client, then a fixed window per API key header on half of
// them, a sliding window per route on a quarter, and five limits on every
// route (two of them shadows, one cluster-wide).
func benchRules() string {
	var b strings.Builder
	b.WriteString("namespace: bench\nroutes:\n")
	const routes = 40
	for i := range routes {
		fmt.Fprintf(&b, "  - id: svc-%02d\n    match: {pathPrefix: /svc/%02d}\n    upstream: {targets: [{url: \"http://127.0.0.1:8081\"}]}\n", i, i)
	}
	b.WriteString("limits:\n")
	n := 0
	add := func(format string, args ...any) {
		fmt.Fprintf(&b, format, args...)
		n++
	}
	for i := range routes {
		add("  - {id: ip-%02d, routes: [svc-%02d], key: [ip], algorithm: token_bucket, rate: 5, period: 1s, burst: 10}\n", i, i)
	}
	for i := 0; i < routes; i += 2 {
		add("  - {id: key-%02d, routes: [svc-%02d], key: [header:X-Api-Key], algorithm: fixed_window, rate: 300, period: 1m}\n", i, i)
	}
	for i := 0; i < routes; i++ {
		if i%4 == 1 || n >= 95 {
			continue
		}
		add("  - {id: route-%02d, routes: [svc-%02d], key: [global], algorithm: sliding_window, rate: 2000, period: 1m}\n", i, i)
	}
	for n < 95 {
		add("  - {id: extra-%02d, routes: [svc-%02d], key: [ip, route], algorithm: leaky_bucket, rate: 20, period: 1s, burst: 20}\n", n, n%routes)
	}
	add("  - {id: all-ip, key: [ip], algorithm: token_bucket, rate: 50, period: 1s, burst: 100}\n")
	add("  - {id: all-ip-shadow, key: [ip], algorithm: token_bucket, rate: 2, period: 1s, burst: 4, shadow: true}\n")
	add("  - {id: all-ua-shadow, key: [header:User-Agent], algorithm: fixed_window, rate: 1000, period: 1m, shadow: true}\n")
	add("  - {id: all-global, key: [global], algorithm: sliding_window, rate: 100000, period: 1m, scope: cluster}\n")
	add("  - {id: all-query, key: [query:user], algorithm: fixed_window, rate: 100, period: 1m}\n")
	if n != 100 {
		panic(fmt.Sprintf("bench rules: %d limits", n))
	}
	return b.String()
}

// writeBenchLog writes lines combined log lines at about 1000 a second
// from 20,000 clients (a few of them hot), over 40 routes.
func writeBenchLog(tb testing.TB, path string, lines int) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	start := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	for i := range lines {
		at := start.Add(time.Duration(i) * time.Millisecond)
		client := rng.IntN(20000)
		if rng.IntN(10) == 0 {
			client = rng.IntN(20) // hot clients
		}
		route := rng.IntN(40)
		fmt.Fprintf(w, "10.%d.%d.%d - - [%s] \"GET /svc/%02d/items/%d?user=u%d HTTP/1.1\" 200 %d \"-\" \"app/%d\"\n",
			client>>16, (client>>8)&255, client&255, at.Format("02/Jan/2006:15:04:05 -0700"), route, rng.IntN(1000), client%500, rng.IntN(5000), client%7)
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
}

// TestBenchSimulate replays 1,000,000 lines through the 100-limit set and
// reports the time and memory: the target is ≤ 5 s and ≤ 500 MB for the
// whole `sluicectl simulate` (measure that with /usr/bin/time -v on the
// files this writes: set SLUICE_BENCH_SIMULATE_DIR to keep them). Run with
// SLUICE_BENCH_SIMULATE=1.
func TestBenchSimulate(t *testing.T) {
	if os.Getenv("SLUICE_BENCH_SIMULATE") != "1" {
		t.Skip("set SLUICE_BENCH_SIMULATE=1 to run the 1,000,000-line replay")
	}
	dir := os.Getenv("SLUICE_BENCH_SIMULATE_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	rulesPath, logPath := filepath.Join(dir, "bench-rules.yaml"), filepath.Join(dir, "bench-access.log")
	if err := os.WriteFile(rulesPath, []byte(benchRules()), 0o644); err != nil {
		t.Fatal(err)
	}
	const lines = 1_000_000
	writeBenchLog(t, logPath, lines)
	t.Logf("wrote %s and %s", rulesPath, logPath)

	rs, err := api.Decode([]byte(benchRules()))
	if err != nil {
		t.Fatal(err)
	}
	v, err := api.Validated(rs)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	begin := time.Now()
	s, err := New(v, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lr, _ := NewReader(f, FormatAuto)
	st, err := Run(context.Background(), lr, s)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Result()
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(begin)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var rejected, shadow int64
	for _, r := range res.Rules {
		rejected += r.Rejected
		shadow += r.ShadowRejected
	}
	t.Logf("%d lines (%d replayed, %d unparseable) through %d limits in %v (%.0f lines/s); %d rejections, %d shadow; heap in use %d MiB, from the OS %d MiB",
		st.Lines, st.Replayed, st.Unparseable, len(res.Rules), took, float64(st.Lines)/took.Seconds(), rejected, shadow, ms.HeapInuse>>20, ms.Sys>>20)
	if st.Replayed != lines || len(res.Rules) != 100 || rejected == 0 || shadow == 0 {
		t.Fatalf("stats %+v, %d rules, %d rejected, %d shadow: want every line replayed and some rejections of each kind", st, len(res.Rules), rejected, shadow)
	}

	// Side by side (simulate --against published): the set and a copy with
	// its per-API-key windows ten times looser, in one pass.
	loose, err := api.Decode([]byte(strings.ReplaceAll(benchRules(), "fixed_window, rate: 300, period: 1m}", "fixed_window, rate: 3000, period: 1m}")))
	if err != nil {
		t.Fatal(err)
	}
	lv, err := api.Validated(loose)
	if err != nil {
		t.Fatal(err)
	}
	begin = time.Now()
	a, err := New(v, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := New(lv, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	lr, _ = NewReader(f, FormatAuto)
	if _, err := Run(context.Background(), lr, a, b); err != nil {
		t.Fatal(err)
	}
	ra, _ := a.Result()
	rb, _ := b.Result()
	sum := func(r Result) (n int64) {
		for _, rr := range r.Rules {
			n += rr.Rejected
		}
		return n
	}
	t.Logf("side by side: %d lines through two 100-limit sets in %v; %d rejections (as alone) vs %d (looser API-key windows)",
		lines, time.Since(begin), sum(ra), sum(rb))
	if sum(ra) != rejected || sum(rb) >= sum(ra) {
		t.Fatalf("side by side: %d and %d rejections, want %d (as alone) and fewer", sum(ra), sum(rb), rejected)
	}
}
