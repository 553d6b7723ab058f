package degrade

import (
	"testing"

	"github.com/sluicegw/sluice/api"
)

// TestApplyOperatorOverride: an override's levels are set, a level the next
// override drops is cleared, and a rule the set does not have is skipped.
func TestApplyOperatorOverride(t *testing.T) {
	t.Parallel()
	s := MustCompile(t, []api.Degrade{{ID: "m", Routes: []string{"r"}, Mode: api.DegradeManual}}, nil, Options{})
	c := s.ForRule("m")
	now := s.opts.now()
	first := api.Override{DegradeLevels: map[string]int{"m": 2, "gone": 1}}
	s.ApplyOperatorOverride(api.Override{}, first, quiet)
	if lvl := c.Level(now); lvl != 2 {
		t.Fatalf("forced level %d; want 2", lvl)
	}
	s.ApplyOperatorOverride(first, api.Override{Drain: true}, quiet)
	if lvl := c.Level(now); lvl != 0 {
		t.Fatalf("after the override dropped it: level %d; want 0", lvl)
	}
}
