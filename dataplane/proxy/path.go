package proxy

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/sluicegw/sluice/api"
)

// SlashPolicy is what the gateway does with an encoded slash (%2F) in a
// request path, so that it and the upstream never disagree about the path:
// upstreams differ (some decode %2F into a separator before routing, some
// keep it inside its segment), and a gateway that matched "/api%2Forders" as
// one segment while the upstream routed it as "/api/orders" would let the
// request dodge the limits of /api/orders. The zero value is SlashReject.
type SlashPolicy uint8

const (
	// SlashReject refuses a path with an encoded slash: 400 problem+json.
	// The default: no upstream can read such a path differently.
	SlashReject SlashPolicy = iota
	// SlashDecode turns %2F into "/" before cleaning and matching, and
	// forwards the decoded path: for upstreams that decode %2F.
	SlashDecode
	// SlashKeep keeps %2F inside its segment, matched and forwarded
	// encoded: for upstreams that never decode it.
	SlashKeep
)

// String returns "reject", "decode" or "keep".
func (p SlashPolicy) String() string {
	switch p {
	case SlashDecode:
		return "decode"
	case SlashKeep:
		return "keep"
	}
	return "reject"
}

// MarshalText returns String's text.
func (p SlashPolicy) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText reads "reject", "decode" or "keep" (the --encoded-slashes
// flag), and refuses anything else with an error naming the choices.
func (p *SlashPolicy) UnmarshalText(b []byte) error {
	switch string(b) {
	case "reject":
		*p = SlashReject
	case "decode":
		*p = SlashDecode
	case "keep":
		*p = SlashKeep
	default:
		return fmt.Errorf("encoded-slash policy %q is not reject, decode or keep", b)
	}
	return nil
}

// hasEncodedSlash reports whether a canonical escaped path (see
// canonicalEscaped: hex in upper case) has an encoded slash.
func hasEncodedSlash(p string) bool { return strings.Contains(p, "%2F") }

// RequestPath returns the path r is matched on and forwarded with: the
// request's escaped path (r.URL.EscapedPath, so an encoded slash stays
// encoded) put in canonical escaped form (see canonicalEscaped) and then
// cleaned with api.CleanPath. With decodeSlashes, %2F is decoded to a real
// slash before cleaning. It does not allocate when the path is already
// canonical and clean, which is the common case.
func RequestPath(r *http.Request, decodeSlashes bool) string {
	return normalizePath(r.URL.EscapedPath(), decodeSlashes)
}

func normalizePath(p string, decodeSlashes bool) string {
	p = canonicalEscaped(p, decodeSlashes)
	if isClean(p) {
		return p
	}
	return api.CleanPath(p)
}

// isClean reports whether api.CleanPath(p) == p, without allocating: p is
// rooted and has no empty, "." or ".." segment (a trailing slash is kept by
// CleanPath, so a final empty segment is allowed).
func isClean(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	start := 1 // first byte of the current segment
	for i := 1; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		seg := p[start:i]
		switch {
		case seg == "" && i < len(p): // "//"
			return false
		case seg == "." || seg == "..":
			return false
		}
		start = i + 1
	}
	return true
}

// canonicalEscaped rewrites an escaped path into the one canonical escaped
// spelling, so that equivalent spellings (RFC 3986 §6.2.2) match alike:
//
//   - percent-encoded unreserved characters (ALPHA DIGIT - . _ ~) are decoded,
//     so "%2e%2e" becomes ".." and is then resolved by cleaning: an upstream
//     that decodes it would otherwise see a path the gateway never matched;
//   - the hex digits of the escapes that remain are upper-cased ("%2f" → "%2F");
//   - bytes that may not appear raw in a path (non-ASCII, spaces, controls,
//     "%" not followed by two hex digits, ...) are percent-encoded;
//   - "%2F" is decoded to "/" only when decodeSlashes is set.
//
// It returns p itself, without allocating, when nothing changes.
func canonicalEscaped(p string, decodeSlashes bool) string {
	i := 0
	for ; i < len(p); i++ {
		c := p[i]
		if c == '%' {
			if i+2 < len(p) && ishex(p[i+1]) && ishex(p[i+2]) {
				d := unhex(p[i+1])<<4 | unhex(p[i+2])
				if !isUnreserved(d) && !(d == '/' && decodeSlashes) && isUpperHex(p[i+1]) && isUpperHex(p[i+2]) {
					i += 2
					continue
				}
			}
			break
		}
		if !isPathByte(c) {
			break
		}
	}
	if i == len(p) {
		return p
	}
	var b strings.Builder
	b.Grow(len(p) + 8)
	b.WriteString(p[:i])
	for ; i < len(p); i++ {
		c := p[i]
		if c == '%' && i+2 < len(p) && ishex(p[i+1]) && ishex(p[i+2]) {
			d := unhex(p[i+1])<<4 | unhex(p[i+2])
			if isUnreserved(d) || (d == '/' && decodeSlashes) {
				b.WriteByte(d)
			} else {
				writeEscape(&b, d)
			}
			i += 2
			continue
		}
		if isPathByte(c) && c != '%' {
			b.WriteByte(c)
			continue
		}
		writeEscape(&b, c)
	}
	return b.String()
}

const upperhex = "0123456789ABCDEF"

func writeEscape(b *strings.Builder, c byte) {
	b.WriteByte('%')
	b.WriteByte(upperhex[c>>4])
	b.WriteByte(upperhex[c&15])
}

// isPathByte reports whether c may appear unescaped in a path: an RFC 3986
// pchar (unreserved, sub-delims, ":", "@"), "/", or "%" (checked by the caller).
func isPathByte(c byte) bool {
	if isUnreserved(c) {
		return true
	}
	switch c {
	case '/', '%', '!', '$', '&', '\'', '(', ')', '*', '+', ',', ';', '=', ':', '@':
		return true
	}
	return false
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isUpperHex(c byte) bool { return '0' <= c && c <= '9' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}
