package api

import (
	"encoding/json"
	"strconv"
	"testing"
)

func mustDecodeDiff(tb testing.TB, doc string) *RuleSet {
	tb.Helper()
	rs, err := Decode([]byte(doc))
	if err != nil {
		tb.Fatalf("decode: %v", err)
	}
	return rs
}

const diffBase = `
namespace: shop
routes:
  - id: orders
    match: {pathPrefix: /api/orders, methods: [GET]}
    upstream: {targets: [{url: "http://127.0.0.1:8081"}]}
  - id: users
    match: {pathPrefix: /api/users}
    upstream: {targets: [{url: "http://127.0.0.1:8082"}]}
limits:
  - id: per-ip
    key: [ip]
    algorithm: token_bucket
    rate: 100
`

func TestDiffRuleSets(t *testing.T) {
	tests := []struct {
		desc      string
		from, to  string
		want      map[string]DiffOp // kind/id → op
		fields    map[string][]string
		reordered []string
	}{
		{desc: "identical", from: diffBase, to: diffBase, want: map[string]DiffOp{}},
		{
			desc: "defaults spelled out are no change",
			from: diffBase,
			to: `
namespace: shop
routes:
  - id: orders
    match: {pathPrefix: /api/orders, methods: [get]}
    upstream: {targets: [{url: "http://127.0.0.1:8081", weight: 1}], timeout: 30s}
  - id: users
    match: {pathPrefix: /api/users}
    upstream: {targets: [{url: "http://127.0.0.1:8082"}]}
limits:
  - id: per-ip
    key: [ip]
    algorithm: token_bucket
    rate: 100
    burst: 100
    period: 1s
    scope: node
`,
			want: map[string]DiffOp{},
		},
		{
			desc: "added removed changed",
			from: diffBase,
			to: `
namespace: shop
routes:
  - id: orders
    match: {pathPrefix: /api/orders, methods: [GET, POST]}
    upstream: {targets: [{url: "http://127.0.0.1:9999"}]}
  - id: carts
    match: {pathPrefix: /api/carts}
    upstream: {targets: [{url: "http://127.0.0.1:8083"}]}
limits:
  - id: per-ip
    key: [ip]
    algorithm: token_bucket
    rate: 200
    shadow: true
`,
			want: map[string]DiffOp{"routes/orders": DiffChanged, "routes/users": DiffRemoved, "routes/carts": DiffAdded, "limits/per-ip": DiffChanged},
			fields: map[string][]string{
				"routes/orders": {"match.methods", "upstream.targets[0].url"},
				"limits/per-ip": {"burst", "rate", "shadow"},
			},
		},
		{
			desc: "reordered routes",
			from: diffBase,
			to: `
namespace: shop
routes:
  - id: users
    match: {pathPrefix: /api/users}
    upstream: {targets: [{url: "http://127.0.0.1:8082"}]}
  - id: orders
    match: {pathPrefix: /api/orders, methods: [GET]}
    upstream: {targets: [{url: "http://127.0.0.1:8081"}]}
limits:
  - id: per-ip
    key: [ip]
    algorithm: token_bucket
    rate: 100
`,
			want:      map[string]DiffOp{},
			reordered: []string{"routes"},
		},
		{
			desc: "from empty",
			from: "", to: diffBase,
			want: map[string]DiffOp{"routes/orders": DiffAdded, "routes/users": DiffAdded, "limits/per-ip": DiffAdded},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			var from *RuleSet
			if tt.from != "" {
				from = mustDecodeDiff(t, tt.from)
			}
			to := mustDecodeDiff(t, tt.to)
			d := DiffRuleSets(from, to)
			got := map[string]DiffOp{}
			for _, r := range d.Rules {
				got[r.Kind+"/"+r.ID] = r.Op
				if want, ok := tt.fields[r.Kind+"/"+r.ID]; ok {
					var paths []string
					for _, f := range r.Fields {
						paths = append(paths, f.Path)
					}
					if !equalStrings(paths, want) {
						t.Errorf("%s/%s fields = %v, want %v", r.Kind, r.ID, paths, want)
					}
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("rules = %v, want %v", got, tt.want)
			}
			for k, op := range tt.want {
				if got[k] != op {
					t.Errorf("%s = %q, want %q", k, got[k], op)
				}
			}
			if !equalStrings(d.Reordered, tt.reordered) {
				t.Errorf("reordered = %v, want %v", d.Reordered, tt.reordered)
			}
			if d.Empty() != (len(tt.want) == 0 && len(tt.reordered) == 0) {
				t.Errorf("Empty() = %v", d.Empty())
			}
			if d.Added+d.Removed+d.Changed != len(d.Rules) {
				t.Errorf("counts %d+%d+%d != %d rules", d.Added, d.Removed, d.Changed, len(d.Rules))
			}
		})
	}
}

