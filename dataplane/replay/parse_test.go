package replay

import (
	"errors"
	"net/http"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseLines(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 4, 10, 0, 5, 0, time.UTC).UnixNano()
	tests := []struct {
		desc string
		f    Format
		line string
		want Record
	}{
		{"combined", FormatCombined,
			`192.0.2.1 - alice [04/Dec/2026:11:00:05 +0100] "GET /api/orders?page=2 HTTP/1.1" 200 512 "https://shop.example.com/" "Mozilla/5.0 (X11)"`,
			Record{Time: at, IP: netip.MustParseAddr("192.0.2.1"), Method: "GET", Host: "default.example", RawPath: "/api/orders", RawQuery: "page=2",
				Header: http.Header{"Referer": {"https://shop.example.com/"}, "User-Agent": {"Mozilla/5.0 (X11)"}}}},
		{"common format, IPv6, absolute target", FormatCombined,
			`2001:db8::7 - - [04/Dec/2026:10:00:05 +0000] "POST http://api.example.com/v1/x HTTP/1.1" 201 0`,
			Record{Time: at, IP: netip.MustParseAddr("2001:db8::7"), Method: "POST", Host: "api.example.com", RawPath: "/v1/x"}},
		{"nginx and Apache escapes", FormatCombined,
			`::ffff:192.0.2.9 - - [04/Dec/2026:10:00:05 +0000] "GET /q HTTP/1.0" 200 1 "-" "say \x22hi\x22 \"there\" \\o/"`,
			Record{Time: at, IP: netip.MustParseAddr("192.0.2.9"), Method: "GET", Host: "default.example", RawPath: "/q",
				Header: http.Header{"User-Agent": {`say "hi" "there" \o/`}}}},
		{"json, RFC 3339, headers", FormatJSON,
			`{"ts": "2026-12-04T10:00:05Z", "ip": "192.0.2.1", "method": "GET", "host": "shop.example.com", "path": "/a?b=c", "headers": {"x-api-key": "k1", "cookie": ["a=1", "b=2"]}, "status": 200}`,
			Record{Time: at, IP: netip.MustParseAddr("192.0.2.1"), Method: "GET", Host: "shop.example.com", RawPath: "/a", RawQuery: "b=c",
				Header: http.Header{"X-Api-Key": {"k1"}, "Cookie": {"a=1", "b=2"}}}},
		{"json, Unix seconds to the nanosecond", FormatJSON,
			`{"ts": 1796378405.000000001, "ip": "192.0.2.1", "method": "GET", "path": "/"}`,
			Record{Time: at + 1, IP: netip.MustParseAddr("192.0.2.1"), Method: "GET", Host: "default.example", RawPath: "/"}},
		{"json, Unix seconds with an exponent", FormatJSON,
			`{"ts": 1.796378405e9, "ip": "192.0.2.1", "method": "GET", "path": "/"}`,
			Record{Time: at, IP: netip.MustParseAddr("192.0.2.1"), Method: "GET", Host: "default.example", RawPath: "/"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			r, err := NewReader(strings.NewReader(tc.line+"\n"), tc.f)
			if err != nil {
				t.Fatal(err)
			}
			r.Host = "default.example"
			var got Record
			if err := r.Next(&got); err != nil {
				t.Fatalf("Next: %v", err)
			}
			tc.want.Line = 1
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestLongLine: a line over MaxLineBytes is one unparseable line, and the
// next line reads normally.
func TestLongLine(t *testing.T) {
	t.Parallel()
	log := strings.Repeat("x", MaxLineBytes+10) + "\n" + `{"ts": 1, "ip": "192.0.2.1", "method": "GET", "path": "/"}` + "\n"
	r, _ := NewReader(strings.NewReader(log), FormatJSON)
	var rec Record
	var le *LineError
	if err := r.Next(&rec); !errors.As(err, &le) || le.Line != 1 || !strings.Contains(le.Err, "longer than") {
		t.Fatalf("first line: %v, want line 1 too long", err)
	}
	if err := r.Next(&rec); err != nil || rec.Line != 2 || rec.Time != int64(time.Second) {
		t.Fatalf("second line: %v %+v", err, rec)
	}
}

func TestBadFormat(t *testing.T) {
	t.Parallel()
	if _, err := NewReader(strings.NewReader(""), "apache"); err == nil || !strings.Contains(err.Error(), `"apache"`) {
		t.Fatalf("NewReader with format apache: %v", err)
	}
}
