package snapshot

import (
	"bufio"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// fillRef is the request view's header as fasthttp's AllInOrder reads it,
// as fill built it before it read the raw lines itself (AllInOrder
// canonicalizes the names in place in the raw header too).
func fillRef(h *fasthttp.RequestHeader) http.Header {
	out := http.Header{}
	for k, v := range h.AllInOrder() {
		out[string(k)] = append(out[string(k)], string(v))
	}
	return out
}

// TestFastViewHeader: the view's header names are canonical, one value per
// line in the order received, values trimmed of spaces and tabs; and the raw
// header that goes upstream carries the canonical names, as AllInOrder left
// them.
func TestFastViewHeader(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x-long-name-", 6) // 72 bytes: past the length bits
	tests := []struct {
		desc, fields string
		want         http.Header
	}{
		{"names to canonicalize", "host: h\r\nuser-agent: h2load\r\nX-REQUEST-ID: a\r\n",
			http.Header{"Host": {"h"}, "User-Agent": {"h2load"}, "X-Request-Id": {"a"}}},
		{"duplicates in two cases", "Host: h\r\nx-a: 1\r\nX-B: 2\r\nX-A: 3\r\nx-A: 4\r\n",
			http.Header{"Host": {"h"}, "X-A": {"1", "3", "4"}, "X-B": {"2"}}},
		{"names of one length", "Host: h\r\nAbcd: 1\r\nWxyz: 2\r\nabcd: 3\r\n",
			http.Header{"Host": {"h"}, "Abcd": {"1", "3"}, "Wxyz": {"2"}}},
		{"an empty value, a value of spaces, tab padding", "Host: h\r\nX-E:\r\nX-S:    \r\nX-T:\t a b \t\r\n",
			http.Header{"Host": {"h"}, "X-E": {""}, "X-S": {""}, "X-T": {"a b"}}},
		{"long names", "Host: h\r\n" + long + "a: 1\r\n" + long + "b: 2\r\n" + strings.ToUpper(long) + "A: 3\r\n",
			http.Header{"Host": {"h"}, http.CanonicalHeaderKey(long + "a"): {"1", "3"}, http.CanonicalHeaderKey(long + "b"): {"2"}}},
		{"a bare LF line end", "Host: h\nx-a: 1\r\n", http.Header{"Host": {"h"}, "X-A": {"1"}}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			head := "GET / HTTP/1.1\r\n" + tc.fields + "\r\n"
			x := fastExchanges.Get().(*fastExchange)
			defer func() { x.reset(); fastExchanges.Put(x) }()
			ctx := fastCtx(t, head)
			x.ctx = ctx
			v := x.fill(ctx, nil)
			got := v.Header().Clone()
			delete(got, "Traceparent") // started by fill
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("header %q, want %q", got, tc.want)
			}
			checkFill(t, head)
		})
	}
}

// checkFill compares fill's header and the raw header it leaves with
// AllInOrder's on head, a request head fasthttp parses and strictFast
// accepts.
func checkFill(t *testing.T, head string) {
	t.Helper()
	var a, b fasthttp.Request
	if a.Header.Read(bufio.NewReader(strings.NewReader(head))) != nil {
		return
	}
	_ = b.Header.Read(bufio.NewReader(strings.NewReader(head)))
	want := fillRef(&b.Header)
	x := fastExchanges.Get().(*fastExchange)
	defer func() { x.reset(); fastExchanges.Put(x) }()
	x.fillHeader(a.Header.RawHeaders())
	if !reflect.DeepEqual(x.reqH, want) && (len(x.reqH) > 0 || len(want) > 0) {
		t.Fatalf("head %q: header %q, AllInOrder gives %q", head, x.reqH, want)
	}
	if got, want := string(a.Header.RawHeaders()), string(b.Header.RawHeaders()); got != want {
		t.Fatalf("head %q: raw header left %q, AllInOrder leaves %q", head, got, want)
	}
}

// FuzzFastViewHeader: on any header fasthttp parses and strictFast would
// accept (names are tokens, no folding), fill reads what AllInOrder reads.
func FuzzFastViewHeader(f *testing.F) {
	for _, s := range []string{"Host: h\r\nuser-agent: x\r\n", "a: 1\r\nA: 2\r\nb:\r\nB: \t \r\n", "x-Y-z: a b\r\nX-y-Z:c\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, fields string) {
		for _, line := range strings.Split(fields, "\n") {
			line = strings.TrimSuffix(line, "\r")
			name, _, ok := strings.Cut(line, ":")
			if line == "" {
				continue
			}
			if !ok || name == "" || !isTokenString(name) || strings.ContainsAny(line, "\x00\r") {
				return
			}
		}
		checkFill(t, "GET / HTTP/1.1\r\n"+fields+"\r\n")
	})
}

func isTokenString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}
