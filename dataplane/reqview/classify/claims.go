package classify

import (
	"maps"
	"slices"

	"github.com/sluicegw/sluice/dataplane/reqview"
)

// claimEq is one claim a match requires: the value at path.
type claimEq struct{ path, value string }

// ClaimMatch is a compiled claims match (a limit tier's or a class's
// match.claims): every claim it names must hold its value. The empty match
// matches every caller, claims or not.
type ClaimMatch []claimEq

// CompileClaims compiles a claims match (claim path to value) in a fixed
// order.
func CompileClaims(m map[string]string) ClaimMatch {
	var eqs ClaimMatch
	for _, p := range slices.Sorted(maps.Keys(m)) {
		eqs = append(eqs, claimEq{path: p, value: m[p]})
	}
	return eqs
}

// Match reports whether claims carry every claim of m (an empty m matches
// every caller, claims or not). It allocates nothing.
func (m ClaimMatch) Match(c *reqview.Claims) bool {
	for _, eq := range m {
		if v, ok := c.Get(eq.path); !ok || v != eq.value {
			return false
		}
	}
	return true
}
