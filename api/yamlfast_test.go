package api

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sameTreeAndLines reports whether a and b hold the same values, keys in the
// same order, on the same lines; it describes the first difference.
func sameTreeAndLines(a, b *tree) (bool, string) {
	switch {
	case a.kind != b.kind || a.str != b.str || a.b != b.b:
		return false, fmt.Sprintf("%s %q %v (line %d) vs %s %q %v (line %d)", a.kind, a.str, a.b, a.line, b.kind, b.str, b.b, b.line)
	case a.line != b.line:
		return false, fmt.Sprintf("%s on line %d vs %d", a.kind, a.line, b.line)
	case !slices.Equal(a.keys, b.keys) || len(a.vals) != len(b.vals):
		return false, fmt.Sprintf("keys %q vs %q, %d vs %d values (line %d)", a.keys, b.keys, len(a.vals), len(b.vals), a.line)
	}
	for i := range a.vals {
		if ok, why := sameTreeAndLines(a.vals[i], b.vals[i]); !ok {
			return false, why
		}
	}
	return true, ""
}

// checkFastYAML fails when fastYAML accepts a document that yaml.v3 (with
// yamlConv) refuses, or reads it differently, lines included. fastYAML
// refusing a document is never wrong: yaml.v3 then reads it.
func checkFastYAML(t *testing.T, data []byte) (accepted bool) {
	t.Helper()
	fast, ok := fastYAML(data)
	if !ok {
		return false
	}
	slow, err := parseYAMLNodes(data)
	if err != nil {
		t.Fatalf("fast YAML parser accepted %q; yaml.v3: %v", data, err)
	}
	if same, why := sameTreeAndLines(fast, slow); !same {
		t.Fatalf("fast YAML parser and yaml.v3 read %q differently: %s", data, why)
	}
	return true
}

