package limit

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"math"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/sluicegw/sluice/api"
)

// dimKind is one kind of key dimension.
type dimKind uint8

const (
	dimGlobal dimKind = iota
	dimIP
	dimRoute
	dimHeader
	dimQuery
	dimCookie
)

// dim is one key dimension of a limit.
type dim struct {
	kind dimKind
	name string // header (canonical), query or cookie name
	spec string // as written: "ip", "header:X-User", ...
	bits int    // ip: the prefix length IPv6 clients are keyed by (1-128)
}

// keySpec is a limit's key: its dimensions in rule order. "global" parts
// contribute nothing; a key of only "global" parts is one key for everyone.
type keySpec struct {
	dims []dim
}

// parseKey compiles a limit's key; ipv6Prefix is the limit's (0 means
// api.DefaultIPv6Prefix).
func parseKey(key []string, ipv6Prefix int) (keySpec, error) {
	var ks keySpec
	if ipv6Prefix <= 0 || ipv6Prefix > 128 {
		ipv6Prefix = api.DefaultIPv6Prefix
	}
	for _, k := range key {
		if err := api.ValidateKey(k); err != nil {
			return ks, err
		}
		kind, name, _ := strings.Cut(k, ":")
		d := dim{spec: k, name: name}
		switch kind {
		case "global":
			continue
		case "ip":
			d.kind, d.bits = dimIP, ipv6Prefix
		case "route":
			d.kind = dimRoute
		case "header":
			d.kind, d.name = dimHeader, http.CanonicalHeaderKey(name)
		case "query":
			d.kind = dimQuery
		case "cookie":
			d.kind = dimCookie
		default:
			return ks, fmt.Errorf("%q is not a key dimension", k)
		}
		ks.dims = append(ks.dims, d)
	}
	return ks, nil
}

func (ks keySpec) String() string {
	parts := make([]string, len(ks.dims))
	for i, d := range ks.dims {
		parts[i] = d.spec
		if d.kind == dimIP {
			parts[i] += "/" + strconv.Itoa(d.bits) // keys over other prefixes hash apart
		}
	}
	return strings.Join(parts, ",")
}

// part returns the value of one dimension for a request and whether it is
// present (an empty value is not). It reads the first occurrence: requests
// where that is ambiguous (see KeyCheck) are refused before any limit
// decides. It allocates only for a percent-encoded query parameter.
func (d *dim) part(r *http.Request, info *RequestInfo, kv *KeyValues, ipBuf *[16]byte) (string, bool) {
	switch d.kind {
	case dimIP:
		if !info.ClientIP.IsValid() {
			return "", false
		}
		*ipBuf = api.KeyAddr(info.ClientIP, d.bits).As16()
		return unsafeString(ipBuf[:]), true
	case dimRoute:
		return info.RouteID, true
	case dimHeader:
		return kv.Header(r, d.name)
	case dimQuery:
		return kv.Query(r, d.name)
	case dimCookie:
		return kv.Cookie(r, d.name)
	}
	return "", true
}

// HeaderPart returns the value a header:NAME key part reads (name in
// canonical form): the header's first value, and false when it is absent or
// empty. Limits and degrade plans key on it alike; requests where it is
// ambiguous are refused first (KeyCheck).
func HeaderPart(h http.Header, name string) (string, bool) {
	if vs := h[name]; len(vs) > 0 && vs[0] != "" {
		return vs[0], true
	}
	return "", false
}

// QueryPart returns the value a query:NAME key part reads from a raw query:
// the first parameter whose decoded name is name, percent-decoded (as
// url.ParseQuery decodes it), and false when it is absent or empty. It
// allocates only for a percent-encoded value.
func QueryPart(rawQuery, name string) (string, bool) {
	return nonEmpty(queryValue(rawQuery, name))
}

// CookiePart returns the value a cookie:NAME key part reads from the Cookie
// header lines: the first cookie named name, without its double quotes, and
// false when it is absent or empty.
func CookiePart(lines []string, name string) (string, bool) {
	return nonEmpty(cookieValue(lines, name))
}

// nonEmpty makes an empty value a missing one: stacks disagree on whether
// "?user=" carries a parameter (Python's parse_qs drops it), and an empty
// header or cookie is absent to most applications, so empty and missing are
// one key and alternating them gains nothing.
func nonEmpty(v string, ok bool) (string, bool) { return v, ok && v != "" }

// ipText is the ip part of a key as text: an IPv4 client's address, an
// IPv6 client's prefix ("2001:db8:1:2::/64"; the address itself for /128),
// or "<missing>".
func ipText(a netip.Addr, bits int) string {
	if !a.IsValid() {
		return "<missing>"
	}
	k := api.KeyAddr(a, bits)
	if k.Is4() || bits >= 128 {
		return k.String()
	}
	return netip.PrefixFrom(k, bits).String()
}

// Markers written before each part so that the encoding is injective: a
// missing part differs from an empty one, and lengths delimit values.
const (
	partPresent = 0x01
	partMissing = 0x02
)

// hash returns the 64-bit hash of the request's key under ks (maphash, the
// process-wide seed). It does not allocate (except for percent-encoded query
// values). A missing part (header, query parameter or cookie absent, or no
// client address) hashes as a "missing" marker distinct from every value,
// including the empty one: all requests that omit it share one key (with the
// other parts), so omitting a header never escapes the limit; it lands in
// one shared bucket.
func (ks *keySpec) hash(r *http.Request, info *RequestInfo) uint64 { return ks.hashKV(r, info, nil) }

