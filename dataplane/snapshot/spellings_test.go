package snapshot

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// spellings returns n spellings of value (len(value) ≥ 5): the i-th writes
// the bytes of value whose bit is set in i as %XX escapes, in lower-case hex
// for odd i; the plain one first.
func spellings(value string, n int) []string {
	var out []string
	for mask := range n {
		var b strings.Builder
		for i := 0; i < len(value); i++ {
			switch {
			case mask&(1<<i) == 0:
				b.WriteByte(value[i])
			case mask%2 == 1:
				fmt.Fprintf(&b, "%%%02x", value[i])
			default:
				fmt.Fprintf(&b, "%%%02X", value[i])
			}
		}
		out = append(out, b.String())
	}
	return out
}

// TestPercentEncodedSpellingsShareABucket is issue 26's cookie reproduction
// on the request path: 30 spellings of one session id (sid=%61pikey1,
// sid=ap%69key1, ...) on a limit of 5 per 60s are one client, as PHP's
// $_COOKIE and Express read them: 5 served, 25 rejected. A limit with
// cookieDecoding: raw keys each spelling apart (for upstreams that read the
// value raw); query values are decoded too; header values are taken as
// sent, as every stack reads them.
func TestPercentEncodedSpellingsShareABucket(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	now := time.Unix(1_000_000, 0).UnixNano()
	s := MustCompile(t, fmt.Sprintf(`namespace: t
routes:
  - {id: cookie, match: {pathPrefix: /cookie}, upstream: {targets: [{url: %[1]q}]}}
  - {id: raw, match: {pathPrefix: /raw}, upstream: {targets: [{url: %[1]q}]}}
  - {id: query, match: {pathPrefix: /query}, upstream: {targets: [{url: %[1]q}]}}
  - {id: header, match: {pathPrefix: /header}, upstream: {targets: [{url: %[1]q}]}}
limits:
  - {id: per-session, routes: [cookie], key: ["cookie:sid"], algorithm: sliding_window, rate: 5, period: 60s}
  - {id: per-session-raw, routes: [raw], key: ["cookie:sid"], cookieDecoding: raw, algorithm: sliding_window, rate: 5, period: 60s}
  - {id: per-user, routes: [query], key: ["query:user"], algorithm: sliding_window, rate: 5, period: 60s}
  - {id: per-key, routes: [header], key: ["header:X-Api-Key"], algorithm: sliding_window, rate: 5, period: 60s}
`, up.URL), func() int64 { return now })
	gw := httptest.NewServer(s)
	defer gw.Close()
	sp := spellings("apikey1", 30)
	tests := []struct {
		desc     string
		path     string
		set      func(r *http.Request, spelling string)
		served   int
		rejected int
	}{
		{"cookie, percent (the default)", "/cookie", func(r *http.Request, v string) { r.Header.Set("Cookie", "theme=dark; sid="+v) }, 5, 25},
		{"cookie, raw", "/raw", func(r *http.Request, v string) { r.Header.Set("Cookie", "sid="+v) }, 30, 0},
		{"query", "/query", func(r *http.Request, v string) { r.URL.RawQuery = "user=" + v }, 5, 25},
		{"header, as sent", "/header", func(r *http.Request, v string) { r.Header.Set("X-Api-Key", v) }, 30, 0},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			served, rejected := 0, 0
			for _, v := range sp {
				req, _ := http.NewRequest("GET", gw.URL+tc.path, nil)
				tc.set(req, v)
				res, err := gw.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				switch res.StatusCode {
				case http.StatusOK:
					served++
				case http.StatusTooManyRequests:
					rejected++
				default:
					t.Fatalf("%s: status %d", v, res.StatusCode)
				}
			}
			if served != tc.served || rejected != tc.rejected {
				t.Errorf("%d served, %d rejected of %d spellings (%s, ...); want %d, %d", served, rejected, len(sp), strings.Join(sp[:3], ", "), tc.served, tc.rejected)
			}
		})
	}
}
