package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
)

// DiffOp says what happened to a rule between two rule sets.
type DiffOp string

// The operations of a RuleDiff.
const (
	DiffAdded   DiffOp = "added"
	DiffRemoved DiffOp = "removed"
	DiffChanged DiffOp = "changed"
)

// Diff is the structural difference between two rule sets, rule by rule.
// Both sides are compared in their normalized form (defaults written out), so
// spelling a default out is not a change. The zero value is "no difference".
type Diff struct {
	// Namespace is set when the namespace itself differs.
	Namespace *FieldDiff `json:"namespace,omitempty"`
	// Kind is set when what runs the rule set differs (RuleSet.Kind; an
	// absent kind reads "gateway"); as for Namespace, not against an empty
	// (nil or namespace-less) side.
	Kind *FieldDiff `json:"kind,omitempty"`
	// Rules lists the added, removed and changed rules: kinds in document
	// order (routes, limits, breakers, degrades, identities), ids sorted
	// within a kind.
	Rules []RuleDiff `json:"rules"`
	// Reordered names the kinds whose common rules appear in another order.
	// Order matters for routes (the first match wins among equals).
	Reordered []string `json:"reordered,omitempty"`
	Added     int      `json:"added"`
	Removed   int      `json:"removed"`
	Changed   int      `json:"changed"`
}

// RuleDiff is one rule's difference. An added rule carries New, a removed one
// Old (each the whole normalized rule); a changed one lists its Fields.
type RuleDiff struct {
	Kind   string          `json:"kind"`
	ID     string          `json:"id"`
	Op     DiffOp          `json:"op"`
	Fields []FieldDiff     `json:"fields,omitempty"`
	Old    json.RawMessage `json:"old,omitempty"`
	New    json.RawMessage `json:"new,omitempty"`
}

// FieldDiff is one changed field, at a path relative to its rule such as
// "upstream.targets[0].weight". Old is absent for a field that was added and
// New for one that was removed. Lists of equal length are compared item by
// item; a list whose length changed is reported whole.
type FieldDiff struct {
	Path string          `json:"path"`
	Old  json.RawMessage `json:"old,omitempty"`
	New  json.RawMessage `json:"new,omitempty"`
}

// Empty reports whether the two rule sets had the same rules.
func (d *Diff) Empty() bool {
	return d.Namespace == nil && d.Kind == nil && len(d.Rules) == 0 && len(d.Reordered) == 0
}

// DiffRuleSets compares from and to, either of which may be nil (an empty
// rule set), and returns what changed from the first to the second. It does
// not validate; rules without an id are compared by their position. It is
// safe to call concurrently and changes neither argument.
func DiffRuleSets(from, to *RuleSet) *Diff {
	if from == nil {
		from = &RuleSet{}
	}
	if to == nil {
		to = &RuleSet{}
	}
	a, b := from.Normalize(), to.Normalize()
	d := &Diff{Rules: []RuleDiff{}}
	if a.Namespace != b.Namespace && from.Namespace != "" && to.Namespace != "" {
		d.Namespace = &FieldDiff{Path: "namespace", Old: rawJSON(a.Namespace), New: rawJSON(b.Namespace)}
	}
	if a.Kind != b.Kind && from.Namespace != "" && to.Namespace != "" { // nothing (nil) has no kind
		d.Kind = &FieldDiff{Path: "kind", Old: rawJSON(kindName(a.Kind)), New: rawJSON(kindName(b.Kind))}
	}
	diffKind(d, "routes", rules(a.Routes, func(r Route) string { return r.ID }), rules(b.Routes, func(r Route) string { return r.ID }))
	diffKind(d, "limits", rules(a.Limits, func(r Limit) string { return r.ID }), rules(b.Limits, func(r Limit) string { return r.ID }))
	diffKind(d, "breakers", rules(a.Breakers, func(r Breaker) string { return r.ID }), rules(b.Breakers, func(r Breaker) string { return r.ID }))
	diffKind(d, "degrades", rules(a.Degrades, func(r Degrade) string { return r.ID }), rules(b.Degrades, func(r Degrade) string { return r.ID }))
	diffKind(d, "identities", rules(a.Identities, func(r Identity) string { return r.ID }), rules(b.Identities, func(r Identity) string { return r.ID }))
	for _, r := range d.Rules {
		switch r.Op {
		case DiffAdded:
			d.Added++
		case DiffRemoved:
			d.Removed++
		case DiffChanged:
			d.Changed++
		}
	}
	return d
}

