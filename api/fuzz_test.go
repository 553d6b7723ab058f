package api

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
)

// FuzzDecodeValidate runs documents through Decode, Validate and the
// canonical form. Its invariants:
//   - nothing panics;
//   - Decode returns a rule set or an error, never both, and every error is
//     Errors with at least one message;
//   - a decoded rule set's canonical form is compact JSON that decodes again
//     (strictly) to the same canonical form and checksum, and that validates
//     whenever the original did.
//
// The seed corpus (below and in testdata/fuzz/FuzzDecodeValidate) runs in
// every `go test`; `go test -fuzz=FuzzDecodeValidate ./api/` explores.
func FuzzDecodeValidate(f *testing.F) {
	for _, name := range []string{"full.yaml", "design.yaml", "defaults-omitted.yaml", "defaults-explicit.json", "full.canonical.json"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	if b, err := os.ReadFile("../deploy/rules/demo.yaml"); err == nil {
		f.Add(b)
	}
	for _, s := range []string{
		minimalYAML,
		minimalJSON,
		billionLaughs,
		"namespace: x\nroutes: [{id: a, match: {pathRegex: \"(\"}}]\n",
		"namespace: x\nlimits: [{id: a, algorithm: token_bucket, rate: -1}]\n",
		"namespace: x\nlimits: [{id: a, rate: 0}, {id: a, rate: 0}]\n",
		"namespace: x\nlimits: [{id: a, routes: [nope], algorithm: concurrency, rate: 1}]\n",
		"namespace: x\nbogus: 1\n",
		"namespace: a\n---\nnamespace: b\n",
		"base: &b {id: a}\nroutes: [{<<: *b}]\n",
		"namespace: x\nbreakers: [{errorRatio: .nan, window: .inf}]\n",
		`{"namespace":"x","limits":[{"rate":1e400,"burst":99999999999999999999}]}`,
		`{"namespace":"x","degrades":[{"mode":"auto","fallback":{"json":{"b":[1,2.50,{"z":null,"a":"\u00e9"}],"a":-0.0}}}]}`,
		"namespace: x\ndegrades: [{fallback: {json: {a: .5, b: +1, c: 0x1f, d: 1e3}}}]\n",
		"namespace: \xff\n",
		"\ufeffnamespace: x\n",
		"namespace: x\nroutes: [{id: a, match: {headers: {x-a: \"1\", X-A: \"2\"}}}]\n",
		strings.Repeat("[", 64) + strings.Repeat("]", 64),
		nestedYAML(40),
		"",
		"~",
		"[]",
		"{}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := Decode(data)
		if err != nil {
			if rs != nil {
				t.Fatal("Decode returned a rule set and an error")
			}
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("Decode error is not Errors: %T %v", err, err)
			}
			for _, e := range es {
				if e.Message == "" {
					t.Fatalf("empty error message in %v", es)
				}
			}
			return
		}
		verr := rs.Validate()
		if verr != nil {
			if len(AsErrors(verr)) == 0 {
				t.Fatal("Validate returned an empty error")
			}
		}
		c := rs.Canonical()
		again, err := Decode(c)
		if err != nil {
			t.Fatalf("canonical form does not decode: %v\n%s", err, c)
		}
		if c2 := again.Canonical(); !bytes.Equal(c, c2) {
			t.Fatalf("canonical form is not stable:\n%s\n%s", c, c2)
		}
		if rs.Checksum() != again.Checksum() {
			t.Fatal("checksum changed across the canonical round trip")
		}
		// Normalizing may repair some invalid sets (two spellings of one
		// header collapse), but must never break a valid one.
		if verr == nil {
			if err := again.Validate(); err != nil {
				t.Fatalf("canonical form of valid rules does not validate: %v\n%s", err, c)
			}
		}
	})
}
