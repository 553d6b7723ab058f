package classify

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"unsafe"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/reqview"
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
	dimCookieRaw // a cookie part of a limit with cookieDecoding: raw
	dimJWT       // a verified claim (jwt:CLAIM)
	dimSDK       // a value the service passed to the SDK (sdk:NAME)
)

// dim is one key dimension of a limit.
type dim struct {
	kind dimKind
	name string // header (canonical), query or cookie name, or claim path
	spec string // as written: "ip", "header:X-User", ...
	bits int    // ip: the prefix length IPv6 clients are keyed by (1-128)
}

// Key is a compiled rule key (a limit's or a degrade plan's key): its
// dimensions in rule order. "global" parts contribute nothing; a key of only
// "global" parts is one key for everyone. It is the one reading of key parts
// for every rule: each part is read from the request view (see package
// reqview for what each kind means) and encoded the same way for Hash,
// StableHash and Text. The zero value is the global key. It is immutable and
// safe for concurrent use.
type Key struct {
	dims []dim
}

// ParseKey compiles a rule key as written in the rule document ([ip],
// [header:X-User, query:page], ...); ipv6Prefix is the length of the prefix
// IPv6 clients are keyed by (0 means api.DefaultIPv6Prefix). Errors name the
// bad part (api.ValidateKey).
func ParseKey(key []string, ipv6Prefix int) (Key, error) {
	var ks Key
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
		case "jwt":
			d.kind = dimJWT
		case "sdk":
			d.kind = dimSDK
		default:
			return ks, fmt.Errorf("%q is not a key dimension", k)
		}
		ks.dims = append(ks.dims, d)
	}
	return ks, nil
}

// ParseLimitKey is ParseKey for limit l (normalized): its key over its
// ipv6Prefix, with its cookie parts read raw when l's cookieDecoding is raw.
func ParseLimitKey(l *api.Limit) (Key, error) {
	ks, err := ParseKey(l.Key, l.IPv6Prefix)
	if err != nil || l.CookieDecoding != api.CookieRaw {
		return ks, err
	}
	for i := range ks.dims {
		if ks.dims[i].kind == dimCookie {
			ks.dims[i].kind = dimCookieRaw
		}
	}
	return ks, nil
}

func (ks Key) String() string {
	parts := make([]string, len(ks.dims))
	for i, d := range ks.dims {
		parts[i] = d.spec
		switch d.kind {
		case dimIP:
			parts[i] += "/" + strconv.Itoa(d.bits) // keys over other prefixes hash apart
		case dimCookieRaw:
			parts[i] += "/raw" // and so do raw cookie values
		}
	}
	return strings.Join(parts, ",")
}

// part returns the value of one dimension for a request and whether it is
// present (an empty value is not). It reads through the view: the value a
// key check kept, else the first occurrence (requests where that is
// ambiguous are refused before any rule decides, see KeyCheck). It
// allocates only for a percent-encoded query parameter or cookie the check
// did not read.
func (d *dim) part(v *reqview.View, ipBuf *[16]byte) (string, bool) {
	switch d.kind {
	case dimIP:
		if !v.ClientIP.IsValid() {
			return "", false
		}
		*ipBuf = api.KeyAddr(v.ClientIP, d.bits).As16()
		return unsafeString(ipBuf[:]), true
	case dimRoute:
		return v.RouteID, true
	case dimHeader:
		return v.HeaderPart(d.name)
	case dimQuery:
		return v.QueryPart(d.name)
	case dimCookie:
		return v.CookiePart(d.name)
	case dimCookieRaw:
		return v.RawCookiePart(d.name)
	case dimJWT:
		// The verified claims (reqview.Claims): missing when the request
		// has no valid token (an invalid one never gets this far).
		return v.Claims.Get(d.name)
	case dimSDK:
		// What the service passed with the call (reqview.View.Keys).
		p := v.Keys[d.name]
		return p, p != ""
	}
	return "", true
}

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

