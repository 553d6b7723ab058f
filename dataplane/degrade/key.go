package degrade

import (
	"fmt"
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"

	"github.com/sluicegw/sluice/api"
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
// client by its /64, see api.KeyAddr), routeID,
// header values, raw query parameter values and cookie values (not
// unescaped), each dimension separated so that values cannot run into one
// another. An absent header, parameter or cookie hashes as empty. It does not
// allocate.
func (c *Controller) KeyHash(r *http.Request, clientIP netip.Addr, routeID string) uint64 {
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
			for _, v := range r.Header[p.name] {
				h = fnvSep(fnvString(h, v))
			}
		case keyQuery:
			h = hashQuery(h, r.URL.RawQuery, p.name)
		case keyCookie:
			for _, line := range r.Header["Cookie"] {
				h = hashCookie(h, line, p.name)
			}
		}
		h = fnvSep(h)
	}
	return h
}

func hashQuery(h uint64, q, name string) uint64 {
	for q != "" {
		var kv string
		kv, q, _ = strings.Cut(q, "&")
		k, v, _ := strings.Cut(kv, "=")
		if k == name {
			h = fnvSep(fnvString(h, v))
		}
	}
	return h
}

func hashCookie(h uint64, line, name string) uint64 {
	for line != "" {
		var kv string
		kv, line, _ = strings.Cut(line, ";")
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		if k == name {
			h = fnvSep(fnvString(h, strings.Trim(v, `"`)))
		}
	}
	return h
}
