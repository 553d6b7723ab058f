// Package rulegen builds large valid rule sets for benchmarks and tests of
// the node's compile path.
package rulegen

import (
	"fmt"
	"time"

	"github.com/sluicegw/sluice/api"
)

// Large returns a valid rule set of n rules in the mix of a large real
// namespace (and of the api package's BenchmarkDecodeValidate): n/2 routes
// (path prefixes, some exact paths, regexes, hosts and header matches), n/4
// limits, n/8 breakers and n/8 degrades, each naming one route. Limit l0's
// rate is rate, so that two calls with different rates differ in exactly
// one rule.
func Large(n int, rate int64) *api.RuleSet {
	rs := &api.RuleSet{Namespace: "big"}
	nr := n / 2
	for i := range nr {
		m := api.Match{PathPrefix: fmt.Sprintf("/api/v1/svc%d", i), Methods: []string{"GET", "POST"}}
		switch i % 10 {
		case 1:
			m = api.Match{Path: fmt.Sprintf("/exact/%d", i)}
		case 2:
			m = api.Match{PathRegex: fmt.Sprintf(`^/items/%d/[0-9]+$`, i)}
		case 3:
			m.Hosts = []string{fmt.Sprintf("h%d.example.com", i), "*.example.org"}
		case 4:
			m.Headers = map[string]string{"X-Tenant": fmt.Sprint(i)}
		}
		rs.Routes = append(rs.Routes, api.Route{ID: fmt.Sprintf("r%d", i), Match: m, Upstream: api.Upstream{
			Targets: []api.Target{{URL: fmt.Sprintf("http://10.0.%d.%d:8080", i/250%250, i%250+1), Weight: 2}, {URL: "http://10.1.0.1:8080"}},
			Timeout: api.Duration(5 * time.Second)}})
	}
	for i := range n / 4 {
		r := int64(100 + i)
		if i == 0 {
			r = rate
		}
		rs.Limits = append(rs.Limits, api.Limit{ID: fmt.Sprintf("l%d", i), Routes: []string{fmt.Sprintf("r%d", i%nr)},
			Key: []string{"ip", "header:X-User"}, Algorithm: api.TokenBucket, Rate: r, Period: api.Duration(time.Second), Burst: 200})
	}
	for i := range n / 8 {
		rs.Breakers = append(rs.Breakers, api.Breaker{ID: fmt.Sprintf("b%d", i), Routes: []string{fmt.Sprintf("r%d", i)},
			Window: api.Duration(10 * time.Second), ErrorRatio: 0.5, OpenFor: api.Duration(5 * time.Second), FailureStatuses: []int{500, 502, 503}})
	}
	for i := range n / 8 {
		rs.Degrades = append(rs.Degrades, api.Degrade{ID: fmt.Sprintf("d%d", i), Routes: []string{fmt.Sprintf("r%d", nr-1-i)},
			Mode: api.DegradeAuto, Triggers: &api.DegradeTriggers{Level1: &api.Trigger{QPSAbove: 1000}}})
	}
	return rs
}
