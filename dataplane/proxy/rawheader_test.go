package proxy

import (
	"bytes"
	"net/textproto"
	"slices"
	"strings"
	"testing"
)

// nextRawFieldRef is NextRawField as the obvious composition of bytes
// functions (what each pass did before it).
func nextRawFieldRef(raw []byte) (name, value, rest []byte, colon bool) {
	line, rest, _ := bytes.Cut(raw, []byte{'\n'})
	line = bytes.TrimSuffix(line, []byte{'\r'})
	name, value, colon = bytes.Cut(line, []byte{':'})
	return name, bytes.Trim(value, " \t"), rest, colon
}

func TestNextRawField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc, raw         string
		name, value, rest string
		colon             bool
	}{
		{"a field", "Host: a.test\r\nX: 1\r\n\r\n", "Host", "a.test", "X: 1\r\n\r\n", true},
		{"an empty value", "X-Empty:\r\n\r\n", "X-Empty", "", "\r\n", true},
		{"a value of only spaces", "X-Blank:    \r\n", "X-Blank", "", "", true},
		{"tab padding", "X-Tab:\t \tv a\t \r\n", "X-Tab", "v a", "", true},
		{"no space after the colon", "X:v\r\n", "X", "v", "", true},
		{"a colon in the value", "X-Url: http://a.test:80/\r\n", "X-Url", "http://a.test:80/", "", true},
		{"the last line without CRLF", "X: last", "X", "last", "", true},
		{"the last line with CR only", "X: last\r", "X", "last", "", true},
		{"a bare LF", "X: 1\nY: 2\n", "X", "1", "Y: 2\n", true},
		{"a CR inside the value", "X: a\rb\r\n", "X", "a\rb", "", true},
		{"a blank line", "\r\nX: 1\r\n", "", "", "X: 1\r\n", false},
		{"a bare LF blank line", "\n", "", "", "", false},
		{"no colon", "NoColon\r\n", "NoColon", "", "", false},
		{"an empty name", ": v\r\n", "", "v", "", true},
		{"a folded line", " folded\r\n", " folded", "", "", false},
		{"a lowercase name", "user-agent: h2load\r\n\r\n", "user-agent", "h2load", "\r\n", true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			name, value, rest, colon := NextRawField([]byte(tc.raw))
			if string(name) != tc.name || string(value) != tc.value || string(rest) != tc.rest || colon != tc.colon {
				t.Fatalf("NextRawField(%q) = %q %q %q %v, want %q %q %q %v", tc.raw, name, value, rest, colon,
					tc.name, tc.value, tc.rest, tc.colon)
			}
			checkNextRawField(t, []byte(tc.raw))
		})
	}
}

// checkNextRawField compares NextRawField with the bytes functions over
// every line of raw.
func checkNextRawField(t *testing.T, raw []byte) {
	t.Helper()
	for len(raw) > 0 {
		name, value, rest, colon := NextRawField(raw)
		n, v, r, c := nextRawFieldRef(raw)
		if !bytes.Equal(name, n) || !bytes.Equal(value, v) || !bytes.Equal(rest, r) || colon != c {
			t.Fatalf("NextRawField(%q) = %q %q %q %v, bytes functions give %q %q %q %v", raw, name, value, rest, colon, n, v, r, c)
		}
		raw = rest
	}
}

func FuzzNextRawField(f *testing.F) {
	for _, s := range []string{"Host: a\r\nX:\r\n\r\n", "X: \t \r\n", "a:b", "\r\n\r\n", "x\n:y\r\r\n", " a: b\r\n", "::\t:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		checkNextRawField(t, []byte(raw))
	})
}

func TestEqualFoldASCII(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc, b, s string
		want       bool
	}{
		{"equal", "Host", "Host", true},
		{"another case", "hOST", "Host", true},
		{"a dash", "x-request-id", "X-Request-Id", true},
		{"another length", "Hos", "Host", false},
		{"another letter", "Hosx", "Host", false},
		{"the case bit of a non-letter", "X\rRequest-Id", "X-Request-Id", false}, // '\r'|0x20 == '-'
		{"@ is not `", "@", "`", false},
		{"the Kelvin sign folds to k, but is longer", "\u212aeep-Alive", "Keep-Alive", false},
		{"empty", "", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := EqualFoldASCII([]byte(tc.b), tc.s); got != tc.want {
				t.Errorf("EqualFoldASCII(%q, %q) = %v, want %v", tc.b, tc.s, got, tc.want)
			}
			if isASCII(tc.s) && EqualFoldASCII([]byte(tc.b), tc.s) != equalFoldRef(tc.b, tc.s) {
				t.Errorf("EqualFoldASCII(%q, %q) is not bytes.EqualFold at one length", tc.b, tc.s)
			}
		})
	}
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// equalFoldRef is what EqualFoldASCII replaces: a length test, then
// bytes.EqualFold.
func equalFoldRef(b, s string) bool { return len(b) == len(s) && bytes.EqualFold([]byte(b), []byte(s)) }

