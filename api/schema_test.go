package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

type schemaNode = map[string]any

func loadSchema(tb testing.TB) schemaNode {
	tb.Helper()
	var s schemaNode
	if err := json.Unmarshal(Schema, &s); err != nil {
		tb.Fatalf("schema.json: %v", err)
	}
	if s["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		tb.Fatalf("$schema = %v", s["$schema"])
	}
	return s
}

// resolve follows a local "$ref" to its definition, recording its name.
func resolve(tb testing.TB, root, n schemaNode, seen map[string]bool) schemaNode {
	tb.Helper()
	ref, ok := n["$ref"].(string)
	if !ok {
		return n
	}
	name, ok := strings.CutPrefix(ref, "#/$defs/")
	if !ok {
		tb.Fatalf("non-local $ref %q", ref)
	}
	def, ok := root["$defs"].(schemaNode)[name].(schemaNode)
	if !ok {
		tb.Fatalf("$ref %q names no definition", ref)
	}
	if seen != nil {
		seen[name] = true
	}
	return resolve(tb, root, def, seen)
}

// enums maps each string type with a closed set of values to those values, as
// the package lists them.
func enums() map[reflect.Type][]string {
	m := map[reflect.Type][]string{}
	add := func(t reflect.Type, vals reflect.Value) {
		var s []string
		for i := range vals.Len() {
			s = append(s, vals.Index(i).String())
		}
		m[t] = s
	}
	add(reflect.TypeFor[Algorithm](), reflect.ValueOf(Algorithms))
	add(reflect.TypeFor[Scope](), reflect.ValueOf(Scopes))
	add(reflect.TypeFor[ClusterMode](), reflect.ValueOf(ClusterModes))
	add(reflect.TypeFor[StoreErrorPolicy](), reflect.ValueOf(StoreErrorPolicies))
	add(reflect.TypeFor[DegradeMode](), reflect.ValueOf(DegradeModes))
	add(reflect.TypeFor[UpstreamProtocol](), reflect.ValueOf(UpstreamProtocols))
	add(reflect.TypeFor[CookieDecoding](), reflect.ValueOf(CookieDecodings))
	add(reflect.TypeFor[Calendar](), reflect.ValueOf(Calendars))
	add(reflect.TypeFor[JWTAlgorithm](), reflect.ValueOf(JWTAlgorithms))
	add(reflect.TypeFor[RuleSetKind](), reflect.ValueOf(RuleSetKinds))
	return m
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

// TestSchemaMatchesTypes walks the Go types by reflection and the schema by
// its properties, together, and fails on any difference in either direction:
// a field missing from the schema, a schema property with no field, a type or
// enum that differs, an object open to additional properties, a definition
// no type uses.
func TestSchemaMatchesTypes(t *testing.T) {
	t.Parallel()
	root := loadSchema(t)
	seen := map[string]bool{}
	en := enums()
	var walk func(path string, typ reflect.Type, n schemaNode)
	walk = func(path string, typ reflect.Type, n schemaNode) {
		n = resolve(t, root, n, seen)
		wantType := func(want string) {
			if n["type"] != want {
				t.Errorf("%s: schema type %v, want %q (Go %s)", path, n["type"], want, typ)
			}
		}
		switch {
		case typ == reflect.TypeFor[Duration]():
			wantType("string")
			if _, ok := n["pattern"]; !ok {
				t.Errorf("%s: a duration without a pattern", path)
			}
			return
		case typ == reflect.TypeFor[RawJSON]():
			if _, ok := n["type"]; ok {
				t.Errorf("%s: raw JSON must accept any value, schema says type %v", path, n["type"])
			}
			return
		}
		if vals, ok := en[typ]; ok {
			wantType("string")
			var got []string
			for _, v := range n["enum"].([]any) {
				got = append(got, v.(string))
			}
			if !slices.Equal(got, vals) {
				t.Errorf("%s: enum %q, want %q", path, got, vals)
			}
			return
		}
		switch typ.Kind() {
		case reflect.Pointer:
			walk(path, typ.Elem(), n)
		case reflect.String:
			wantType("string")
			if _, ok := n["enum"]; ok {
				t.Errorf("%s: enum on a free string (add the type to enums())", path)
			}
		case reflect.Bool:
			wantType("boolean")
		case reflect.Int, reflect.Int64:
			wantType("integer")
		case reflect.Float64:
			wantType("number")
		case reflect.Slice:
			wantType("array")
			items, ok := n["items"].(schemaNode)
			if !ok {
				t.Errorf("%s: array without items", path)
				return
			}
			walk(path+"[]", typ.Elem(), items)
		case reflect.Map:
			wantType("object")
			ap, ok := n["additionalProperties"].(schemaNode)
			if !ok {
				t.Errorf("%s: map without an additionalProperties schema", path)
				return
			}
			walk(path+".*", typ.Elem(), ap)
		case reflect.Struct:
			wantType("object")
			if n["additionalProperties"] != false {
				t.Errorf("%s: additionalProperties is %v, want false", path, n["additionalProperties"])
			}
			props, _ := n["properties"].(schemaNode)
			fields := map[string]reflect.Type{}
			for i := range typ.NumField() {
				f := typ.Field(i)
				fields[jsonName(f)] = f.Type
			}
			for _, name := range slices.Sorted(maps.Keys(fields)) {
				p, ok := props[name].(schemaNode)
				if !ok {
					t.Errorf("%s.%s: field of %s missing from the schema", path, name, typ.Name())
					continue
				}
				walk(path+"."+name, fields[name], p)
			}
			for name := range props {
				if _, ok := fields[name]; !ok {
					t.Errorf("%s.%s: schema property with no field in %s", path, name, typ.Name())
				}
			}
			if req, ok := n["required"].([]any); ok {
				for _, r := range req {
					if _, ok := fields[r.(string)]; !ok {
						t.Errorf("%s: required %q is not a field", path, r)
					}
				}
			}
		default:
			t.Errorf("%s: Go kind %s has no schema mapping", path, typ.Kind())
		}
	}
	walk("", reflect.TypeFor[RuleSet](), root)
	// Definitions used only inside others (zeroDuration, in conditions)
	// count as used when a used definition refers to them.
	for changed := true; changed; {
		changed = false
		for name := range seen {
			for _, ref := range refsIn(root["$defs"].(schemaNode)[name]) {
				if !seen[ref] {
					seen[ref], changed = true, true
				}
			}
		}
	}
	for name := range root["$defs"].(schemaNode) {
		if !seen[name] {
			t.Errorf("$defs/%s is used by no type", name)
		}
	}
}

// refsIn returns the definitions that local $refs anywhere inside n name.
func refsIn(n any) []string {
	var out []string
	switch n := n.(type) {
	case schemaNode:
		for k, v := range n {
			if ref, ok := v.(string); ok && k == "$ref" {
				out = append(out, strings.TrimPrefix(ref, "#/$defs/"))
			}
			out = append(out, refsIn(v)...)
		}
	case []any:
		for _, v := range n {
			out = append(out, refsIn(v)...)
		}
	}
	return out
}

// docObject is one object in a document, with the schema definition that
// describes it.
type docObject struct {
	path string // its path in the document, as in FieldError
	def  string // the $defs name
	node *tree
}

// objects lists every object in t that the schema describes by a named
// definition.
func objects(tb testing.TB, root schemaNode, t *tree) []docObject {
	var out []docObject
	var walk func(path string, t *tree, n schemaNode)
	walk = func(path string, t *tree, n schemaNode) {
		def := ""
		if ref, ok := n["$ref"].(string); ok {
			def = strings.TrimPrefix(ref, "#/$defs/")
		}
		n = resolve(tb, root, n, nil)
		switch t.kind {
		case kObject:
			props, ok := n["properties"].(schemaNode)
			if !ok {
				return // a map, or free JSON
			}
			if def != "" {
				out = append(out, docObject{path, def, t})
			}
			for i, k := range t.keys {
				if p, ok := props[k].(schemaNode); ok {
					walk(joinKey(path, k), t.vals[i], p)
				}
			}
		case kArray:
			if items, ok := n["items"].(schemaNode); ok {
				for i, v := range t.vals {
					walk(fmt.Sprintf("%s[%d]", path, i), v, items)
				}
			}
		}
	}
	walk("", t, schemaNode{"$ref": "#/$defs/RuleSet"})
	return out
}

// without returns doc as JSON with the key of the object at path removed.
func without(tb testing.TB, doc []byte, objPath, key string) []byte {
	tb.Helper()
	t, err := parseTree(doc)
	if err != nil {
		tb.Fatal(err)
	}
	for _, o := range objects(tb, loadSchema(tb), t) {
		if o.path != objPath {
			continue
		}
		i := slices.Index(o.node.keys, key)
		o.node.keys = slices.Delete(o.node.keys, i, i+1)
		o.node.vals = slices.Delete(o.node.vals, i, i+1)
	}
	var buf bytes.Buffer
	writeJSON(&buf, t)
	return buf.Bytes()
}

// errorsAt reports whether Validate (after Decode) finds a problem at path or
// inside it.
func errorsAt(tb testing.TB, doc []byte, path string) bool {
	tb.Helper()
	rs := MustDecode(tb, doc)
	for _, e := range AsErrors(rs.Validate()) {
		if e.Path == path || strings.HasPrefix(e.Path, path+".") || strings.HasPrefix(e.Path, path+"[") {
			return true
		}
	}
	return false
}

// TestSchemaRequired checks that each definition's "required" list is what
// Validate requires: removing a required field from a document always
// produces an error at that field, and every other field can be removed
// from some valid document without an error there. Fields the schema
// requires only under a condition (dependentRequired, if/then) are exempt
// from the second half. Every property must occur in the test documents.
func TestSchemaRequired(t *testing.T) {
	t.Parallel()
	root := loadSchema(t)
	defs := root["$defs"].(schemaNode)
	docs := map[string][]byte{
		"minimal.yaml": MustReadFile(t, "minimal.yaml"),
		"full.yaml":    MustReadFile(t, "full.yaml"),
		// What issue 15 added, in a document of its own so that full.yaml's
		// pinned canonical form stays as it was.
		"adaptive.yaml": MustReadFile(t, "adaptive.yaml"),
		// What issue 28 added, likewise.
		"identity.yaml": MustReadFile(t, "identity.yaml"),
		// What issue 31 added: a kind: service document.
		"service.yaml": MustReadFile(t, "service.yaml"),
	}
	conditional := map[string]bool{} // "Def.field"
	for name, d := range defs {
		d := d.(schemaNode)
		if dr, ok := d["dependentRequired"].(schemaNode); ok {
			for _, fields := range dr {
				for _, f := range fields.([]any) {
					conditional[name+"."+f.(string)] = true
				}
			}
		}
		conds := []any{d}
		if all, ok := d["allOf"].([]any); ok {
			conds = append(conds, all...)
		}
		for _, c := range conds {
			for _, branch := range []string{"then", "else"} {
				if then, ok := c.(schemaNode)[branch].(schemaNode); ok {
					req, _ := then["required"].([]any)
					for _, f := range req {
						conditional[name+"."+f.(string)] = true
					}
					// A branch may require a field of the items of a
					// list property (RuleSet's kind decides whether
					// routes[] need upstream).
					props, _ := then["properties"].(schemaNode)
					for prop, ps := range props {
						psn, ok := ps.(schemaNode) // false: the property is refused
						if !ok {
							continue
						}
						items, _ := psn["items"].(schemaNode)
						ireq, _ := items["required"].([]any)
						for _, f := range ireq {
							ref := resolveItems(t, d, prop)
							conditional[ref+"."+f.(string)] = true
						}
					}
				}
			}
		}
	}
	removable := map[string]bool{} // "Def.field": removed somewhere without an error there
	present := map[string]bool{}
	for _, docName := range slices.Sorted(maps.Keys(docs)) {
		doc := docs[docName]
		tr, err := parseTree(doc)
		if err != nil {
			t.Fatal(err)
		}
		if errs := MustDecode(t, doc).Validate(); errs != nil {
			t.Fatalf("%s: %v", docName, errs)
		}
		for _, o := range objects(t, root, tr) {
			required := map[string]bool{}
			if req, ok := defs[o.def].(schemaNode)["required"].([]any); ok {
				for _, r := range req {
					required[r.(string)] = true
				}
			}
			for _, k := range o.node.keys {
				present[o.def+"."+k] = true
				fieldPath := joinKey(o.path, k)
				hasErr := errorsAt(t, without(t, doc, o.path, k), fieldPath)
				if required[k] && !hasErr {
					t.Errorf("%s: %s is required by the schema, but Validate accepts its absence", docName, fieldPath)
				}
				if !hasErr {
					removable[o.def+"."+k] = true
				}
			}
			if docName == "minimal.yaml" {
				for r := range required {
					if !slices.Contains(o.node.keys, r) {
						t.Errorf("minimal.yaml: %s lacks required %s", o.path, r)
					}
				}
			}
		}
	}
	var all []string
	for name, d := range defs {
		props, ok := d.(schemaNode)["properties"].(schemaNode)
		if !ok {
			continue
		}
		req, _ := d.(schemaNode)["required"].([]any)
		for p := range props {
			key := name + "." + p
			all = append(all, key)
			switch {
			case !present[key]:
				t.Errorf("%s occurs in no test document", key)
			case !slices.Contains(req, any(p)) && !conditional[key] && !removable[key]:
				t.Errorf("%s is optional in the schema, but Validate always requires it", key)
			}
		}
	}
	sort.Strings(all)
	if len(all) < 50 {
		t.Fatalf("only %d properties checked: %v", len(all), all)
	}
}

// resolveItems returns the name of the definition the items of list property
// prop of definition d refer to ("Route" for RuleSet's routes).
func resolveItems(tb testing.TB, d schemaNode, prop string) string {
	tb.Helper()
	p, _ := d["properties"].(schemaNode)[prop].(schemaNode)
	items, _ := p["items"].(schemaNode)
	ref, ok := items["$ref"].(string)
	if !ok {
		tb.Fatalf("property %s's items name no definition", prop)
	}
	return strings.TrimPrefix(ref, "#/$defs/")
}

// TestSchemaDefaultsMatchNormalize: every "default" api/schema.json gives a
// limit's field (the console's form shows it for an absent field) is what
// Normalize takes for it: a limit that sets the field to its default and
// one that leaves it out are the same rule set, and another value of the
// field's enum is not.
func TestSchemaDefaultsMatchNormalize(t *testing.T) {
	root := loadSchema(t)
	limit := root["$defs"].(schemaNode)["Limit"].(schemaNode)["properties"].(schemaNode)
	seen := 0
	for _, name := range slices.Sorted(maps.Keys(limit)) {
		prop := resolve(t, root, limit[name].(schemaNode), map[string]bool{})
		def, ok := prop["default"]
		if !ok {
			continue
		}
		seen++
		t.Run(name, func(t *testing.T) {
			enum, _ := prop["enum"].([]any)
			if !slices.Contains(enum, def) {
				t.Fatalf("default %v is not in the enum %v", def, enum)
			}
			canonical := func(field string) string {
				t.Helper()
				scope := "\n    scope: cluster"
				if name == "scope" {
					scope = ""
				}
				doc := fmt.Sprintf(`namespace: d
routes:
  - {id: r, match: {pathPrefix: /}, upstream: {targets: [{url: "http://127.0.0.1:1"}]}}
limits:
  - id: l
    routes: [r]
    algorithm: token_bucket
    rate: 10
    key: ["cookie:sid"]%s%s
`, scope, field)
				rs, err := Decode([]byte(doc))
				if err != nil {
					t.Fatalf("%s: %v", field, err)
				}
				if err := rs.Validate(); err != nil {
					t.Fatalf("%s: %v", field, err)
				}
				return string(rs.Canonical())
			}
			absent := canonical("")
			if got := canonical(fmt.Sprintf("\n    %s: %v", name, def)); got != absent {
				t.Errorf("%s: %v normalizes to\n%s\nbut leaving it out to\n%s", name, def, got, absent)
			}
			for _, other := range enum {
				if other != def && canonical(fmt.Sprintf("\n    %s: %v", name, other)) == absent {
					t.Errorf("%s: %v normalizes as leaving it out does; the default is %v", name, other, def)
				}
			}
		})
	}
	if seen == 0 {
		t.Fatal("no limit field has a default in schema.json")
	}
}
