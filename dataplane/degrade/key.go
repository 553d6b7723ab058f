package degrade

import (
	"fmt"
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/limit"
)

type keyKind uint8

const (
	keyIP keyKind = iota
	keyRoute
	keyGlobal
	keyHeader
	keyQuery
	keyCookie
)

type keyPart struct {
	kind keyKind
	name string // canonical header name, query parameter or cookie name
}

func compileKey(key []string) ([]keyPart, error) {
	parts := make([]keyPart, 0, len(key))
	for _, k := range key {
		if err := api.ValidateKey(k); err != nil {
			return nil, fmt.Errorf("key: %w", err)
		}
		switch k {
		case "ip":
			parts = append(parts, keyPart{kind: keyIP})
		case "route":
			parts = append(parts, keyPart{kind: keyRoute})
		case "global":
			parts = append(parts, keyPart{kind: keyGlobal})
		default:
			kind, name, _ := strings.Cut(k, ":")
			switch kind {
			case "header":
				parts = append(parts, keyPart{kind: keyHeader, name: textproto.CanonicalMIMEHeaderKey(name)})
			case "query":
				parts = append(parts, keyPart{kind: keyQuery, name: name})
			case "cookie":
				parts = append(parts, keyPart{kind: keyCookie, name: name})
			}
		}
	}
	return parts, nil
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return h
}

func fnvSep(h uint64) uint64 { return (h ^ 0xff) * fnvPrime }

// HashKey returns the 64-bit hash Admit takes for a client key that the
// caller has already built as a string (for example the limit package's key
// for the same dimensions). Equal strings give equal hashes.
func HashKey(key string) uint64 { return fnvString(fnvOffset, key) }

// KeyHash returns the hash of the request's client key over the rule's key
// dimensions (default [ip]): clientIP (as api.ClientIP resolved it; an IPv6
// client by its /64, see api.KeyAddr), routeID, and header, query parameter
// and cookie values read exactly as limits read them (limit.HeaderPart,
// QueryPart, CookiePart: a query value percent-decoded, so that respelling
// it does not draw another shed decision), each dimension separated so that
// values cannot run into one another. An absent or empty header, parameter
// or cookie hashes as empty. Requests whose parts are ambiguous are refused
// before (limit.KeyCheck covers degrade keys too). It does not allocate,
// except to decode a percent-encoded query value.
func (c *Controller) KeyHash(r *http.Request, clientIP netip.Addr, routeID string) uint64 {
	return c.KeyHashValues(r, nil, clientIP, routeID)
}

// KeyHashValues is KeyHash reading the parts kv holds (from the route's
// limit.KeyCheck.Read) from kv instead of parsing them again; kv may be nil.
func (c *Controller) KeyHashValues(r *http.Request, kv *limit.KeyValues, clientIP netip.Addr, routeID string) uint64 {
	h := uint64(fnvOffset)
	if c == nil {
		return h
	}
	for _, p := range c.key {
		switch p.kind {
		case keyIP:
			b := api.KeyAddr(clientIP, api.DefaultIPv6Prefix).As16() // an IPv6 client by its /64
			for _, x := range b {
				h = (h ^ uint64(x)) * fnvPrime
			}
		case keyRoute:
			h = fnvString(h, routeID)
		case keyGlobal:
		case keyHeader:
			if v, ok := kv.Header(r, p.name); ok {
				h = fnvSep(fnvString(h, v))
			}
		case keyQuery:
			if v, ok := kv.Query(r, p.name); ok {
				h = fnvSep(fnvString(h, v))
			}
		case keyCookie:
			if v, ok := kv.Cookie(r, p.name); ok {
				h = fnvSep(fnvString(h, v))
			}
		}
		h = fnvSep(h)
	}
	return h
}
