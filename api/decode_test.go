package api

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// minimal is the smallest valid document, in YAML and JSON.
const (
	minimalYAML = "namespace: shop\nroutes:\n  - id: a\n    upstream: {targets: [{url: \"http://127.0.0.1:1\"}]}\n"
	minimalJSON = `{"namespace":"shop","routes":[{"id":"a","upstream":{"targets":[{"url":"http://127.0.0.1:1"}]}}]}`
)

func TestDecodeMinimal(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{minimalYAML, minimalJSON, "\ufeff" + minimalYAML, "\ufeff" + minimalJSON, "\n\n  " + minimalJSON} {
		rs := MustDecode(t, []byte(doc))
		if err := rs.Validate(); err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if rs.Namespace != "shop" || rs.Routes[0].Upstream.Targets[0].URL != "http://127.0.0.1:1" {
			t.Fatalf("%q decoded as %+v", doc, rs)
		}
	}
}

// TestDecodeStrict covers the strict rules: unknown fields, duplicate keys and
// type errors, each named by path (and line where the syntax gives one).
func TestDecodeStrict(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc string
		doc  string
		path string
		msg  string
		line int // 0: not checked
	}{
		{"yaml unknown top-level field", "namespace: x\nroute: []\n", "route", `unknown field (did you mean "routes"?)`, 2},
		{"json unknown top-level field", `{"namespace":"x","route":[]}`, "route", "unknown field", 1},
		{"yaml unknown nested field", "namespace: x\nroutes:\n  - id: a\n    match: {pathprefix: /a}\n", "routes[0].match.pathprefix", `did you mean "pathPrefix"?`, 4},
		{"json unknown nested field", "{\"namespace\":\"x\",\n\"limits\":[{\"id\":\"a\",\n\"burts\":3}]}", "limits[0].burts", `did you mean "burst"?`, 3},
		{"yaml unknown field deep", "namespace: x\ndegrades:\n  - triggers: {level1: {qps: 1}}\n", "degrades[0].triggers.level1.qps", "unknown field", 3},
		{"json field names are case-sensitive", `{"Namespace":"x"}`, "Namespace", `did you mean "namespace"?`, 0},
		{"yaml duplicate key", "namespace: x\nnamespace: y\n", "namespace", "duplicate key", 2},
		{"json duplicate key", `{"namespace":"x","namespace":"y"}`, "namespace", "duplicate key", 1},
		{"yaml duplicate nested key", "namespace: x\nroutes:\n  - id: a\n    id: b\n", "routes[0].id", "duplicate key", 4},
		{"json duplicate nested key", `{"namespace":"x","routes":[{"id":"a","id":"b"}]}`, "routes[0].id", "duplicate key", 0},
		{"json duplicate map key", `{"namespace":"x","routes":[{"id":"a","match":{"headers":{"A":"1","A":"2"}}}]}`, "routes[0].match.headers.A", "duplicate key", 0},
		{"yaml string for int", "namespace: x\nlimits:\n  - rate: lots\n", "limits[0].rate", `expected a whole number, got string "lots"`, 3},
		{"json string for int", `{"namespace":"x","limits":[{"rate":"100"}]}`, "limits[0].rate", "expected a whole number", 0},
		{"fraction for int", `{"namespace":"x","limits":[{"rate":1.5}]}`, "limits[0].rate", "expected a whole number, got 1.5", 0},
		{"whole float for int is fine", `{"namespace":"x","limits":[{"rate":2.0}],"nope":1}`, "nope", "unknown field", 0},
		{"int for string", "namespace: 5\n", "namespace", "expected a string, got number 5", 1},
		{"bool for string", `{"namespace":true}`, "namespace", "expected a string, got boolean true", 0},
		{"string for bool", "namespace: x\nlimits: [{shadow: \"yes\"}]\n", "limits[0].shadow", "expected true or false", 2},
		{"yaml yes is not a bool", "namespace: x\nlimits: [{shadow: yes}]\n", "limits[0].shadow", "expected true or false", 2},
		{"string for float", "namespace: x\nbreakers: [{errorRatio: half}]\n", "breakers[0].errorRatio", "expected a number", 2},
		{"number for duration", "namespace: x\nlimits: [{period: 1}]\n", "limits[0].period", "expected a duration string", 2},
		{"bad duration", "namespace: x\nlimits: [{period: 1 second}]\n", "limits[0].period", "invalid duration", 2},
		{"negative duration", "namespace: x\nlimits: [{period: -1s}]\n", "limits[0].period", "must not be negative", 2},
		{"object for list", "namespace: x\nroutes: {id: a}\n", "routes", "expected a list, got object", 2},
		{"list for object", `{"namespace":"x","routes":[{"match":[]}]}`, "routes[0].match", "expected an object, got list", 0},
		{"scalar for object", "namespace: x\nroutes: [5]\n", "routes[0]", "expected an object, got number 5", 2},
		{"number for map value", "namespace: x\nroutes: [{match: {headers: {X-A: 1}}}]\n", "routes[0].match.headers.X-A", "expected a string", 2},
		{"top-level list", `[1,2]`, "", "expected an object, got list", 0},
		{"top-level scalar", "hello\n", "", `expected an object, got string "hello"`, 0},
		{"empty", "", "", "document is empty", 0},
		{"only comments", "# nothing here\n", "", "document is empty", 0},
		{"yaml null document", "~\n", "", "document is empty", 0},
		{"json null document", " null", "", "document is empty", 0},
		{"json syntax error", "{\"namespace\":\n\"x\",}", "", "invalid JSON", 2},
		{"json trailing data", `{"namespace":"x"} {}`, "", "unexpected data after the JSON document", 0},
		{"json truncated", `{"namespace":"x"`, "", "unexpected end of JSON document", 0},
		{"yaml syntax error", "namespace: x\nroutes: [\n", "", "invalid YAML", 0},
		{"yaml tab indentation", "namespace: x\nroutes:\n\t- id: a\n", "", "invalid YAML", 3},
		{"yaml non-string key", "namespace: x\n? [a, b]\n: c\n", "", "object keys must be plain strings", 2},
		{"yaml leading-zero integer", "namespace: x\nlimits: [{rate: 0777}]\n", "limits[0].rate", "leading zero", 2},
		{"yaml invalid explicit int", "namespace: x\nlimits: [{rate: !!int abc}]\n", "limits[0].rate", "invalid integer", 2},
		{"yaml invalid explicit float", "namespace: x\nbreakers: [{errorRatio: !!float abc}]\n", "breakers[0].errorRatio", "invalid number", 2},
		{"yaml invalid explicit bool", "namespace: x\nlimits: [{shadow: !!bool maybe}]\n", "limits[0].shadow", "invalid boolean", 2},
		{"negative zero duration", `{"namespace":"x","limits":[{"period":"-0"}]}`, "limits[0].period", "must not be negative", 0},
		{"json null field", `{"namespace":"x","routes":[{"id":"a","match":null}]}`, "routes[0].match", "null is not a value here", 0},
		{"json null list", `{"namespace":"x","routes":null}`, "routes", "null is not a value here", 0},
		{"json null list item", `{"namespace":"x","routes":[{"upstream":{"targets":[null]}}]}`, "routes[0].upstream.targets[0]", "null is not a value here", 0},
		{"json null map value", `{"namespace":"x","routes":[{"match":{"headers":{"X-A":null}}}]}`, "routes[0].match.headers.X-A", "null is not a value here", 0},
		{"yaml empty value is null", "namespace: x\nlimits:\n  - id: a\n    routes:\n", "limits[0].routes", "null is not a value here", 4},
		{"yaml tilde", "namespace: x\nlimits: [{cost: ~}]\n", "limits[0].cost", "null is not a value here", 2},
		{"empty optional string", `{"namespace":"x","routes":[{"match":{"pathPrefix":""}}]}`, "routes[0].match.pathPrefix", "is empty; leave the field out", 0},
		{"empty optional enum", "namespace: x\nlimits: [{scope: \"\"}]\n", "limits[0].scope", "is empty; leave the field out", 2},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			rs, err := Decode([]byte(tt.doc))
			if err == nil {
				t.Fatalf("decoded %+v; want an error", rs)
			}
			if rs != nil {
				t.Fatalf("a failed Decode returned a rule set")
			}
			es := AsErrors(err)
			var found *FieldError
			for i := range es {
				if es[i].Path == tt.path && strings.Contains(es[i].Message, tt.msg) {
					found = &es[i]
					break
				}
			}
			if found == nil {
				t.Fatalf("want an error at %q containing %q; got:\n%v", tt.path, tt.msg, err)
			}
			if tt.line != 0 && found.Line != tt.line {
				t.Fatalf("line = %d, want %d (%v)", found.Line, tt.line, *found)
			}
		})
	}
}