// fastYAMLSeeds are documents inside and just outside the subset fastYAML
// reads.
var fastYAMLSeeds = []string{
	minimalYAML,
	"a: 1\n", "  a: 1\n  b: x\n", "a: 1\nb:\n  c: 2\n", "a:\n- 1\n- 2\nb: 3\n", "a:\n  - 1\n  - 2\nb: 3\n",
	"- a\n- b\n", "-\n  a: 1\n-   b: 2\n    c: 3\n", "- a:\n  - x\n  b: 1\n", "- - a\n", "-\n  - a\n",
	"# c\na: 1 # c\n", "# c\na: 1\n  # c\nb: 2\n\n   \n", "a: 1   \nb:   x  \n",
	"a: 'it''s'\nb: \"q\"\nc: '#x: y'\nd: \"a\\nb\"\ne: ''\nf: \"\"\n", "'k': 1\n\"k2\": 2\n", "'k':1\n", "\"k\" : 1\n",
	"a: b: c\n", "a: - x\n", "a: b\n  c\n", "a:\n  b\n", "- a\n  b\n", "a: b:\n", "a:b: c\n", "a : 1\n", "a b: 1\n",
	"a:\n", "a: ~\n", "a: null\n", "a: Null\n", "a: nULL\n", "a: NULL\n", "a:\nb: 1\n",
	"a: true\nb: False\nc: TRUE\nd: yes\ne: no\nf: on\ng: y\nh: tRUE\n",
	"n: [0, -0, 1.50, 1., .5, +7, 0777, 0o7, 0x1f, 0b11, 1_000, 1e3, 2024-01-01, 9223372036854775807, 9223372036854775808]\n",
	"a: 0\nb: -0\nc: 1.50\nd: 1.\ne: .5\nf: +7\ng: 0777\nh: 0o7\ni: 0x1f\nj: 0b11\nk: 1_000\nl: 1e3\nm: 2024-01-01\n",
	"a: 9223372036854775807\nb: 9223372036854775808\nc: -9223372036854775808\nd: 00\ne: 0.0\nf: -1.25\ng: 10.0.0.1\n",
	"a: 5s\nb: -5s\nc: 1.5s\nd: 100ms\ne: 1h30m\nf: 5 s\ng: -abc\nh: 12abc\ni: 0xzz\nj: 1" + strings.Repeat("0", 400) + ".0\n",
	"a: http://x:8080/y\nb: ^/items/[0-9]+$\nc: /a#b\nd: x:y\ne: a - b\nf: a, b [c] {d}\ng: it's\nh: say \"hi\"\n",
	"a: *x\nb: &y 1\nc: !!str 1\nd: |\n  x\ne: >\n  y\nf: [1]\ng: {a: 1}\nh: '*.x'\ni: @x\nj: `x`\nk: %x\nl: <<\n",
	"<<: {a: 1}\n", "? a\n: 1\n", "---\na: 1\n", "a: 1\n---\nb: 2\n", "a: 1\n...\n", "%YAML 1.2\n---\na: 1\n",
	"a: 1\na: 2\n", "a:\n  b: 1\n c: 2\n", "a:\n    b: 1\n  c: 2\n", "  a: 1\nb: 2\n", "a: 1\n  - b\n", "a:\n- 1\n  - 2\n",
	"a:\n  - 1\n  b: 2\n", "- 1\n  - 2\n", "- 1\n-2\n", "-1: a\n", "a:\r\n  b: 1\r\n", "a:\tb\n", "a: é\n", "a: \x01\n",
	"a: 1\n\x00", "", "\n\n", "# only a comment\n", "a", "'a'", "1", "- ~\n", "-\n", "- \n",
	"a: 'x\n  y'\n", "a: \"x\n  y\"\n", "a: 'x' y\n", "a: 'x' # c\n", "a: 'x'\n", "a: #x\n", "a: x#y\n",
	"k" + strings.Repeat("x", 1100) + ": 1\n",
	"a: 1\nb: 2\nc: 3\nd: 4\ne: 5\nf: 6\ng: 7\nh: 8\ni: 9\nj: 10\nk: 11\nl: 12\nm: 13\nn: 14\no: 15\np: 16\nq: 17\na: 18\n",
	"a: 1\nb: 2\nc: 3\nd: 4\ne: 5\nf: 6\ng: 7\nh: 8\ni: 9\nj: 10\nk: 11\nl: 12\nm: 13\nn: 14\no: 15\np: 16\nq: 17\nr: 18\n",
	nestedYAML(20), nestedYAML(40), blockNested(31), blockNested(32), blockNested(33), blockNested(40),
	strings.Repeat("- ", 40) + "x\n",
	"a: [GET, POST]\nb: [{url: \"http://x:1\", weight: 1}]\nc: {a: 1, 'b': [x y, -1, 1.5, true], \"c\": {}}\nd: []\ne: [ ]\n",
	"- [a, b]\n- {a: 1}\n- [[[1]]]\n", "a: [a, b] # c\n", "a: [a,\n  b]\n", "a: [a, b,]\n", "a: [a,, b]\n", "a: [,]\n",
	"a: {a: 1, a: 2}\n", "a: {a}\n", "a: {a: }\n", "a: {a:1}\n", "a: {\"a\":1}\n", "a: [a: 1]\n", "a: [- a]\n", "a: [-]\n",
	"a: [a #b]\n", "a: [a#b]\n", "a: ['a'b]\n", "a: ['a' , \"b\"]\n", "a: [it's]\n", "a: [x:y]\n", "a: [http://x]\n",
	"a: [~, null, .5, 0x1, 1_0, 5s]\n", "a: [a] [b]\n", "a: [a]]\n", "a: {b: [1, {c: d}]}\n", "a: [*x]\n", "a: [&x 1]\n",
	"a: 1 # c\nb: 'x'   # c\nc: [a] # c\nd: # c\n  e: 1 #c\nf: x#y # z\ng: x #y: z\n- # c\n", "a: # c\n- 1 # c\n- # c\n  b: 1\n",
	"a: 'x'#c\n", "a: [a]#c\n", "a: x:  # c\n", "a: x # c: d\n", "a:  #c\n", "- #c\n", "a: \"b\" #\n", "#\na: 1 #\n",
	"a: x ÷ y — z\nb: 'é'\nc: \"\u00a0\"\nd: [ü, ß]\n", "a: é\n", "é: 1\n", "a: x\u0085y\n", "a: x\u2028y\n", "a: x\u2029y\n",
	"a: x\ufeffy\n", "a: x\U0001F600\n", "a: x\u0080\n", "a: x\u009f\n", "a: x\ue000\n", "a: x\ufffd\n", "a: x\ufffe\n", "a: x\ud7ff\n",
	"a: -.Inf\nb: -.inf\nc: +.INF\nd: .NaN\ne: -.nan\nf: .inf\n", "a: [-.Inf, +.inf, .nan, -.x, -x, -_]\n", "a: -x\n", "a: -_\n",
	"a: [!t 1]\n", "a: [? a]\n", "a: [[a, b], c]\n", "a: {x: [}\n", "a: [a b  , c]\n",
}

// blockNested is a block mapping nested n levels deep.
func blockNested(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(strings.Repeat("  ", i) + "a:\n")
	}
	b.WriteString(strings.Repeat("  ", n) + "b: 1\n")
	return b.String()
}