// FuzzEqualFoldASCII: for an ASCII s, EqualFoldASCII is bytes.EqualFold of
// strings of one length.
func FuzzEqualFoldASCII(f *testing.F) {
	for _, s := range slices.Concat(gatewayNames, []string{"Host", "Content-Length"}) {
		f.Add(strings.ToLower(s), s)
		f.Add(strings.Replace(s, "k", "\u212a", 1), s)
	}
	f.Add("ſ", "s")
	f.Add("X\r", "X-")
	f.Fuzz(func(t *testing.T, b, s string) {
		if !isASCII(s) {
			return
		}
		if got, want := EqualFoldASCII([]byte(b), s), equalFoldRef(b, s); got != want {
			t.Fatalf("EqualFoldASCII(%q, %q) = %v, bytes.EqualFold %v", b, s, got, want)
		}
	})
}

func TestCanonicalizeKey(t *testing.T) {
	t.Parallel()
	tests := []struct{ desc, name, want string }{
		{"canonical already", "Content-Type", "Content-Type"},
		{"lower case", "user-agent", "User-Agent"},
		{"upper case", "X-REQUEST-ID", "X-Request-Id"},
		{"mixed", "x-FoRwArDeD-for", "X-Forwarded-For"},
		{"one letter", "x", "X"},
		{"digits and dashes", "x-1-b--c", "X-1-B--C"},
		{"a dash first", "-a", "-A"},
		{"other token bytes", "a.b_c~d", "A.b_c~d"},
		{"not a token: left as it is", "x y", "x y"},
		{"not a token after a change", "user-agent ", "user-agent "},
		{"not a token, non-ASCII", "caf\u00e9", "caf\u00e9"},
		{"not a token: a NUL before a letter to change", "\x00A0", "\x00A0"},
		{"empty", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			b := []byte(tc.name)
			CanonicalizeKey(b)
			if string(b) != tc.want {
				t.Errorf("CanonicalizeKey(%q) = %q, want %q", tc.name, b, tc.want)
			}
			if want := textproto.CanonicalMIMEHeaderKey(tc.name); string(b) != want {
				t.Errorf("CanonicalizeKey(%q) = %q, textproto gives %q", tc.name, b, want)
			}
		})
	}
}

// FuzzCanonicalizeKey: CanonicalizeKey is textproto.CanonicalMIMEHeaderKey.
func FuzzCanonicalizeKey(f *testing.F) {
	for _, s := range []string{"user-agent", "Host", "X-REQUEST-ID", "a b", "-", "x--y", "a\xffb", "ÿ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		b := []byte(name)
		CanonicalizeKey(b)
		if want := textproto.CanonicalMIMEHeaderKey(name); string(b) != want {
			t.Fatalf("CanonicalizeKey(%q) = %q, textproto gives %q", name, b, want)
		}
	})
}

func TestIsToken(t *testing.T) {
	t.Parallel()
	for c := range 256 {
		if got, want := IsToken([]byte{byte(c)}), c < 0x80 && c > ' ' && c != 0x7f && !strings.ContainsRune("\"(),/:;<=>?@[\\]{}", rune(c)); got != want {
			t.Errorf("IsToken(%q) = %v, want %v", byte(c), got, want)
		}
	}
	if !IsToken(nil) || !IsToken([]byte("X-Request-Id")) || IsToken([]byte("X Y")) {
		t.Error("IsToken on names")
	}
}

// BenchmarkNextRawField splits a browser-like header block, against the
// bytes functions it replaces.
func BenchmarkNextRawField(b *testing.B) {
	raw := []byte("Host: shop.test\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\nAccept: text/html,*/*;q=0.8\r\n" +
		"Accept-Language: en-GB,en;q=0.9\r\nAccept-Encoding: gzip, br\r\nCookie: s=abc123; theme=dark\r\nConnection: keep-alive\r\n\r\n")
	for _, bc := range []struct {
		name string
		next func([]byte) ([]byte, []byte, []byte, bool)
	}{{"NextRawField", NextRawField}, {"bytes", nextRawFieldRef}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				for rest := raw; len(rest) > 0; {
					var name []byte
					name, _, rest, _ = bc.next(rest)
					n += len(name)
				}
			}
			_ = n
		})
	}
}

// BenchmarkCanonicalizeKey canonicalizes names as browsers and HTTP/2-era
// clients spell them (each copied back first), against textproto's.
func BenchmarkCanonicalizeKey(b *testing.B) {
	names := []string{"Host", "user-agent", "Accept-Encoding", "sec-fetch-mode", "X-Request-Id", "cookie"}
	buf := make([]byte, 64)
	b.Run("CanonicalizeKey", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, n := range names {
				k := buf[:copy(buf, n)]
				CanonicalizeKey(k)
			}
		}
	})
	b.Run("textproto", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, n := range names {
				_ = textproto.CanonicalMIMEHeaderKey(n)
			}
		}
	})
}