// TestDecodeAllErrors checks that Decode reports every field problem, not
// only the first.
func TestDecodeAllErrors(t *testing.T) {
	t.Parallel()
	_, err := Decode([]byte("namespace: x\nroutes:\n  - id: a\n    matsh: {}\n    upstream: {targets: [{url: 3, wieght: x}]}\n"))
	wantErrors(t, err, "", "routes[0].matsh", "routes[0].upstream.targets[0].url", "routes[0].upstream.targets[0].wieght")
	want := "routes[0].matsh: unknown field (did you mean \"match\"?) (line 4)"
	if AsErrors(err)[0].Error() != want {
		t.Fatalf("got %q, want %q", AsErrors(err)[0].Error(), want)
	}
}

// TestDecodeSameInBothSyntaxes checks that the JSON and YAML spellings of a
// value decode alike, including YAML's other number spellings.
func TestDecodeNumbers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc string
		doc  string
		rate int64
		err  string
	}{
		{"plain", `{"namespace":"x","limits":[{"rate":100}]}`, 100, ""},
		{"exponent", `{"namespace":"x","limits":[{"rate":1e2}]}`, 100, ""},
		{"yaml underscore", "namespace: x\nlimits: [{rate: 1_000}]\n", 1000, ""},
		{"yaml hex", "namespace: x\nlimits: [{rate: 0x10}]\n", 16, ""},
		{"yaml octal", "namespace: x\nlimits: [{rate: 0o10}]\n", 8, ""},
		{"yaml plus sign", "namespace: x\nlimits: [{rate: +7}]\n", 7, ""},
		{"huge json integer", `{"namespace":"x","limits":[{"rate":123456789012345678901234567890}]}`, 0, "out of range"},
		{"huge yaml integer", "namespace: x\nlimits: [{rate: 123456789012345678901234567890}]\n", 0, "out of range"},
		{"int64 overflow yaml", "namespace: x\nlimits: [{rate: 9223372036854775808}]\n", 0, "out of range"},
		{"int overflow in int field", `{"namespace":"x","routes":[{"upstream":{"targets":[{"weight":9223372036854775807}]}}]}`, 0, ""},
		{"json number beyond float64", `{"namespace":"x","limits":[{"rate":1e400}]}`, 0, "out of range"},
		{"yaml .inf", "namespace: x\nbreakers: [{errorRatio: .inf}]\n", 0, "invalid number"},
		{"yaml -.Inf", "namespace: x\nbreakers: [{errorRatio: -.Inf}]\n", 0, "invalid number"},
		{"yaml .nan", "namespace: x\nbreakers: [{errorRatio: .nan}]\n", 0, "invalid number"},
		{"json NaN", `{"namespace":"x","breakers":[{"errorRatio":NaN}]}`, 0, "invalid JSON"},
		{"json Infinity", `{"namespace":"x","breakers":[{"errorRatio":Infinity}]}`, 0, "invalid JSON"},
		{"nan in raw JSON", "namespace: x\ndegrades: [{fallback: {json: {a: .nan}}}]\n", 0, "invalid number"},
		{"1e400 in raw JSON", `{"namespace":"x","degrades":[{"fallback":{"json":{"a":1e400}}}]}`, 0, "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			rs, err := Decode([]byte(tt.doc))
			switch {
			case tt.err != "":
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one containing %q", err, tt.err)
				}
			case err != nil:
				t.Fatal(err)
			case len(rs.Limits) > 0 && rs.Limits[0].Rate != tt.rate:
				t.Fatalf("rate = %d, want %d", rs.Limits[0].Rate, tt.rate)
			}
		})
	}
}

