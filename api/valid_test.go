package api

import (
	"bytes"
	"reflect"
	"testing"
)

func TestValidated(t *testing.T) {
	// Not parallel: it counts Normalize calls of the whole package.
	for _, name := range []string{"full.yaml", "minimal.yaml", "defaults-omitted.yaml"} {
		t.Run(name, func(t *testing.T) {
			rs := MustValid(t, name)
			before := normalizations.Load()
			v, err := Validated(rs)
			if err != nil {
				t.Fatal(err)
			}
			if n := normalizations.Load() - before; n != 1 {
				t.Fatalf("Validated normalized %d times, want 1", n)
			}
			if v.Checksum() != rs.Checksum() || !bytes.Equal(v.Canonical(), rs.Canonical()) {
				t.Fatalf("checksum %s, RuleSet.Checksum %s", v.Checksum(), rs.Checksum())
			}
			if !reflect.DeepEqual(v.Rules(), rs.Normalize()) {
				t.Fatal("Rules is not the normalized rule set")
			}
		})
	}
}

func TestValidatedRefuses(t *testing.T) {
	t.Parallel()
	rs := MustValid(t, "full.yaml").Clone()
	rs.Breakers[0].HalfOpenProbes = MaxHalfOpenProbes + 1
	v, err := Validated(rs)
	if v != nil {
		t.Fatal("invalid rule set made a Valid")
	}
	wantErrors(t, err, "must be between 1 and 1000", "breakers[0].halfOpenProbes")
}

func TestNilValid(t *testing.T) {
	t.Parallel()
	var v *Valid
	if v.Checksum() != "" || v.Canonical() != nil || len(v.Rules().Routes) != 0 {
		t.Fatal("nil Valid holds rules")
	}
}