func TestDiffFieldValues(t *testing.T) {
	from := mustDecodeDiff(t, diffBase)
	to := from.Clone()
	to.Limits[0].Rate = 7
	to.Limits[0].Exempt = []string{"10.0.0.0/8"}
	d := DiffRuleSets(from, to)
	if len(d.Rules) != 1 || d.Rules[0].Op != DiffChanged {
		t.Fatalf("diff = %+v", d)
	}
	byPath := map[string]FieldDiff{}
	for _, f := range d.Rules[0].Fields {
		byPath[f.Path] = f
	}
	if f := byPath["rate"]; string(f.Old) != "100" || string(f.New) != "7" {
		t.Errorf("rate: old %s new %s", f.Old, f.New)
	}
	if f := byPath["exempt"]; f.Old != nil || string(f.New) != `["10.0.0.0/8"]` {
		t.Errorf("exempt: old %s new %s", f.Old, f.New)
	}
	// The arguments are untouched and the diff marshals.
	if from.Limits[0].Rate != 100 {
		t.Error("from was changed")
	}
	if _, err := json.Marshal(d); err != nil {
		t.Fatal(err)
	}
	removed := DiffRuleSets(from, nil)
	if removed.Removed != 3 || removed.Rules[0].Old == nil {
		t.Errorf("diff to nil = %+v", removed)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func BenchmarkDiffRuleSets10k(b *testing.B) {
	from := &RuleSet{Namespace: "bench"}
	for i := range 5000 {
		id := "r" + strconv.Itoa(i)
		from.Routes = append(from.Routes, Route{ID: id, Match: Match{PathPrefix: "/" + id}, Upstream: Upstream{Targets: []Target{{URL: "http://127.0.0.1:8081"}}}})
		from.Limits = append(from.Limits, Limit{ID: "l" + strconv.Itoa(i), Routes: []string{id}, Key: []string{"ip"}, Algorithm: TokenBucket, Rate: 100})
	}
	to := from.Clone()
	for i := 0; i < len(to.Limits); i += 100 {
		to.Limits[i].Rate++
	}
	b.ReportAllocs()
	for b.Loop() {
		if d := DiffRuleSets(from, to); d.Changed != 50 {
			b.Fatalf("changed = %d", d.Changed)
		}
	}
}

// TestDiffKind: a gateway document turned into a kind: service one (or
// back) is a difference even with the same rules; kind: gateway spelt out
// is none, and so is a service's first document (against nothing).
func TestDiffKind(t *testing.T) {
	t.Parallel()
	gw := &RuleSet{Namespace: "orders-svc", Limits: []Limit{{ID: "l", Resources: nil, Key: []string{"ip"}, Algorithm: TokenBucket, Rate: 5}}}
	svc := gw.Clone()
	svc.Kind = KindService
	d := DiffRuleSets(gw, svc)
	if d.Empty() || d.Kind == nil || string(d.Kind.Old) != `"gateway"` || string(d.Kind.New) != `"service"` {
		t.Fatalf("gateway → service: %+v", d)
	}
	if d := DiffRuleSets(svc, gw); d.Kind == nil || string(d.Kind.New) != `"gateway"` {
		t.Fatalf("service → gateway: %+v", d)
	}
	if d := DiffRuleSets(nil, svc); d.Kind != nil {
		t.Fatalf("nothing → service: kind %+v", d.Kind)
	}
	named := gw.Clone()
	named.Kind = KindGateway
	if d := DiffRuleSets(gw, named); !d.Empty() {
		t.Fatalf("kind: gateway spelt out: %+v", d.Kind)
	}
}