// TestDecodeRawJSON checks that a fallback JSON body reads the same from YAML
// and JSON, with object keys sorted and numbers spelled one way.
func TestDecodeRawJSON(t *testing.T) {
	t.Parallel()
	y := MustDecode(t, []byte("namespace: x\ndegrades: [{fallback: {json: {message: busy, code: 5031, ratio: .5, big: 1e3, nested: [true, null, {b: 1, a: 2}]}}}]\n"))
	j := MustDecode(t, []byte(`{"namespace":"x","degrades":[{"fallback":{"json":{"nested":[true,null,{"a":2,"b":1}],"big":1000.0,"ratio":0.50,"code":5031,"message":"busy"}}}]}`))
	want := `{"big":1000,"code":5031,"message":"busy","nested":[true,null,{"a":2,"b":1}],"ratio":0.5}`
	for _, rs := range []*RuleSet{y, j} {
		if got := string(rs.Degrades[0].Fallback.JSON); got != want {
			t.Errorf("json = %s, want %s", got, want)
		}
	}
}

func TestUnmarshalLeavesTargetOnError(t *testing.T) {
	t.Parallel()
	rs := RuleSet{Namespace: "keep"}
	if err := Unmarshal([]byte("namespace: other\nbogus: 1\n"), &rs); err == nil {
		t.Fatal("no error")
	}
	if rs.Namespace != "keep" {
		t.Fatalf("a failed Unmarshal wrote %q", rs.Namespace)
	}
	if err := Unmarshal([]byte("namespace: x"), rs); err == nil {
		t.Fatal("Unmarshal into a non-pointer succeeded")
	}
}

