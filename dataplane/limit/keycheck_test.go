package limit

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
	if NewKeyCheck([]string{"ip", "route"}, nil) != nil {
		t.Fatal("a key without query, header or cookie parts needs no check")
	}
}
