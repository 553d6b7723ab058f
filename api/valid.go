package api

// MaxHalfOpenProbes is the most probes Validate lets a breaker admit while
// half open (the breaker's state word holds up to 32767).
const MaxHalfOpenProbes = 1000

// Valid is a rule set that passed Validate, with every default written out
// by Normalize, and its checksum. Only Validated makes one, so a compiler
// that takes a *Valid needs neither to check nor to normalize the rules
// again: the bounds of every field are those of Validate, in one place.
//
// A Valid is immutable: its rules are shared read-only by everything
// compiled from it. The zero value is not usable; a nil *Valid holds no rules.
type Valid struct {
	rules     *RuleSet
	canonical []byte
	checksum  string
}

// Validated validates rs and, when it is valid, normalizes it once and
// computes its canonical form and checksum from that one normalized copy.
// It returns Validate's Errors otherwise. It does not change rs.
func Validated(rs *RuleSet) (*Valid, error) {
	if err := rs.Validate(); err != nil {
		return nil, err
	}
	n := rs.Normalize()
	// canonicalJSON changes only NaN and infinite numbers, which Validate
	// refused: n stays the normalized rule set.
	c := canonicalJSON(n)
	return &Valid{rules: n, canonical: c, checksum: ChecksumOf(c)}, nil
}

// Rules returns the normalized rule set. Callers must not change it.
func (v *Valid) Rules() *RuleSet {
	if v == nil {
		return &RuleSet{}
	}
	return v.rules
}

// Canonical returns the canonical JSON form, as RuleSet.Canonical does.
// Callers must not change it.
func (v *Valid) Canonical() []byte {
	if v == nil {
		return nil
	}
	return v.canonical
}

// Checksum returns the checksum of the canonical form, as RuleSet.Checksum.
func (v *Valid) Checksum() string {
	if v == nil {
		return ""
	}
	return v.checksum
}