type keyedRule struct {
	id   string
	json []byte
}

func rules[T any](list []T, id func(T) string) []keyedRule {
	out := make([]keyedRule, len(list))
	for i, r := range list {
		b, err := json.Marshal(r)
		if err != nil {
			panic("api: rule does not marshal: " + err.Error()) // cannot happen: plain data
		}
		k := id(r)
		if k == "" {
			k = "#" + strconv.Itoa(i)
		}
		out[i] = keyedRule{id: k, json: b}
	}
	return out
}

func diffKind(d *Diff, kind string, from, to []keyedRule) {
	old := make(map[string][]byte, len(from))
	for _, r := range from {
		if _, dup := old[r.id]; !dup {
			old[r.id] = r.json
		}
	}
	cur := make(map[string][]byte, len(to))
	for _, r := range to {
		if _, dup := cur[r.id]; !dup {
			cur[r.id] = r.json
		}
	}
	var out []RuleDiff
	for id, a := range old {
		b, ok := cur[id]
		switch {
		case !ok:
			out = append(out, RuleDiff{Kind: kind, ID: id, Op: DiffRemoved, Old: a})
		case !bytes.Equal(a, b):
			fields := diffJSON(a, b)
			if len(fields) > 0 {
				out = append(out, RuleDiff{Kind: kind, ID: id, Op: DiffChanged, Fields: fields})
			}
		}
	}
	for id, b := range cur {
		if _, ok := old[id]; !ok {
			out = append(out, RuleDiff{Kind: kind, ID: id, Op: DiffAdded, New: b})
		}
	}
	slices.SortFunc(out, func(x, y RuleDiff) int {
		if c := compareStrings(x.ID, y.ID); c != 0 {
			return c
		}
		return compareStrings(string(x.Op), string(y.Op))
	})
	d.Rules = append(d.Rules, out...)

	// Order of the rules present on both sides.
	var seqA, seqB []string
	for _, r := range from {
		if _, ok := cur[r.id]; ok {
			seqA = append(seqA, r.id)
		}
	}
	for _, r := range to {
		if _, ok := old[r.id]; ok {
			seqB = append(seqB, r.id)
		}
	}
	if !slices.Equal(seqA, seqB) {
		d.Reordered = append(d.Reordered, kind)
	}
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// diffJSON compares two JSON documents of one rule field by field.
func diffJSON(a, b []byte) []FieldDiff {
	var va, vb any
	if err := decodeNumbers(a, &va); err != nil {
		panic("api: rule JSON does not decode: " + err.Error())
	}
	if err := decodeNumbers(b, &vb); err != nil {
		panic("api: rule JSON does not decode: " + err.Error())
	}
	var out []FieldDiff
	diffValue(&out, "", va, vb)
	return out
}

func decodeNumbers(b []byte, v *any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

func diffValue(out *[]FieldDiff, path string, a, b any) {
	if ma, ok := a.(map[string]any); ok {
		if mb, ok := b.(map[string]any); ok {
			keys := make([]string, 0, len(ma)+len(mb))
			for k := range ma {
				keys = append(keys, k)
			}
			for k := range mb {
				if _, ok := ma[k]; !ok {
					keys = append(keys, k)
				}
			}
			slices.Sort(keys)
			for _, k := range keys {
				va, inA := ma[k]
				vb, inB := mb[k]
				p := joinKey(path, k)
				switch {
				case !inA:
					*out = append(*out, FieldDiff{Path: p, New: rawJSON(vb)})
				case !inB:
					*out = append(*out, FieldDiff{Path: p, Old: rawJSON(va)})
				default:
					diffValue(out, p, va, vb)
				}
			}
			return
		}
	}
	if la, ok := a.([]any); ok {
		if lb, ok := b.([]any); ok && len(la) == len(lb) {
			for i := range la {
				diffValue(out, fmt.Sprintf("%s[%d]", path, i), la[i], lb[i])
			}
			return
		}
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, FieldDiff{Path: path, Old: rawJSON(a), New: rawJSON(b)})
	}
}

// kindName is a normalized kind as a document names it.
func kindName(k RuleSetKind) RuleSetKind {
	if k == "" {
		return KindGateway
	}
	return k
}

func rawJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("api: value does not marshal: " + err.Error())
	}
	return b
}
