package proxy

import "bytes"

// The raw header block of an HTTP/1 request, as the fasthttp engine keeps it
// (fasthttp.RequestHeader.RawHeaders: the field lines as received, the
// final blank line included), is read by three passes per request: the
// gateway's strict parsing, the request view's header (package snapshot)
// and the upstream request head (appendFastHead). They split it with
// NextRawField, compare names with EqualFoldASCII and IsToken, and the view
// canonicalizes them with CanonicalizeKey, so that they read every line the
// same way.

// NextRawField splits the first line off raw, a raw header block: the
// field's name (the bytes before the line's first colon, or the whole line
// when it has none), its value (the bytes after the colon, spaces and tabs
// trimmed at both ends), whether the line has a colon, and the rest of raw
// after the line's LF (nil when the line is the last and has no LF). The CR
// of a CRLF line end is not part of the line. A blank line gives an empty
// name and colon false.
//
// It is bytes.Cut at LF, bytes.TrimSuffix of CR, bytes.Cut at ':' and
// bytes.Trim(value, " \t") in one function: one bytes.IndexByte per line
// end and per colon, the trims by hand.
func NextRawField(raw []byte) (name, value, rest []byte, colon bool) {
	line := raw
	if i := bytes.IndexByte(raw, '\n'); i >= 0 {
		line, rest = raw[:i], raw[i+1:]
	}
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	i := bytes.IndexByte(line, ':')
	if i < 0 {
		return line, nil, rest, false
	}
	name, value = line[:i], line[i+1:]
	for len(value) > 0 && (value[0] == ' ' || value[0] == '\t') {
		value = value[1:]
	}
	for n := len(value); n > 0 && (value[n-1] == ' ' || value[n-1] == '\t'); n = len(value) {
		value = value[:n-1]
	}
	return name, value, rest, true
}

// EqualFoldASCII reports whether b and s are equal with ASCII letters
// compared without case. For an ASCII s (a header name) it is
// len(b) == len(s) && bytes.EqualFold(b, []byte(s)): a non-ASCII rune that
// folds to an ASCII letter (the Kelvin sign, the long s) is longer than
// that letter, so it never matches an s of b's length.
func EqualFoldASCII(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c, d := b[i], s[i]
		if c == d {
			continue
		}
		// Equal but for the case bit, and a letter.
		if c|0x20 != d|0x20 || c|0x20 < 'a' || c|0x20 > 'z' {
			return false
		}
	}
	return true
}

// IsToken reports whether b is made of token bytes only (RFC 9110 §5.6.2:
// tchar); an empty b is a token here.
func IsToken(b []byte) bool {
	for _, c := range b {
		if !tokenByte[c] {
			return false
		}
	}
	return true
}

// tokenByte tells the bytes of a token (tchar).
var tokenByte = func() (t [256]bool) {
	for c := range 256 {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), byte(c)) >= 0
	}
	return t
}()

// CanonicalizeKey rewrites header name in place in canonical form, as
// textproto.CanonicalMIMEHeaderKey (and fasthttp's normalizing) gives it for
// a token: the first letter and each letter after a '-' upper case, the
// other letters lower case. A name that is not a token is left as it is.
// A name already canonical (most are) is read once and not written.
func CanonicalizeKey(name []byte) {
	up := uint(1) // first, or after a '-'
	for i, c := range name {
		if d := canonByte[up&1<<8|uint(c)]; d != c {
			if tokenByte[c] && IsToken(name[i+1:]) {
				canonicalizeFrom(name[i:], up)
			}
			return // or not a token
		}
		up = b2u(c == '-')
	}
}

// canonicalizeFrom is CanonicalizeKey's rewrite of a token's bytes from the
// first that is not canonical; up is 1 when that one is the first of the
// name or follows a '-'.
func canonicalizeFrom(b []byte, up uint) {
	for i, c := range b {
		c = canonByte[up&1<<8|uint(c)]
		b[i] = c
		up = b2u(c == '-')
	}
}

func b2u(b bool) uint {
	if b {
		return 1
	}
	return 0
}

// canonByte[1<<8|c] is token byte c where a name's first letter or a
// letter after a '-' is (upper case), canonByte[c] elsewhere (lower case).
// A byte that is not a token's maps to another byte (c^0x80), so that it
// never reads as canonical.
var canonByte = func() (t [512]byte) {
	for c := range 256 {
		t[c], t[1<<8|c] = byte(c), byte(c)
		switch {
		case !tokenByte[c]:
			t[c], t[1<<8|c] = byte(c)^0x80, byte(c)^0x80
		case 'a' <= c && c <= 'z':
			t[1<<8|c] = byte(c) - 'a' + 'A'
		case 'A' <= c && c <= 'Z':
			t[c] = byte(c) - 'A' + 'a'
		}
	}
	return t
}()
