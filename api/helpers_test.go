package api

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// MustDecode decodes data or fails the test.
func MustDecode(tb testing.TB, data []byte) *RuleSet {
	tb.Helper()
	rs, err := Decode(data)
	if err != nil {
		tb.Fatalf("Decode: %v", err)
	}
	return rs
}

// MustReadFile reads a file under testdata or fails the test.
func MustReadFile(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// MustValid decodes and validates a testdata file or fails the test.
func MustValid(tb testing.TB, name string) *RuleSet {
	tb.Helper()
	rs := MustDecode(tb, MustReadFile(tb, name))
	if err := rs.Validate(); err != nil {
		tb.Fatalf("%s: Validate: %v", name, err)
	}
	return rs
}

// errorPaths returns the sorted paths of the field errors in err.
func errorPaths(err error) []string {
	var ps []string
	for _, e := range AsErrors(err) {
		ps = append(ps, e.Path)
	}
	slices.Sort(ps)
	return ps
}

// wantErrors checks that err holds exactly the errors at paths (in any
// order), and that the message of the first contains msg.
func wantErrors(tb testing.TB, err error, msg string, paths ...string) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("no error; want errors at %q", paths)
	}
	want := slices.Clone(paths)
	slices.Sort(want)
	if got := errorPaths(err); !slices.Equal(got, want) {
		tb.Fatalf("error paths = %q, want %q; error:\n%v", got, want, err)
	}
	if es := AsErrors(err); msg != "" && !strings.Contains(es[0].Message, msg) {
		tb.Fatalf("message %q does not contain %q", es[0].Message, msg)
	}
}
