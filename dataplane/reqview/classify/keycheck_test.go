package classify

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestKeyCheck: the ambiguity rule part by part, with the message that names
// the part; requests that need no refusal pass, whatever else they carry.
func TestKeyCheck(t *testing.T) {
	t.Parallel()
	kc := NewKeyCheck([]string{"ip", "query:user"}, []string{"header:x-api-key", "cookie:sid"}, []string{"query:user"})
	tests := []struct {
		desc   string
		target string
		lines  []string // "Name: value"
		want   string   // substring of the error; "" for none
	}{
		{"nothing keyed present", "/?a=1&a=2", []string{"Cookie: a=1; a=2", "X-Other: 1", "X-Other: 2"}, ""},
		{"plain parts", "/?user=alice", []string{"X-Api-Key: k", "Cookie: sid=s"}, ""},
		{"repeated query", "/?user=a&user=b", nil, `query parameter "user" is repeated`},
		{"repeated query, other case", "/?user=a&User=b", nil, `query parameter "user" is repeated`},
		{"undecodable query value", "/?user=%zz", nil, `query parameter "user" has a malformed percent-encoding`},
		{"semicolon", "/?user=a;b=1", nil, `query parameter "user" is in a pair with a ";"`},
		{"encoded name", "/?%75ser=a", nil, `query parameter "user" is written as "%75ser"`},
		{"space in name", "/?user%20=a", nil, `is written as "user%20"`},
		{"NUL-terminated name", "/?user=a&user%00x=b", nil, `query parameter "user" is repeated`},
		{"control character", "/?user=a%0Ab", nil, "contains a control character"},
		{"invalid UTF-8", "/?user=%C3%28", nil, "is not valid UTF-8"},
		{"too many parameters", "/?user=a" + strings.Repeat("&", MaxQueryParams), nil, "more than 10000 parameters"},
		{"repeated header", "/", []string{"X-Api-Key: a", "x-api-key: b"}, `header "X-Api-Key" is repeated`},
		{"underscore alias", "/", []string{"X_API_KEY: a"}, `header "X-Api-Key" is also sent as "X_api_key"`},
		{"tab in header", "/", []string{"X-Api-Key: a\tb"}, "contains a control character"},
		{"comma in header is one value", "/", []string{"X-Api-Key: a, b"}, ""},
		{"header in Connection", "/", []string{"X-Api-Key: a", "Connection: keep-alive, x-api-key"}, "is named in Connection"},
		{"cookie in Connection", "/", []string{"Cookie: sid=a", "Connection: Cookie"}, `header "Cookie" is named in Connection`},
		{"repeated cookie", "/", []string{"Cookie: sid=a; sid=b"}, `cookie "sid" is repeated`},
		{"two cookie lines", "/", []string{"Cookie: sid=a", "Cookie: b=1"}, `header "Cookie" is repeated`},
		{"space before cookie equals", "/", []string{"Cookie: sid =a"}, "has white space around its name"},
		{"cookie other case", "/", []string{"Cookie: Sid=a"}, `cookie "sid" is written as "Sid"`},
		{"cookie without value", "/", []string{"Cookie: sid"}, `has no "="`},
		{"cookie quoted", "/", []string{`Cookie: sid="a"`}, ""},
		{"cookie bad byte", "/", []string{"Cookie: sid=a]b"}, "has a malformed value"},
		{"too many cookies", "/", []string{"Cookie: sid=a" + strings.Repeat(";", MaxCookies)}, "more than 3000 cookies"},
		// Issue 26: cookie values are keyed percent-decoded; what decoders
		// could read two ways is refused.
		{"percent-encoded cookie", "/", []string{"Cookie: sid=%61pikey1"}, ""},
		{"cookie with a lone %", "/", []string{"Cookie: sid=100%"}, ""},
		{"cookie with valid and malformed escapes", "/", []string{"Cookie: sid=%61%zz"}, `cookie "sid" has a malformed percent-encoding`},
		{"cookie decoding to invalid UTF-8", "/", []string{"Cookie: sid=%C3%28"}, `cookie "sid" is not valid UTF-8`},
		{"cookie decoding to NUL", "/", []string{"Cookie: sid=a%00"}, `cookie "sid" contains a control character`},
		{"cookie encoded twice", "/", []string{"Cookie: sid=%2561pikey1"}, `cookie "sid" is percent-encoded twice`},
		{"other cookies are not decoded", "/", []string{"Cookie: sid=a; x=%zz%41; y=%2541"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("GET", tt.target, nil)
			for _, l := range tt.lines {
				k, v, _ := strings.Cut(l, ": ")
				r.Header.Add(k, v)
			}
			err := kc.Check(r)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
	// A limit with cookieDecoding: raw keys the value as sent, so nothing
	// about its escapes is ambiguous to it; beside a key that decodes the
	// same cookie, the decoding rule still applies.
	raw := NewKeyCheckOf(RuleKey{Parts: []string{"cookie:sid"}, RawCookies: true})
	both := NewKeyCheckOf(RuleKey{Parts: []string{"cookie:sid", "cookie:t"}, RawCookies: true},
		RuleKey{Parts: []string{"ip", "query:q", "header:X-A", "cookie:u", "cookie:sid"}})
	for _, c := range []struct {
		kc        *KeyCheck
		cookie    string
		refused   bool
		dec, rawv string
	}{
		{raw, "sid=%2561", false, "", "%2561"},
		{raw, "sid=%61%zz", false, "", "%61%zz"},
		{both, "sid=%2561", true, "", ""},
		{both, "sid=%61b", false, "ab", "%61b"},
	} {
		r := httptest.NewRequest("GET", "/?q=Q", nil)
		r.Header.Set("X-A", "A")
		r.Header.Set("Cookie", "t=%54; u=%55; "+c.cookie)
		v := testInfo{}.View(r)
		err := c.kc.ReadView(&v)
		if (err != nil) != c.refused {
			t.Errorf("%s: error %v, want refused %v", c.cookie, err, c.refused)
			continue
		}
		if c.refused {
			continue
		}
		if got, _ := v.RawCookiePart("sid"); got != c.rawv {
			t.Errorf("%s: raw part %q, want %q", c.cookie, got, c.rawv)
		}
		if got, _ := v.CookiePart("sid"); c.dec != "" && got != c.dec {
			t.Errorf("%s: decoded part %q, want %q", c.cookie, got, c.dec)
		}
		if c.kc == both {
			q, _ := v.QueryPart("q")
			h, _ := v.HeaderPart("X-A")
			tv, _ := v.RawCookiePart("t")
			u, _ := v.CookiePart("u")
			if q != "Q" || h != "A" || tv != "%54" || u != "U" {
				t.Errorf("%s: the other parts read %q %q %q %q; want Q A %%54 U", c.cookie, q, h, tv, u)
			}
		}
	}
	if NewKeyCheck([]string{"ip", "route"}, nil) != nil {
		t.Fatal("a key without query, header or cookie parts needs no check")
	}
}

// TestCookieKeyAllocs: checking and hashing a cookie part costs no
// allocation when the value has no escape (the common case: session ids),
// and one, the decoded value, when it has.
func TestCookieKeyAllocs(t *testing.T) {
	key := []string{"ip", "cookie:sid"}
	ks, err := ParseKey(key, 0)
	if err != nil {
		t.Fatal(err)
	}
	kc := NewKeyCheck(key)
	for _, c := range []struct {
		cookie string
		allocs float64
	}{
		{"theme=dark; sid=s-0123456789abcdef; _ga=GA1.2.3", 0},
		{"theme=dark; sid=s-%30123456789abcdef; _ga=GA1.2.3", 1},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Cookie", c.cookie)
		n := testing.AllocsPerRun(200, func() {
			v := testInfo{RouteID: "r"}.View(r)
			if err := kc.ReadView(&v); err != nil {
				t.Fatal(err)
			}
			ks.Hash(&v)
		})
		if n != c.allocs {
			t.Errorf("%s: %v allocations, want %v", c.cookie, n, c.allocs)
		}
	}
}
