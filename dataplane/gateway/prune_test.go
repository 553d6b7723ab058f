package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/dataplane/source"
)

// manyRules has routes r0..r{routes-1} (each with a breaker and a degrade
// plan) and limits l0..l{limits-1} spread over them.
func manyRules(up string, routes, limits int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "namespace: prune\nroutes:\n")
	for i := range routes {
		fmt.Fprintf(&b, "  - id: r%d\n    match: {pathPrefix: /r%d}\n    upstream: {targets: [{url: %q}]}\n", i, i, up)
	}
	b.WriteString("limits:\n")
	for i := range limits {
		fmt.Fprintf(&b, "  - {id: l%d, routes: [r%d], algorithm: token_bucket, rate: 1000000}\n", i, i%routes)
	}
	b.WriteString("breakers:\n")
	for i := range routes {
		fmt.Fprintf(&b, "  - {id: b%d, routes: [r%d], window: 10s, minRequests: 10, errorRatio: 0.5, openFor: 1s}\n", i, i)
	}
	b.WriteString("degrades:\n")
	for i := range routes {
		fmt.Fprintf(&b, "  - {id: d%d, routes: [r%d], mode: manual}\n", i, i)
	}
	return b.String()
}

// seriesCount scrapes /metrics and counts the series (sample lines) of each
// metric name among names.
func seriesCount(tb testing.TB, admin string, names ...string) map[string]int {
	tb.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	n := map[string]int{}
	for _, line := range strings.Split(string(body), "\n") {
		for _, name := range names {
			if strings.HasPrefix(line, name+"{") {
				n[name]++
			}
		}
	}
	return n
}

// TestStaleSeriesPruned: after a version with 9,000 limits (and 20 routes,
// breakers and degrade plans) is replaced by one with 2 limits and 1 of each,
// /metrics exports only the series of the rules that are left.
func TestStaleSeriesPruned(t *testing.T) {
	up := okUpstream(t)
	n, base, admin := MustStart(t, manyRules(up.URL, 20, 9000))
	for i := range 20 {
		resp, err := http.Get(fmt.Sprintf("%s/r%d/x", base, i))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	names := []string{"sluice_limit_decisions_total", "sluice_breaker_state", "sluice_degrade_level",
		"sluice_requests_total", "sluice_request_duration_seconds_count"}
	before := seriesCount(t, admin, names...)
	start := time.Now()
	if err := n.Apply(context.Background(), source.Update{Data: []byte(manyRules(up.URL, 1, 2)), Version: 2, Source: "test"}); err != nil {
		t.Fatal(err)
	}
	applied := time.Since(start)
	after := seriesCount(t, admin, names...)
	t.Logf("series before %v, after %v (swap with pruning took %v)", before, after, applied)
	want := map[string]int{
		"sluice_limit_decisions_total":          2 * 5, // allow, reject, shadow_reject, exempt, store_error
		"sluice_breaker_state":                  1,
		"sluice_degrade_level":                  1,
		"sluice_requests_total":                 1, // r0's 200
		"sluice_request_duration_seconds_count": 1,
	}
	if before["sluice_limit_decisions_total"] < 9000*5 {
		t.Fatalf("the 9,000-limit version exported only %d decision series", before["sluice_limit_decisions_total"])
	}
	for name, w := range want {
		if after[name] != w {
			t.Errorf("%s: %d series after the swap, want %d", name, after[name], w)
		}
	}
}
