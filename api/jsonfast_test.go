package api

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sameTree reports whether a and b hold the same values, keys in the same
// order, ignoring lines.
func sameTree(a, b *tree) bool {
	if a.kind != b.kind || a.str != b.str || a.b != b.b || !reflect.DeepEqual(a.keys, b.keys) || len(a.vals) != len(b.vals) {
		return false
	}
	for i := range a.vals {
		if !sameTree(a.vals[i], b.vals[i]) {
			return false
		}
	}
	return true
}

// checkFastJSON fails when the one-pass parser and the token-based parser
// read data differently: a different tree, or one accepting what the other
// refuses.
func checkFastJSON(t *testing.T, data []byte) {
	t.Helper()
	slow, serr := parseJSONTokens(data)
	if !json.Valid(data) {
		if serr == nil {
			t.Fatalf("token parser accepted invalid JSON %q", data)
		}
		return
	}
	fast, ok := fastJSON(data)
	switch {
	case ok && serr != nil:
		t.Fatalf("fast parser accepted %q; token parser: %v", data, serr)
	case !ok && serr == nil:
		t.Fatalf("fast parser refused %q, which the token parser accepts", data)
	case ok && !sameTree(fast, slow):
		t.Fatalf("trees differ for %q", data)
	}
}

var fastJSONSeeds = []string{
	minimalJSON,
	`{}`, `[]`, `[[],{}]`, `{"a":{"b":[1,2,{"c":null}]}}`,
	` {"a" : 1 , "b":[ true ,false,null ] } `,
	`{"a":"\u00e9\n\"\\\/","b\u0041":"x"}`,
	`{"a":"\ud83d\ude00","b":"\ud800"}`,
	`{"n":[0,-0,-0.0,1e3,1E-3,1.50,123456789012345678,9007199254740993,1e400,-1e400]}`,
	`{"a":1,"a":2}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"a":18}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"r":18}`,
	`{"a\u0000b":1,"a":2}`,
	`{"x":1} {}`,
	`{"x":`,
	strings.Repeat("[", 33) + strings.Repeat("]", 33),
	strings.Repeat("[", 32) + strings.Repeat("]", 32),
	strings.Repeat(`{"a":`, 40) + "1" + strings.Repeat("}", 40),
}

// TestFastJSONMatchesTokens runs both JSON parsers over the seeds and every
// JSON file under testdata.
func TestFastJSONMatchesTokens(t *testing.T) {
	t.Parallel()
	docs := fastJSONSeeds
	files, _ := filepath.Glob("testdata/*.json")
	corpus, _ := filepath.Glob("testdata/corpus/*/*.json")
	for _, f := range append(files, corpus...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	docs = append(docs, string(largeDocument(t, 200)))
	for _, d := range docs {
		checkFastJSON(t, []byte(d))
	}
}

// FuzzFastJSON checks that the one-pass parser reads every document as the
// token-based parser does.
func FuzzFastJSON(f *testing.F) {
	for _, s := range fastJSONSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFastJSON(t, data)
	})
}