func TestUnmarshalJSON(t *testing.T) {
	t.Parallel()
	var o Override
	if err := UnmarshalJSON([]byte(`{"drain":true,"degradeLevels":{"coupon":2}}`), &o); err != nil || !o.Drain || o.DegradeLevels["coupon"] != 2 {
		t.Fatalf("got %+v, %v", o, err)
	}
	if err := UnmarshalJSON([]byte("drain: true\n"), &o); err == nil {
		t.Fatal("UnmarshalJSON accepted YAML")
	}
	if err := UnmarshalJSON([]byte(`{"drain":true,"drian":false}`), &o); err == nil || AsErrors(err)[0].Path != "drian" {
		t.Fatalf("unknown field: %v", err)
	}
}

// TestDecodeHostile feeds documents meant to crash, hang or exhaust the
// decoder. Each must end in a clear error, quickly, and no rule set.
func TestDecodeHostile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc string
		doc  []byte
		msg  string
	}{
		{"10 MB document", append([]byte("namespace: x\n# "), bytes.Repeat([]byte("a"), 10<<20)...), "the limit is"},
		{"deeply nested JSON", []byte(`{"namespace":"x","degrades":[{"fallback":{"json":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}}]}`), "nested deeper than"},
		{"deeply nested JSON objects", []byte(strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000)), "nested deeper than"},
		{"deeply nested YAML flow", []byte("namespace: x\ndegrades: [{fallback: {json: " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "}}]\n"), "nested deeper than"},
		{"deeply nested YAML blocks", []byte(nestedYAML(200)), "nested deeper than"},
		{"YAML nesting past the parser's limit", []byte("a: " + strings.Repeat("[", 20000)), "invalid YAML"},
		{"billion laughs", []byte(billionLaughs), "alias bomb"},
		{"merge key", []byte("base: &b {id: a}\nnamespace: x\nroutes:\n  - <<: *b\n    upstream: {targets: [{url: \"http://x\"}]}\n"), "merge keys"},
		{"unknown alias", []byte("namespace: *nope\n"), "invalid YAML"},
		{"two YAML documents", []byte("namespace: a\n---\nnamespace: b\n"), "exactly one YAML document"},
		{"two JSON documents", []byte(`{"namespace":"a"}{"namespace":"b"}`), "unexpected data"},
		{"invalid UTF-8 in YAML", []byte("namespace: \xff\xfe\n"), "not valid UTF-8"},
		{"invalid UTF-8 in JSON", []byte("{\"namespace\":\"\xc3\x28\"}"), "not valid UTF-8"},
		{"UTF-16 document", []byte("\xff\xfen\x00a\x00m\x00"), "not valid UTF-8"},
		{"NUL bytes", []byte("namespace: x\x00\n"), "invalid YAML"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			rs, err := Decode(tt.doc)
			if err == nil || rs != nil {
				t.Fatalf("Decode = %v, %v; want an error", rs, err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %q does not contain %q", err, tt.msg)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("took %v", d)
			}
		})
	}
}

