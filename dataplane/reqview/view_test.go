package reqview

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"net/netip"
	"testing"
)

// TestCheckedValues: after a check ends well, the view answers the names it
// checked with the recorded values (not the request's); after a check fails,
// or for a name it did not check, the view reads the request.
func TestCheckedValues(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("GET", "/?u=raw&p=1", nil)
	r.Header.Set("X-User", "raw")
	r.Header.Set("X-Other", "other")
	r.Header.Set("Cookie", "sid=raw")
	names := &KeyNames{Queries: []string{"u"}, Headers: []string{"X-User"}, Cookies: []string{"sid"}}
	tests := []struct {
		desc   string
		ok     bool
		q      string
		h      string
		c      string
		p      string // query p: never checked
		xOther string // header X-Other: never checked
	}{
		{"a check that passed answers with its values", true, "q-checked", "h-checked", "c-checked", "1", "other"},
		{"a check that failed leaves the request's values", false, "raw", "raw", "raw", "1", "other"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			v := FromRequest(r)
			v.StartCheck(names)
			v.SetChecked(0, "q-checked")
			v.SetChecked(1, "h-checked")
			v.SetChecked(2, "c-checked")
			v.EndCheck(names, tc.ok)
			for _, g := range []struct{ what, got, want string }{
				{"query u", first(v.QueryPart("u")), tc.q},
				{"header X-User", first(v.HeaderPart("X-User")), tc.h},
				{"cookie sid", first(v.CookiePart("sid")), tc.c},
				{"query p", first(v.QueryPart("p")), tc.p},
				{"header X-Other", first(v.HeaderPart("X-Other")), tc.xOther},
			} {
				if g.got != g.want {
					t.Errorf("%s = %q, want %q", g.what, g.got, g.want)
				}
			}
		})
	}
	// More names than the inline buffer holds.
	many := &KeyNames{Headers: []string{"A", "B", "C", "D", "E", "F", "G", "H", "I", "J"}}
	v := FromRequest(r)
	v.StartCheck(many)
	for i := range many.Headers {
		v.SetChecked(i, many.Headers[i]+"-v")
	}
	v.EndCheck(many, true)
	if got, _ := v.HeaderPart("J"); got != "J-v" {
		t.Fatalf("tenth checked header = %q", got)
	}
	if _, ok := v.HeaderPart("Z"); ok {
		t.Fatal("an absent unchecked header reads as present")
	}
}

func first(s string, _ bool) string { return s }

// TestLogDecision: a decision line names the trace, the request, the client
// and the rule, then the caller's attributes; without a view the request
// fields are empty.
func TestLogDecision(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, nil))
	v := FromRequest(httptest.NewRequest("POST", "/api/x?y=1", nil))
	v.Path, v.RouteID, v.RequestID = "/api/x", "api", "req-7"
	v.ClientIP = netip.MustParseAddr("192.0.2.9")
	v.Trace = Trace{Parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	LogDecision(l, slog.LevelWarn, &v, MsgRateLimit, "per-ip", "reject", slog.Int("limit", 5))
	LogDecision(l, slog.LevelInfo, nil, MsgDegrade, "dg", "shed")
	LogDecision(nil, slog.LevelInfo, &v, MsgDegrade, "dg", "shed") // no logger: nothing
	dec := json.NewDecoder(&buf)
	var lines []map[string]any
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2", len(lines))
	}
	want := map[string]any{"msg": MsgRateLimit, "level": "WARN", "traceId": "4bf92f3577b34da6a3ce929d0e0e4736",
		"requestId": "req-7", "method": "POST", "path": "/api/x", "ip": "192.0.2.9", "route": "api",
		"rule": "per-ip", "decision": "reject", "limit": float64(5)}
	for k, w := range want {
		if lines[0][k] != w {
			t.Errorf("%s = %v, want %v", k, lines[0][k], w)
		}
	}
	if lines[1]["traceId"] != "" || lines[1]["requestId"] != "" || lines[1]["rule"] != "dg" {
		t.Errorf("line without a view: %v", lines[1])
	}
}

// TestDecodeCookie: cookie values decoded as PHP's $_COOKIE and Express read
// them, and the values those two (or an application decoding twice) could
// read two ways refused.
func TestDecodeCookie(t *testing.T) {
	t.Parallel()
	tests := []struct{ raw, want, why string }{
		{"apikey1", "apikey1", ""},
		{"%61pikey1", "apikey1", ""},
		{"ap%69key1", "apikey1", ""},
		{"%61%70%69%6B%65%79%31", "apikey1", ""},
		{"%61%70%69%6b%65%79%31", "apikey1", ""},
		{"a+b", "a+b", ""},           // "+" is not a space in a cookie
		{"a%2Bb", "a+b", ""},         // an escaped "+" is one
		{"%C3%A9t%C3%A9", "été", ""}, // UTF-8
		{"100%", "100%", ""},         // only malformed escapes: every decoder keeps them
		{"%zz%", "%zz%", ""},
		{"%61%zz", "%61%zz", "has a malformed percent-encoding"},
		{"%6", "%6", ""},
		{"a%61%6", "a%61%6", "has a malformed percent-encoding"},
		{"%C3%28", "%C3%28", "is not valid UTF-8"},
		{"%FF", "%FF", "is not valid UTF-8"},
		{"a%00b", "a%00b", "contains a control character"},
		{"a%0Ab", "a%0Ab", "contains a control character"},
		{"%2561", "%2561", "is percent-encoded twice"},
		{"%25zz", "%zz", ""}, // decodes to a "%" that is no escape
		{"%25", "%", ""},
	}
	for _, tc := range tests {
		got, why := DecodeCookie(tc.raw)
		if got != tc.want || why != tc.why {
			t.Errorf("DecodeCookie(%q) = %q, %q; want %q, %q", tc.raw, got, why, tc.want, tc.why)
		}
	}
	lines := []string{"a=1; sid=%61pikey1; b=2"}
	if v, _ := CookiePart(lines, "sid"); v != "apikey1" {
		t.Errorf("CookiePart = %q, want it decoded", v)
	}
	if v, _ := RawCookiePart(lines, "sid"); v != "%61pikey1" {
		t.Errorf("RawCookiePart = %q, want it as sent", v)
	}
}