// hashKV is hash reading the parts kv holds from kv (see KeyValues).
func (ks *keySpec) hashKV(r *http.Request, info *RequestInfo, kv *KeyValues) uint64 {
	if len(ks.dims) == 0 {
		return 0
	}
	var h maphash.Hash
	h.SetSeed(hashSeed)
	var ipBuf [16]byte
	var lenBuf [9]byte
	for i := range ks.dims {
		v, ok := ks.dims[i].part(r, info, kv, &ipBuf)
		if !ok {
			h.WriteByte(partMissing)
			continue
		}
		lenBuf[0] = partPresent
		binary.LittleEndian.PutUint64(lenBuf[1:], uint64(len(v)))
		h.Write(lenBuf[:])
		h.WriteString(v)
	}
	return h.Sum64()
}

// text returns the request's key as text, for logs and for cluster limiters
// (whose stores need the same key on every node):
// "ip=10.1.2.3|header:X-User=#5d41402abc4b2a76b9719d91". The client IP and
// route are written as they are; header, query and cookie values are written
// as a digest (# and the first 12 bytes of their sha256 in hex), because such
// keys are often credentials (Authorization, session cookies, API keys) that
// must reach neither the logs nor Redis — the same value always gives the
// same digest, so a client can still be followed across lines and nodes. A
// missing part reads "<missing>".
func (ks *keySpec) text(r *http.Request, info *RequestInfo) string { return ks.textKV(r, info, nil) }

// textKV is text reading the parts kv holds from kv (see KeyValues).
func (ks *keySpec) textKV(r *http.Request, info *RequestInfo, kv *KeyValues) string {
	if len(ks.dims) == 0 {
		return "global"
	}
	var b strings.Builder
	var ipBuf [16]byte
	for i := range ks.dims {
		d := &ks.dims[i]
		if i > 0 {
			b.WriteByte('|')
		}
		b.WriteString(d.spec)
		b.WriteByte('=')
		if d.kind == dimIP {
			b.WriteString(ipText(info.ClientIP, d.bits))
			continue
		}
		v, ok := d.part(r, info, kv, &ipBuf)
		switch {
		case !ok:
			b.WriteString("<missing>")
		case d.kind == dimRoute:
			b.WriteString(v)
		default:
			sum := sha256.Sum256([]byte(v))
			b.WriteByte('#')
			b.WriteString(hex.EncodeToString(sum[:12]))
		}
	}
	return b.String()
}

// queryValue returns the first value of the query parameter name in a raw
// query, decoded, and whether it is present. Names are compared decoded.
func queryValue(raw, name string) (string, bool) {
	for raw != "" {
		var kv string
		kv, raw, _ = strings.Cut(raw, "&")
		k, v, _ := strings.Cut(kv, "=")
		if k != name {
			if !strings.ContainsAny(k, "%+") {
				continue
			}
			if dk, err := url.QueryUnescape(k); err != nil || dk != name {
				continue
			}
		}
		if strings.ContainsAny(v, "%+") {
			if dv, err := url.QueryUnescape(v); err == nil {
				return dv, true
			}
		}
		return v, true
	}
	return "", false
}

// cookieValue returns the value of the first cookie named name in the Cookie
// header lines, without its quotes, and whether it is present.
func cookieValue(lines []string, name string) (string, bool) {
	for _, line := range lines {
		for line != "" {
			var part string
			part, line, _ = strings.Cut(line, ";")
			part = strings.TrimSpace(part)
			k, v, ok := strings.Cut(part, "=")
			if !ok || k != name {
				continue
			}
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			return v, true
		}
	}
	return "", false
}

// costSpec says how many units a request costs for one limit.
type costSpec struct {
	header   string // canonical header name, or ""
	perUnit  int64  // body bytes per unit, or 0
	capacity int64  // what an unknown-length body is charged
}

func newCostSpec(c *api.Cost, capacity int64) costSpec {
	if c == nil {
		return costSpec{}
	}
	return costSpec{header: http.CanonicalHeaderKey(c.Header), perUnit: c.BodyBytesPerUnit, capacity: capacity}
}

// cost returns the request's cost:
//
//   - no cost rule: 1.
//   - header: the header's value as a decimal integer. Missing, malformed or
//     less than 1 costs 1, the least a request can cost, so that omitting or
//     garbling the header gains nothing; a value too large for int64 costs
//     MaxInt64 (above every capacity, so it is rejected).
//   - bodyBytesPerUnit: Content-Length divided by it, rounded up, at least 1.
//     A body of unknown length (chunked, or HTTP/2 without content-length)
//     cannot be measured before it is read, so it is charged the limit's
//     whole capacity (burst, or rate for windows): streaming a body does not
//     dodge its cost, and clients that want a fair charge send Content-Length.
func (c *costSpec) cost(r *http.Request) int64 {
	switch {
	case c.header != "":
		vs := r.Header[c.header]
		if len(vs) == 0 {
			return 1
		}
		n, err := strconv.ParseInt(strings.TrimSpace(vs[0]), 10, 64)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange && n > 0 {
				return math.MaxInt64
			}
			return 1
		}
		return max(1, n)
	case c.perUnit > 0:
		if r.ContentLength < 0 {
			return max(1, c.capacity)
		}
		if r.ContentLength == 0 {
			return 1
		}
		return (r.ContentLength-1)/c.perUnit + 1
	}
	return 1
}

// exemptList is a limit's exempt client prefixes.
type exemptList []netip.Prefix

func parseExempt(cidrs []string) (exemptList, error) {
	var ex exemptList
	for i, s := range cidrs {
		p, err := api.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("exempt[%d]: %w", i, err)
		}
		ex = append(ex, p)
	}
	return ex, nil
}

func (ex exemptList) contains(a netip.Addr) bool {
	if len(ex) == 0 || !a.IsValid() {
		return false
	}
	a = a.Unmap()
	for _, p := range ex {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
