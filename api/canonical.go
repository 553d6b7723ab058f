package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"math"
	"net/textproto"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
)

// normalizations counts Normalize calls (see Normalizations).
var normalizations atomic.Int64

// Normalizations returns how many times Normalize has run in this process: a
// diagnostic for tests that bound the work of one apply (a node normalizes a
// rule set once, in Validated). Safe for concurrent use.
func Normalizations() int64 { return normalizations.Load() }

// Normalize returns a deep copy of rs with every default written out: periods,
// bursts, keys, scopes, cluster modes, upstream timeouts, weights, reject
// responses, breaker and degrade settings (except fields that came after
// versions were published and are written as absent when they hold their
// default, so that older documents keep their checksums: limits' ipv6Prefix
// (64) and cookieDecoding (percent), and upstreams' bodyTimeout,
// writeTimeout, protocol and tls); upper-case methods, lower-case hosts,
// canonical header names (X-Canary), and JSON fallback bodies with sorted
// keys. The same rules written with and without their defaults normalize to
// the same value, and Normalize of a normalized rule set changes nothing. rs
// should be valid; Normalize does not validate, but it does not fail or panic
// on an invalid rule set either.
func (rs *RuleSet) Normalize() *RuleSet {
	normalizations.Add(1)
	n := rs.Clone()
	if n.Kind == KindGateway {
		n.Kind = "" // the default, written as absent
	}
	if n.IsService() {
		n.normalizeService()
	}
	for i := range n.Routes {
		r := &n.Routes[i]
		for j, h := range r.Match.Hosts {
			r.Match.Hosts[j] = strings.ToLower(h)
		}
		for j, m := range r.Match.Methods {
			r.Match.Methods[j] = strings.ToUpper(m)
		}
		if len(r.Match.Headers) > 0 {
			hs := make(map[string]string, len(r.Match.Headers))
			for _, name := range slices.Sorted(maps.Keys(r.Match.Headers)) {
				hs[textproto.CanonicalMIMEHeaderKey(name)] = r.Match.Headers[name]
			}
			r.Match.Headers = hs
		}
		if n.IsService() {
			continue // no upstream: absent
		}
		if r.Upstream.Timeout == 0 {
			r.Upstream.Timeout = Duration(DefaultUpstreamTimeout)
		}
		// The client-side timeouts came after checksums were stored: their
		// defaults are normalized away rather than written out, so that the
		// canonical form (and checksum) of every earlier document stays as
		// it was, and a document that spells the default out has the same
		// checksum as one that omits it.
		if r.Upstream.BodyTimeout == Duration(DefaultBodyTimeout) {
			r.Upstream.BodyTimeout = 0
		}
		if r.Upstream.WriteTimeout == Duration(DefaultWriteTimeout) {
			r.Upstream.WriteTimeout = 0
		}
		if r.Upstream.Targets == nil {
			r.Upstream.Targets = []Target{} // written as [], which decodes again (null does not)
		}
		for j := range r.Upstream.Targets {
			if r.Upstream.Targets[j].Weight == 0 {
				r.Upstream.Targets[j].Weight = 1
			}
		}
		normalizeUpstream(&r.Upstream) // protocol and tls: absent at their defaults
	}
	for i := range n.Limits {
		l := &n.Limits[i]
		if len(l.Key) == 0 {
			l.Key = []string{"global"}
		}
		normalizeKey(l.Key)
		if l.IPv6Prefix == DefaultIPv6Prefix {
			// Added after versions were published: its default is written
			// as absent, so that their checksums stay what they were.
			l.IPv6Prefix = 0
		}
		if l.CookieDecoding == CookiePercent {
			l.CookieDecoding = "" // the default, written as absent (as ipv6Prefix)
		}
		if l.Cost != nil && l.Cost.Header != "" {
			l.Cost.Header = textproto.CanonicalMIMEHeaderKey(l.Cost.Header)
		}
		if !l.Algorithm.Concurrent() && l.Period == 0 && l.Calendar == "" {
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
		if l.Response == nil {
			l.Response = &LimitResponse{}
		}
		if l.Response.Status == 0 {
			l.Response.Status = DefaultLimitRejectStatus
		}
	}
	for i := range n.Breakers {
		b := &n.Breakers[i]
		if b.MinRequests == 0 {
			b.MinRequests = DefaultBreakerMinRequests
		}
		if b.MaxOpenFor == 0 && b.OpenFor > 0 && b.OpenFor <= math.MaxInt64/DefaultMaxOpenForFactor {
			b.MaxOpenFor = b.OpenFor * DefaultMaxOpenForFactor
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
		normalizeKey(d.Key)
		if d.Fallback == nil {
			d.Fallback = &DegradeFallback{}
		}
		if d.Fallback.Status == 0 {
			d.Fallback.Status = DefaultFallbackStatus
		}
		if len(d.Fallback.JSON) > 0 {
			d.Fallback.JSON = d.Fallback.JSON.canonical()
		}
	}
	n.normalizeAdaptiveParts()
	n.normalizeIdentityParts()
	return n
}

// normalizeKey writes the header names of header:NAME key dimensions in
// canonical form, in place.
func normalizeKey(key []string) {
	for i, k := range key {
		if name, ok := strings.CutPrefix(k, "header:"); ok {
			key[i] = "header:" + textproto.CanonicalMIMEHeaderKey(name)
		}
	}
}

// canonical returns r with object keys sorted and numbers spelled as Decode
// spells them, or r unchanged when it is not valid JSON.
func (r RawJSON) canonical() RawJSON {
	if !json.Valid(r) {
		return r
	}
	t, err := parseJSON(r)
	if err != nil {
		return r
	}
	var buf bytes.Buffer
	writeJSON(&buf, t)
	return buf.Bytes()
}

// Clone returns a deep copy of rs, valid or not: it shares no slice, map or
// pointer with rs.
func (rs *RuleSet) Clone() *RuleSet {
	var c RuleSet
	// Reflection keeps Clone in step with every field added later.
	deepCopy(reflect.ValueOf(&c).Elem(), reflect.ValueOf(rs).Elem())
	return &c
}

// deepCopy copies src into dst, which has the same type and is settable,
// allocating new slices, maps and pointees. The rule-set types are trees of
// plain data, so there are no cycles to follow.
func deepCopy(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			dst.SetZero()
			return
		}
		p := reflect.New(src.Type().Elem())
		deepCopy(p.Elem(), src.Elem())
		dst.Set(p)
	case reflect.Struct:
		for i := range src.NumField() {
			if dst.Field(i).CanSet() {
				deepCopy(dst.Field(i), src.Field(i))
			}
		}
	case reflect.Slice:
		if src.IsNil() {
			dst.SetZero()
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		for i := range src.Len() {
			deepCopy(s.Index(i), src.Index(i))
		}
		dst.Set(s)
	case reflect.Map:
		if src.IsNil() {
			dst.SetZero()
			return
		}
		m := reflect.MakeMapWithSize(src.Type(), src.Len())
		iter := src.MapRange()
		for iter.Next() {
			v := reflect.New(src.Type().Elem()).Elem()
			deepCopy(v, iter.Value())
			m.SetMapIndex(iter.Key(), v)
		}
		dst.Set(m)
	default:
		dst.Set(src)
	}
}

// Canonical returns the canonical JSON form of rs: defaults written out
// (Normalize), fields in declaration order, object keys sorted, no
// insignificant space. The same rules written in YAML or JSON, in any key order,
// with or without defaults, have the same canonical form.
//
// Canonical never fails: on an invalid rule set it still returns a stable
// encoding, with NaN and infinite numbers (which Validate rejects) written as 0.
func (rs *RuleSet) Canonical() []byte { return canonicalJSON(rs.Normalize()) }

// canonicalJSON encodes n, a normalized rule set the caller owns: it replaces
// NaN and infinite numbers in n (a valid rule set has none) by 0.
func canonicalJSON(n *RuleSet) []byte {
	for i := range n.Breakers {
		finite(&n.Breakers[i].ErrorRatio)
		finite(&n.Breakers[i].SlowCallRatio)
	}
	for i := range n.Degrades {
		d := &n.Degrades[i]
		finite(&d.Level1ShedRatio)
		if t := d.Triggers; t != nil {
			for _, tr := range []*Trigger{t.Level1, t.Level2} {
				if tr != nil {
					finite(&tr.QPSAbove)
					finite(&tr.SuccessRateBelow)
				}
			}
		}
	}
	b, err := json.Marshal(n)
	if err != nil {
		// Unreachable: every field is plain data, RawJSON and floats are made
		// encodable above. Keep the result stable rather than panic.
		b, _ = json.Marshal(map[string]string{"unencodable": err.Error()})
	}
	return b
}

func finite(f *float64) {
	if math.IsNaN(*f) || math.IsInf(*f, 0) {
		*f = 0
	}
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
