package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// Normalize returns a deep copy of rs with every default written out: periods,
// bursts, scopes, timeouts, weights, breaker and degrade settings, upper-case
// methods, lower-case hosts. The same rules written with and without their
// defaults normalize to the same value. rs should be valid; Normalize does not
// validate.
func (rs *RuleSet) Normalize() *RuleSet {
	n := rs.Clone()
	for i := range n.Routes {
		r := &n.Routes[i]
		for j, h := range r.Match.Hosts {
			r.Match.Hosts[j] = strings.ToLower(h)
		}
		for j, m := range r.Match.Methods {
			r.Match.Methods[j] = strings.ToUpper(m)
		}
		if r.Upstream.Timeout == 0 {
			r.Upstream.Timeout = Duration(DefaultUpstreamTimeout)
		}
		for j := range r.Upstream.Targets {
			if r.Upstream.Targets[j].Weight == 0 {
				r.Upstream.Targets[j].Weight = 1
			}
		}
	}
	for i := range n.Limits {
		l := &n.Limits[i]
		if len(l.Key) == 0 {
			l.Key = []string{"global"}
		}
		if l.Algorithm != Concurrency && l.Period == 0 {
			l.Period = Duration(DefaultPeriod)
		}
		if (l.Algorithm == TokenBucket || l.Algorithm == LeakyBucket) && l.Burst == 0 {
			l.Burst = l.Rate
		}
		if l.Scope == "" {
			l.Scope = ScopeNode
		}
		if l.Scope == ScopeCluster {
			if l.Mode == "" {
				l.Mode = ModeExact
			}
			if l.OnStoreError == "" {
				l.OnStoreError = OnStoreErrorLocal
			}
		}
		if l.Response != nil && l.Response.Status == 0 {
			l.Response.Status = DefaultLimitRejectStatus
		}
	}
	for i := range n.Breakers {
		b := &n.Breakers[i]
		if b.MaxOpenFor == 0 {
			b.MaxOpenFor = max(b.OpenFor, Duration(time.Minute))
		}
		if b.HalfOpenProbes == 0 {
			b.HalfOpenProbes = DefaultHalfOpenProbes
		}
		if b.Fallback == nil {
			b.Fallback = &BreakerFallback{}
		}
		if b.Fallback.Status == 0 {
			b.Fallback.Status = DefaultFallbackStatus
		}
	}
	for i := range n.Degrades {
		d := &n.Degrades[i]
		if d.Window == 0 {
			d.Window = Duration(DefaultDegradeWindow)
		}
		if d.Level1ShedRatio == 0 {
			d.Level1ShedRatio = DefaultLevel1ShedRatio
		}
		if d.RecoverAfter == 0 {
			d.RecoverAfter = DefaultRecoverAfter
		}
		if len(d.Key) == 0 {
			d.Key = []string{"ip"}
		}
		if d.Fallback == nil {
			d.Fallback = &DegradeFallback{}
		}
		if d.Fallback.Status == 0 {
			d.Fallback.Status = DefaultFallbackStatus
		}
	}
	return n
}

// Clone returns a deep copy of rs.
func (rs *RuleSet) Clone() *RuleSet {
	// A JSON round trip is exact for these types and keeps Clone in step with
	// every field added later.
	b, err := json.Marshal(rs)
	if err != nil {
		panic("api: rule set does not marshal: " + err.Error()) // cannot happen: all fields are plain data
	}
	var c RuleSet
	if err := json.Unmarshal(b, &c); err != nil {
		panic("api: rule set does not unmarshal: " + err.Error())
	}
	return &c
}

// Canonical returns the canonical JSON form of rs: defaults written out
// (Normalize), fields in declaration order, object keys sorted, no
// insignificant space. The same rules written in YAML or JSON, in any key order,
// with or without defaults, have the same canonical form.
func (rs *RuleSet) Canonical() []byte {
	b, err := json.Marshal(rs.Normalize())
	if err != nil {
		panic("api: rule set does not marshal: " + err.Error())
	}
	var buf bytes.Buffer
	_ = json.Compact(&buf, b)
	return buf.Bytes()
}

// Checksum returns "sha256:" and the hex sha256 of the canonical form.
func (rs *RuleSet) Checksum() string {
	return ChecksumOf(rs.Canonical())
}

// ChecksumOf returns "sha256:" and the hex sha256 of canonical bytes.
func ChecksumOf(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func sortByKey(idx []int, keys []string) {
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(keys[a], keys[b]) })
}
