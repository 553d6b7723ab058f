// Package buildinfotest checks a binary's --version: it builds the binary
// with the build injected as make dist does (-ldflags -X into package
// buildinfo) and compares what --version prints.
package buildinfotest

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// The build CheckVersion injects.
const (
	Version = "v9.8.7-test"
	Commit  = "0123abc"
	Date    = "2026-12-04T21:00:00Z"
)

// CheckVersion builds the main package in the test's directory as name,
// with Version, Commit and Date set by the linker, runs it with --version
// and fails t unless it prints "name Version (commit Commit, built Date)".
func CheckVersion(t *testing.T, name string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	const pkg = "github.com/sluicegw/sluice/api/buildinfo"
	ldflags := "-X " + pkg + ".Version=" + Version + " -X " + pkg + ".Commit=" + Commit + " -X " + pkg + ".Date=" + Date
	if out, err := exec.Command("go", "build", "-ldflags", ldflags, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := name + " " + Version + " (commit " + Commit + ", built " + Date + ")\n"; string(out) != want {
		t.Errorf("--version printed %q, want %q", out, want)
	}
}
