package gateway

import (
	"io"
	"log/slog"
	"testing"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/api/buildinfo"
)

// TestRegisteredBuild: the build a node registers (the console's Build
// column) and serves in /status is the one make dist stamps into package
// buildinfo, never a copy of its own.
func TestRegisteredBuild(t *testing.T) {
	v := buildinfo.Version
	t.Cleanup(func() { buildinfo.Version = v })
	buildinfo.Version = "v9.8.7-test"
	n := New(Config{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if got := n.NodeStatus(api.NodeStatus{}).Build; got != "v9.8.7-test" {
		t.Errorf("registered build %q, want v9.8.7-test", got)
	}
	if got := n.Status().Build; got != "v9.8.7-test" {
		t.Errorf("/status build %q, want v9.8.7-test", got)
	}
}