// TestFastYAMLMatchesYAMLv3 runs both YAML readers over the seeds, every
// YAML file under testdata and the demo rules.
func TestFastYAMLMatchesYAMLv3(t *testing.T) {
	t.Parallel()
	docs := slices.Clone(fastYAMLSeeds)
	files, _ := filepath.Glob("testdata/*.yaml")
	corpus, _ := filepath.Glob("testdata/corpus/*/*.yaml")
	for _, f := range append(append(files, corpus...), "../deploy/rules/demo.yaml") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	accepted := 0
	for _, d := range docs {
		if checkFastYAML(t, []byte(d)) {
			accepted++
		}
	}
	// The seeds are meant to exercise both sides.
	if accepted < 15 || accepted > len(docs)-15 {
		t.Fatalf("fast YAML parser accepted %d of %d documents", accepted, len(docs))
	}
}

// TestFastYAMLReadsBlockDocuments checks that the one-pass reader, not
// yaml.v3, reads the block style that editors and yaml.Marshal write, with
// comments, quoted strings, numbers and sequences with and without
// indentation under their key.
func TestFastYAMLReadsBlockDocuments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc string
		doc  string
	}{
		{"yaml.Marshal output, 300 rules", string(largeYAML(t, 300))},
		{"hand-written", `# Rules for the shop.
namespace: shop   
routes:
- id: orders   
  match:
    pathPrefix: /api/orders
    methods:
    - GET
    - POST
    headers:
      X-Tenant: "42"
      'X-Region': 'eu-west'
  upstream:
    targets:
      -   url: http://10.0.0.1:8080
          weight: 3

    timeout: 1.5s
# limits
limits:
  - id: per-ip
    routes:
      - orders
    key:
      - ip
    algorithm: token_bucket
    rate: 100
    burst: 200
    period: 1s
    shadow: false
breakers:
  - id: b
    routes:
      - orders
    errorRatio: 0.5
    window: 10s
    openFor: 5s
`},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if !checkFastYAML(t, []byte(tt.doc)) {
				t.Fatal("fast YAML parser refused the document")
			}
			if _, err := Decode([]byte(tt.doc)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// FuzzFastYAML checks that the one-pass YAML reader reads every document it
// accepts as yaml.v3 does. `go test -fuzz=FuzzFastYAML ./api/` explores.
func FuzzFastYAML(f *testing.F) {
	for _, s := range fastYAMLSeeds {
		f.Add([]byte(s))
	}
	f.Add(largeYAML(f, 40))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFastYAML(t, data)
	})
}

