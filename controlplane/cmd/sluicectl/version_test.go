package main

import (
	"io"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/api/buildinfo"
)

// TestVersionCommand: sluicectl version prints the build the linker set
// (make dist's -X of package buildinfo, the variables set here), as text
// and as JSON.
func TestVersionCommand(t *testing.T) {
	v, c, d := buildinfo.Version, buildinfo.Commit, buildinfo.Date
	t.Cleanup(func() { buildinfo.Version, buildinfo.Commit, buildinfo.Date = v, c, d })
	buildinfo.Version, buildinfo.Commit, buildinfo.Date = "v9.8.7-test", "0123abc", "2026-12-04T21:00:00Z"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"version"}, "sluicectl v9.8.7-test (commit 0123abc, built 2026-12-04T21:00:00Z)\n"},
		{[]string{"version", "-o", "json"}, `{"commit":"0123abc","date":"2026-12-04T21:00:00Z","version":"v9.8.7-test"}` + "\n"},
	} {
		var out strings.Builder
		if code := run(tc.args, strings.NewReader(""), &out, io.Discard); code != 0 || out.String() != tc.want {
			t.Errorf("%v: exit %d, %q; want %q", tc.args, code, out.String(), tc.want)
		}
	}
}
