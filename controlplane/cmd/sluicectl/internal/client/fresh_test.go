package client

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/controlplane/cmd/sluicectl/internal/client/spec"
)

// TestGeneratedClientIsFresh fails when api/openapi.yaml changed after
// client.gen.go was generated: run go generate.
func TestGeneratedClientIsFresh(t *testing.T) {
	src, err := os.ReadFile(spec.Path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("client.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	first, _ := bufio.NewReader(f).ReadString('\n')
	got := strings.TrimPrefix(strings.TrimSpace(first), "// "+spec.StampPrefix)
	if want := spec.Sum(src); got != want {
		t.Fatalf("client.gen.go was generated from a spec with sha256 %q, api/openapi.yaml now has %s: run `go generate ./cmd/sluicectl/...` in controlplane/", got, want)
	}
}