// randomBlockYAML writes a document of random lines in and around the block
// subset: keys, entries, scalars that resolve to every kind, at random
// indentation, with comments and blank lines.
func randomBlockYAML(r *rand.Rand) []byte {
	keys := []string{"a", "b", "id", "'a'", `"b"`, "X-T", "1", "true", "a.b", "a/b", "_x", "a b", "<<", "? a", "a:b"}
	scalars := []string{"1", "-1", "0", "-0", "00", "1.5", "1.", ".5", "5s", "-5s", "1_0", "0x1f", "1e3", "2024-01-01",
		"9223372036854775808", "true", "True", "yes", "no", "null", "~", "NULL", "'x'", `"y"`, "'it''s'", `"a\"b"`,
		"a#b", "a #b", "a: b", "http://x:1", "x:", "-", "- x", "[1]", "{a: 1}", "*a", "&a x", "!t x", "|", ">", `""`, "''",
		"a  b", "x  ", "x\ty", "^/a/[0-9]+$", "$x", "/p", "'a' b", "é", "[a, 1]", "[]", "{a: [b]}", "[a,]", "{a}", "[a: 1]",
		"[- a]", "{a: 1, a: 2}", "[x] y", "[{'a': \"b\"}, [1.5, -2, 5s]]", "{a: {}}", "[a b, c  ,d]", "[a #b]", "[0?]", "[a?b]", "{a: b?}", "a?b", "x # c", "x #c: d", "'x' # c", "'x'#c", "[a] # c", "# c", "x#c", "ä", "x ä", "'ä'", "x\u0085y", "x\u2029", "x\U0001F600", "x\u00a0 ", "-.Inf", "+.inf", ".NAN", "-.inf", "-x", "[-.Inf]"}
	var b strings.Builder
	for range 1 + r.IntN(12) {
		b.WriteString(strings.Repeat(" ", r.IntN(7)))
		k, v := keys[r.IntN(len(keys))], scalars[r.IntN(len(scalars))]
		switch r.IntN(9) {
		case 0, 1:
			b.WriteString(k + ": " + v)
		case 2:
			b.WriteString(k + ":")
		case 3:
			b.WriteString("- " + v)
		case 4:
			b.WriteString("- " + k + ": " + v)
		case 5:
			b.WriteString("-")
		case 6:
			b.WriteString("- " + k + ":")
		case 7:
			b.WriteString([]string{"# c", "", "---", "- - " + v, v}[r.IntN(5)])
		case 8:
			b.WriteString(k + ":  " + v + strings.Repeat(" ", r.IntN(2)))
		}
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// randomNestedYAML writes a random nested block document: mappings and
// sequences (indented or not under their key, mappings inside entries),
// scalars of every kind, comments and blank lines, and now and then a line
// moved by one column.
func randomNestedYAML(r *rand.Rand) []byte {
	keys := []string{"a", "b", "id", "'a'", `"b"`, "X-T", "1", "true", "a.b", "k"}
	scalars := []string{"1", "-1", "0", "1.5", "0.25", "5s", "-5s", "1h30m", "true", "False", "yes", "'x'", `"y"`, "'it''s'",
		"a#b", "http://x:1/p", "^/a/[0-9]+$", "/p", "GET", "x y", "'*.a'", `"4"`, "''", "a,b", "null", "00", "1.",
		"2024-01-01", "a #b", "x:", "[GET, POST]", "[{url: \"http://x:1\", weight: 1}]", "{a: 1, b: [x]}", "[]", "[a,]", "[x?]", "x?", "x # c", "'x' # c", "[1] #c", "x — y", "'ü'", "x\u2028", "-.Inf", "[-.inf, .nan]", "+.inf"}
	var lines []string
	var gen func(ind, depth int, first string)
	scalar := func() string { return scalars[r.IntN(len(scalars))] }
	// gen writes a block node at indentation ind; first, if not empty, is
	// the text before the node's first line ("- " of an enclosing entry).
	gen = func(ind, depth int, first string) {
		pad := strings.Repeat(" ", ind)
		if first != "" {
			pad = first
		}
		if depth > 3 || r.IntN(2) == 0 { // a mapping
			seen := map[string]bool{}
			for i := range 1 + r.IntN(4) {
				k := keys[r.IntN(len(keys))]
				if seen[k] && r.IntN(8) != 0 {
					continue
				}
				seen[k] = true
				p := strings.Repeat(" ", ind)
				if i == 0 {
					p = pad
				}
				if depth > 3 || r.IntN(3) > 0 {
					lines = append(lines, p+k+": "+scalar())
					continue
				}
				lines = append(lines, p+k+":"+[]string{"", "", " # c", "  #c"}[r.IntN(4)])
				if r.IntN(2) == 0 {
					gen(ind, depth+1, "") // a sequence at the key's indentation, or a mapping (then null)
				} else {
					gen(ind+1+r.IntN(4), depth+1, "")
				}
			}
			return
		}
		for i := range 1 + r.IntN(4) { // a sequence
			p := strings.Repeat(" ", ind)
			if i == 0 {
				p = pad
			}
			switch r.IntN(4) {
			case 0, 1:
				lines = append(lines, p+"- "+scalar())
			case 2:
				gen(ind+2, depth+1, p+"- ")
			case 3:
				lines = append(lines, p+"-"+[]string{"", "", " # c"}[r.IntN(3)])
				gen(ind+1+r.IntN(3), depth+1, "")
			}
			if r.IntN(6) == 0 {
				lines = append(lines, strings.Repeat(" ", r.IntN(8))+[]string{"# c", ""}[r.IntN(2)])
			}
		}
	}
	gen(r.IntN(2), 0, "")
	if r.IntN(4) == 0 {
		i := r.IntN(len(lines))
		if r.IntN(2) == 0 {
			lines[i] = " " + lines[i]
		} else {
			lines[i] = strings.TrimPrefix(lines[i], " ")
		}
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

// TestFastYAMLRandomDocuments compares both YAML readers on random
// documents (a fixed seed, so every run checks the same ones).
func TestFastYAMLRandomDocuments(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 9))
	accepted := 0
	for range randomDocuments {
		if checkFastYAML(t, randomBlockYAML(r)) {
			accepted++
		}
		if checkFastYAML(t, randomNestedYAML(r)) {
			accepted++
		}
	}
	if accepted == 0 {
		t.Fatal("fast YAML parser accepted none of the random documents")
	}
}

// randomDocuments is how many documents of each generator a test run
// compares (a few hundred thousand were compared once, too).
const randomDocuments = 10_000
