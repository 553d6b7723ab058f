package api

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
)

// Rule documents of kind: service (RuleSet.Kind), run by the in-service SDK
// (package dataplane/sdk) rather than a gateway:
//
//   - routes have no upstream: they name requests the service's own
//     handlers answer, which the SDK's HTTP middleware guards;
//   - limits, breakers and degrade plans may name resources (what a service
//     passes to Guard.Do; a gRPC full method name) beside routes, and apply
//     only to the routes and resources they name: one that names neither
//     is refused, because "every route" would silently leave every resource
//     out;
//   - a rule that names resources keys only on parts a guarded call carries
//     (global, route — the resource's name — and sdk:NAME, a value the
//     service passes in sdk.Keys); sdk: parts apply only to resources;
//   - what the SDK cannot honour is refused: upstreams, identities (the SDK
//     verifies no tokens) and cost on a rule naming resources.
//
// A gateway refuses a kind: service document, and the SDK a gateway one.

// sdkKeyPattern is the NAME of an sdk:NAME key part.
var sdkKeyPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// SDKPart returns the name of an sdk:NAME key part and true, or false for any
// other part.
func SDKPart(part string) (string, bool) { return strings.CutPrefix(part, "sdk:") }

// IsService reports whether rs is a kind: service document.
func (rs *RuleSet) IsService() bool { return rs != nil && rs.Kind == KindService }

// isZero reports whether u is absent (a route of a kind: service document).
func (u *Upstream) isZero() bool { return reflect.ValueOf(u).Elem().IsZero() }

// kind checks rs.Kind and what a kind: service document may not hold, and
// reports whether rs is one.
func (v validator) kind(rs *RuleSet) bool {
	switch rs.Kind {
	case "", KindGateway:
	case KindService:
		if len(rs.Identities) > 0 {
			v.add("identities", "are not supported in a kind: service document (the SDK verifies no tokens)")
		}
		return true
	default:
		v.add("kind", "%q is not one of gateway, service", rs.Kind)
	}
	return false
}

// ruleResources checks the resources of one limit, breaker or degrade plan at
// p, with its routes and key (nil for a breaker): names, duplicates, the key
// parts a resource carries, and, with covered (breakers, degrades), that no
// resource has two rules of the kind.
func (v validator) ruleResources(p string, routes, resources, key []string, covered map[string]string) {
	if !v.service {
		if len(resources) > 0 {
			v.add(p+".resources", "applies only to a kind: service document (a gateway has no resources)")
		}
		for i, k := range key {
			if _, ok := SDKPart(k); ok {
				v.add(fmt.Sprintf("%s.key[%d]", p, i), "%q: sdk: parts apply only to resources, in a kind: service document", k)
			}
		}
		return
	}
	if len(routes) == 0 && len(resources) == 0 {
		v.add(p, "names no routes and no resources; in a kind: service document a rule applies only to what it names")
	}
	var seen map[string]bool
	for i, r := range resources {
		rp := fmt.Sprintf("%s.resources[%d]", p, i)
		switch {
		case r == "" || len(r) > MaxResourceLength:
			v.add(rp, "must be 1 to %d bytes", MaxResourceLength)
		case strings.IndexFunc(r, func(c rune) bool { return c <= ' ' || c > '~' }) >= 0:
			v.add(rp, "%q must be printable ASCII without spaces", r)
		}
		if listedBefore(resources, i, &seen) {
			v.add(rp, "%q is listed twice", r)
		} else if covered != nil {
			if other, ok := covered[r]; ok {
				v.add(rp, "resource %q is already covered by %s; a resource may have only one of each", r, other)
			} else {
				covered[r] = p
			}
		}
	}
	for i, k := range key {
		kp := fmt.Sprintf("%s.key[%d]", p, i)
		_, sdk := SDKPart(k)
		switch {
		case sdk && len(routes) > 0:
			v.add(kp, "%q: sdk: parts apply only to resources, and this rule names routes too", k)
		case !sdk && len(resources) > 0 && k != "global" && k != "route":
			v.add(kp, "%q cannot be read for a resource (a guarded call carries global, route and sdk:NAME parts)", k)
		}
	}
}

// normalizeService writes the defaults of a kind: service document that
// differ from a gateway's: a degrade plan that names resources sheds by the
// global key unless it names one ([ip] reads nothing in a guarded call).
// Routes keep no upstream.
func (rs *RuleSet) normalizeService() {
	for i := range rs.Degrades {
		if d := &rs.Degrades[i]; len(d.Key) == 0 && len(d.Resources) > 0 {
			d.Key = []string{"global"}
		}
	}
}