// Hash returns the 64-bit hash of the request's key (maphash, the
// process-wide seed: the hash node-scope limiters store keys by). It does not
// allocate (except for percent-encoded query values no check read). A
// missing part (header, query parameter or cookie absent, or no client
// address) hashes as a "missing" marker distinct from every value, including
// the empty one: all requests that omit it share one key (with the other
// parts), so omitting a header never escapes the limit; it lands in one
// shared bucket.
func (ks *Key) Hash(v *reqview.View) uint64 {
	if len(ks.dims) == 0 {
		return 0
	}
	var h maphash.Hash
	h.SetSeed(hashSeed)
	var ipBuf [16]byte
	var lenBuf [9]byte
	for i := range ks.dims {
		p, ok := ks.dims[i].part(v, &ipBuf)
		if !ok {
			h.WriteByte(partMissing)
			continue
		}
		lenBuf[0] = partPresent
		binary.LittleEndian.PutUint64(lenBuf[1:], uint64(len(p)))
		h.Write(lenBuf[:])
		h.WriteString(p)
	}
	return h.Sum64()
}

// FNV-1a, the hash of StableHash.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvBytes(h uint64, b []byte) uint64 {
	for _, c := range b {
		h = (h ^ uint64(c)) * fnvPrime
	}
	return h
}

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return h
}

// StableHash returns the request's key hashed with FNV-1a over the same
// encoding as Hash (the same parts, markers and lengths), so that it is the
// same on every node and in every process: what degrade plans shed
// consistently by. The global key hashes to the FNV offset. It does not
// allocate (except as Hash).
func (ks *Key) StableHash(v *reqview.View) uint64 {
	h := uint64(fnvOffset)
	var ipBuf [16]byte
	var lenBuf [9]byte
	for i := range ks.dims {
		p, ok := ks.dims[i].part(v, &ipBuf)
		if !ok {
			h = (h ^ partMissing) * fnvPrime
			continue
		}
		lenBuf[0] = partPresent
		binary.LittleEndian.PutUint64(lenBuf[1:], uint64(len(p)))
		h = fnvString(fnvBytes(h, lenBuf[:]), p)
	}
	return h
}

// StableHashString is StableHash's FNV-1a over a string, for keys a caller
// builds itself (seeds, tests).
func StableHashString(s string) uint64 { return fnvString(fnvOffset, s) }

// hashSeed is the process-wide seed of Hash and HashString. One seed for
// every limiter's store lets a recompiled limit carry its keys' states over
// without the keys: a store keeps hashes only.
var hashSeed = maphash.MakeSeed()

// HashString is Hash's maphash (the process-wide seed) over a string, for
// keys a caller builds itself (a limiter's Take(key)).
func HashString(s string) uint64 { return maphash.String(hashSeed, s) }

// Global reports whether ks is the global key (no part but "global"): one
// key for every request.
func (ks Key) Global() bool { return len(ks.dims) == 0 }

// Text returns the request's key as text, for logs and for cluster limiters
// (whose stores need the same key on every node):
// "ip=10.1.2.3|header:X-User=#5d41402abc4b2a76b9719d91". The client IP and
// route are written as they are; header, query and cookie values are written
// as a digest (# and the first 12 bytes of their sha256 in hex), because such
// keys are often credentials (Authorization, session cookies, API keys) that
// must reach neither the logs nor Redis — the same value always gives the
// same digest, so a client can still be followed across lines and nodes. A
// missing part reads "<missing>".
func (ks *Key) Text(v *reqview.View) string { return ks.text(v, true) }

// ValueText is Text without the parts' names ("10.1.2.3|#5d41402abc4b2a76b9719d91"):
// the key of a cluster limit that names a shared bucket (api.Limit.Bucket),
// where keys match by their parts' values in order, so that a gateway's
// header:X-User and a service's sdk:user carrying one value are one key.
func (ks *Key) ValueText(v *reqview.View) string { return ks.text(v, false) }

func (ks *Key) text(v *reqview.View, names bool) string {
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
		if names {
			b.WriteString(d.spec)
			b.WriteByte('=')
		}
		if d.kind == dimIP {
			b.WriteString(ipText(v.ClientIP, d.bits))
			continue
		}
		p, ok := d.part(v, &ipBuf)
		switch {
		case !ok:
			b.WriteString("<missing>")
		case d.kind == dimRoute:
			b.WriteString(p)
		default:
			sum := sha256.Sum256([]byte(p))
			b.WriteByte('#')
			b.WriteString(hex.EncodeToString(sum[:12]))
		}
	}
	return b.String()
}

// unsafeString views b as a string without copying. The caller must not
// modify b while the string is in use, nor let the string outlive b.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
