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
