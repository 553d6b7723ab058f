package api

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestServiceValidate checks each rule of a kind: service document (and of
// resources and sdk: parts in a gateway one) by its field path.
func TestServiceValidate(t *testing.T) {
	t.Parallel()
	full := MustValid(t, "full.yaml")
	tests := []struct {
		desc   string
		mutate func(rs *RuleSet)
		msg    string
		paths  []string
	}{
		{"unknown kind", func(rs *RuleSet) {
			*rs = *full.Clone()
			rs.Kind = "sidecar"
		}, "not one of gateway, service", []string{"kind"}},
		{"route with upstream", func(rs *RuleSet) {
			rs.Routes[0].Upstream.Targets = []Target{{URL: "http://127.0.0.1:1"}}
		}, "remove upstream", []string{"routes[0].upstream"}},
		{"identities", func(rs *RuleSet) {
			rs.Identities = []Identity{{ID: "users", JWT: &JWTSettings{JWKS: JWKSSource{File: "/x"}, Issuer: "https://idp", Audiences: []string{"a"}, Algorithms: []JWTAlgorithm{"RS256"}}}}
		}, "verifies no tokens", []string{"identities"}},
		{"rule names nothing", func(rs *RuleSet) { rs.Limits[0].Resources = nil }, "names no routes and no resources", []string{"limits[0]"}},
		{"resource with space", func(rs *RuleSet) { rs.Limits[0].Resources = []string{"a b"} }, "printable ASCII", []string{"limits[0].resources[0]"}},
		{"resource too long", func(rs *RuleSet) { rs.Limits[0].Resources = []string{strings.Repeat("r", MaxResourceLength+1)} }, "1 to 256 bytes", []string{"limits[0].resources[0]"}},
		{"resource twice", func(rs *RuleSet) { rs.Limits[0].Resources = []string{"a", "a"} }, "listed twice", []string{"limits[0].resources[1]"}},
		{"ip key on a resource", func(rs *RuleSet) { rs.Limits[0].Key = []string{"ip"} }, "cannot be read for a resource", []string{"limits[0].key[0]"}},
		{"header key on a resource", func(rs *RuleSet) { rs.Limits[0].Key = []string{"sdk:user", "header:X-User"} }, "cannot be read for a resource", []string{"limits[0].key[1]"}},
		{"sdk key on a rule with routes", func(rs *RuleSet) { rs.Limits[0].Routes = []string{"create"} }, "apply only to resources", []string{"limits[0].key[0]"}},
		{"sdk key bad name", func(rs *RuleSet) { rs.Limits[0].Key = []string{"sdk:a/b"} }, "not an SDK key name", []string{"limits[0].key[0]"}},
		{"cost on a resource", func(rs *RuleSet) { rs.Limits[0].Cost = &Cost{Header: "X-Cost"} }, "does not apply to resources", []string{"limits[0].cost"}},
		{"two breakers on a resource", func(rs *RuleSet) {
			b := rs.Breakers[0]
			b.ID = "db2"
			rs.Breakers = append(rs.Breakers, b)
		}, "already covered by breakers[0]", []string{"breakers[1].resources[0]"}},
		{"degrade keyed on ip for a resource", func(rs *RuleSet) { rs.Degrades[0].Key = []string{"ip"} }, "cannot be read for a resource", []string{"degrades[0].key[0]"}},
		{"gateway kind: route without upstream", func(rs *RuleSet) {
			rs.Kind = KindGateway
			rs.Limits, rs.Breakers, rs.Degrades = nil, nil, nil
		}, "at least one target", []string{"routes[0].upstream.targets"}},
		{"gateway: resources and sdk parts", func(rs *RuleSet) {
			rs.Kind = ""
			rs.Routes = nil
			rs.Limits, rs.Breakers, rs.Degrades = rs.Limits[:1], nil, nil
		}, "applies only to a kind: service document", []string{"limits[0].resources", "limits[0].key[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			rs := MustValid(t, "service.yaml")
			tt.mutate(rs)
			wantErrors(t, rs.Validate(), tt.msg, tt.paths...)
		})
	}
}

// TestServiceDecodeStrict checks that both fast paths decode a service
// document alike and refuse unknown fields by path.
func TestServiceDecodeStrict(t *testing.T) {
	t.Parallel()
	y := MustReadFile(t, "service.yaml")
	fromYAML := MustDecode(t, y)
	j, err := json.Marshal(fromYAML)
	if err != nil {
		t.Fatal(err)
	}
	fromJSON := MustDecode(t, j)
	if !bytes.Equal(fromYAML.Canonical(), fromJSON.Canonical()) {
		t.Fatalf("YAML and JSON decode differently:\n%s\n%s", fromYAML.Canonical(), fromJSON.Canonical())
	}
	if fromYAML.Kind != KindService || len(fromYAML.Limits[0].Resources) != 2 || fromYAML.Limits[0].Key[0] != "sdk:user" {
		t.Fatalf("decoded %+v", fromYAML.Limits[0])
	}
	_, err = Decode([]byte("namespace: a\nkind: service\nlimits:\n  - {id: l, resource: [x], algorithm: token_bucket, rate: 1}\n"))
	if err == nil || !strings.Contains(err.Error(), "limits[0].resource") {
		t.Fatalf("unknown field: %v", err)
	}
}

// TestServiceCanonical checks a service document's canonical form: kind and
// resources are written, routes have no upstream, a resource degrade sheds
// by the global key, and kind: gateway is the absent default (so that every
// gateway document keeps its checksum).
func TestServiceCanonical(t *testing.T) {
	t.Parallel()
	rs := MustValid(t, "service.yaml")
	c := string(rs.Canonical())
	for _, want := range []string{`"kind":"service"`, `"resources":["orders.Create","/shop.Orders/Create"]`,
		`"routes":[{"id":"create","match":{"pathPrefix":"/api/orders","methods":["POST"]}}]`, `"key":["global"]`} {
		if !strings.Contains(c, want) {
			t.Errorf("canonical form lacks %s:\n%s", want, c)
		}
	}
	if strings.Contains(c, "upstream") {
		t.Errorf("a service route has an upstream in canonical form:\n%s", c)
	}
	again := MustDecode(t, rs.Canonical())
	if err := again.Validate(); err != nil {
		t.Fatalf("canonical form does not validate: %v", err)
	}
	if !bytes.Equal(again.Canonical(), rs.Canonical()) {
		t.Fatal("canonical form is not a fixed point")
	}
	gw := MustValid(t, "full.yaml")
	explicit := gw.Clone()
	explicit.Kind = KindGateway
	if gw.Checksum() != explicit.Checksum() {
		t.Fatal("kind: gateway changes the checksum of a gateway document")
	}
}