// billionLaughs expands to 10⁹ values if aliases are followed blindly.
const billionLaughs = `namespace: x
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
`

func nestedYAML(depth int) string {
	var b strings.Builder
	for i := range depth {
		fmt.Fprintf(&b, "%sk:\n", strings.Repeat(" ", i))
	}
	fmt.Fprintf(&b, "%sv\n", strings.Repeat(" ", depth))
	return b.String()
}

// TestDecodeAliasBombBounded checks that the alias bomb is refused fast and
// without allocating much, wherever in the document it sits.
func TestDecodeAliasBombBounded(t *testing.T) {
	// Not parallel: it measures this goroutine's allocations.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	doc := billionLaughs + "routes: *i\n"
	for range 3 {
		if _, err := Decode([]byte(doc)); err == nil || !strings.Contains(err.Error(), "alias bomb") {
			t.Fatalf("err = %v", err)
		}
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	if elapsed > 3*time.Second {
		t.Fatalf("three alias bombs took %v", elapsed)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 300<<20 {
		t.Fatalf("three alias bombs allocated %d MB", alloc>>20)
	}
}

// TestDecodeAliasesAllowed checks that modest alias use still works.
func TestDecodeAliasesAllowed(t *testing.T) {
	t.Parallel()
	rs := MustDecode(t, []byte(`namespace: x
routes:
  - id: a
    upstream: &up {targets: [{url: "http://127.0.0.1:1"}], timeout: 2s}
  - id: b
    upstream: *up
`))
	if err := rs.Validate(); err != nil {
		t.Fatal(err)
	}
	if rs.Routes[1].Upstream.Timeout.D() != 2*time.Second {
		t.Fatalf("alias not followed: %+v", rs.Routes[1])
	}
}

// TestDecodeNullAndEmpty checks what null and empty strings mean: refused in
// rule documents (except a JSON fallback body, where null is absent), and
// absent in API bodies read with UnmarshalJSON.
func TestDecodeNullAndEmpty(t *testing.T) {
	t.Parallel()
	rs := MustDecode(t, []byte(`{"namespace":"x","degrades":[{"id":"d","fallback":{"json":null}}]}`))
	if rs.Degrades[0].Fallback.JSON != nil {
		t.Errorf("fallback json null = %q, want absent", rs.Degrades[0].Fallback.JSON)
	}
	rs = MustDecode(t, []byte(`{"namespace":"x","routes":[{"id":"a","match":{"headers":{"X-A":""}}}]}`))
	if v, ok := rs.Routes[0].Match.Headers["X-A"]; !ok || v != "" {
		t.Errorf("an empty header value (a map value, not an optional field) = %q, %v", v, ok)
	}
	var o Override
	if err := UnmarshalJSON([]byte(`{"drain":null,"degradeLevels":null}`), &o); err != nil || o.Drain || o.DegradeLevels != nil {
		t.Errorf("UnmarshalJSON of nulls = %+v, %v; want zero, nil", o, err)
	}
	var l Limit
	if err := UnmarshalJSON([]byte(`{"id":"a","scope":""}`), &l); err != nil || l.Scope != "" {
		t.Errorf("UnmarshalJSON of an empty optional string = %+v, %v; want it read as absent", l, err)
	}
	if err := Unmarshal([]byte(`{"id":"a","scope":""}`), &l); err == nil {
		t.Errorf("Unmarshal (a rule) accepted an empty optional string")
	}
}
