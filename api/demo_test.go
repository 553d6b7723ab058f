package api

import (
	"os"
	"testing"
)

// TestDemoRules checks the rules that `make run` serves.
func TestDemoRules(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../deploy/rules/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := MustDecode(t, b).Validate(); err != nil {
		t.Fatalf("deploy/rules/demo.yaml: %v", err)
	}
}
