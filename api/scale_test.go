package api

import (
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// largeRuleSet returns a valid rule set of n rules in a mix close to a large
// real namespace: n/2 routes (path prefixes, some exact paths, regexes, hosts,
// methods and header matches), n/4 limits, n/8 breakers and n/8 degrades,
// each naming one route.
func largeRuleSet(n int) *RuleSet {
	rs := &RuleSet{Namespace: "big"}
	nr := n / 2
	for i := range nr {
		id := fmt.Sprintf("r%d", i)
		m := Match{PathPrefix: fmt.Sprintf("/api/v1/svc%d", i), Methods: []string{"GET", "POST"}}
		switch i % 10 {
		case 1:
			m = Match{Path: fmt.Sprintf("/exact/%d", i)}
		case 2:
			m = Match{PathRegex: fmt.Sprintf(`^/items/%d/[0-9]+$`, i)}
		case 3:
			m.Hosts = []string{fmt.Sprintf("h%d.example.com", i), "*.example.org"}
		case 4:
			m.Headers = map[string]string{"X-Tenant": fmt.Sprint(i)}
		}
		rs.Routes = append(rs.Routes, Route{ID: id, Match: m, Upstream: Upstream{
			Targets: []Target{{URL: fmt.Sprintf("http://10.0.%d.%d:8080", i/250%250, i%250+1), Weight: 2}, {URL: "http://10.1.0.1:8080"}},
			Timeout: Duration(5 * time.Second)}})
	}
	for i := range n / 4 {
		rs.Limits = append(rs.Limits, Limit{ID: fmt.Sprintf("l%d", i), Routes: []string{fmt.Sprintf("r%d", i%nr)},
			Key: []string{"ip", "header:X-User"}, Algorithm: TokenBucket, Rate: int64(100 + i), Period: Duration(time.Second), Burst: 200})
	}
	for i := range n / 8 {
		rs.Breakers = append(rs.Breakers, Breaker{ID: fmt.Sprintf("b%d", i), Routes: []string{fmt.Sprintf("r%d", i)},
			Window: Duration(10 * time.Second), ErrorRatio: 0.5, OpenFor: Duration(5 * time.Second), FailureStatuses: []int{500, 502, 503}})
	}
	for i := range n / 8 {
		rs.Degrades = append(rs.Degrades, Degrade{ID: fmt.Sprintf("d%d", i), Routes: []string{fmt.Sprintf("r%d", nr-1-i)},
			Mode: DegradeAuto, Triggers: &DegradeTriggers{Level1: &Trigger{QPSAbove: 1000}}})
	}
	return rs
}

// largeDocument is largeRuleSet(n) as an indented JSON document, as an editor
// or sluicectl would send it.
func largeDocument(tb testing.TB, n int) []byte {
	tb.Helper()
	b, err := json.MarshalIndent(largeRuleSet(n), "", "  ")
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// BenchmarkDecodeValidate measures Decode and Validate of a JSON document of
// 1k, 10k and 20k rules (target: 20k in ≤ 300 ms, linear in size).
func BenchmarkDecodeValidate(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 20_000} {
		doc := largeDocument(b, n)
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(doc)))
			cpu0 := cpuTime()
			for b.Loop() {
				rs, err := Decode(doc)
				if err != nil {
					b.Fatal(err)
				}
				if err := rs.Validate(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}

// largeYAML is largeRuleSet(n) as a block-style YAML document.
func largeYAML(tb testing.TB, n int) []byte {
	tb.Helper()
	var node yaml.Node
	if err := yaml.Unmarshal(largeDocument(tb, n), &node); err != nil {
		tb.Fatal(err)
	}
	var block func(n *yaml.Node)
	block = func(n *yaml.Node) {
		n.Style = 0
		for _, c := range n.Content {
			block(c)
		}
	}
	block(&node)
	b, err := yaml.Marshal(&node)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// BenchmarkDecodeValidateYAML is BenchmarkDecodeValidate for the same rules
// written as block YAML.
func BenchmarkDecodeValidateYAML(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 20_000} {
		doc := largeYAML(b, n)
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(doc)))
			cpu0 := cpuTime()
			for b.Loop() {
				rs, err := Decode(doc)
				if err != nil {
					b.Fatal(err)
				}
				if err := rs.Validate(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}

// TestLargeDocumentsDecodeAlike checks that the large benchmark documents,
// in JSON and in YAML, decode to the same valid rule set.
func TestLargeDocumentsDecodeAlike(t *testing.T) {
	t.Parallel()
	j, y := MustDecode(t, largeDocument(t, 400)), MustDecode(t, largeYAML(t, 400))
	if err := j.Validate(); err != nil {
		t.Fatal(err)
	}
	if j.Checksum() != y.Checksum() {
		t.Fatal("the JSON and YAML documents differ")
	}
}

// cpuTime is the CPU time this process has used (user and system, every
// thread): a cost per operation that, unlike wall time, other work on a
// shared machine barely moves.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
