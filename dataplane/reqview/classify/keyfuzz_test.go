package classify

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/answer"
	"github.com/sluicegw/sluice/dataplane/proxy"
)

// fuzzKey is the key FuzzKeyExtraction limits on: one part of each kind that
// a client controls.
var fuzzKey = []string{"query:user", "header:X-Api-Key", "cookie:sid"}

// keyView is what one side read of the three parts of fuzzKey; "" is a
// missing part (the gateway keys an empty value as missing). several is
// set when the upstream read a part more than once, or when the gateway's
// checked value (kept in the reqview.View) differs from parsing the request again.
type keyView struct {
	parts   [3]string
	several string
}

// keyRig is a gateway front (net/http server → KeyCheck → key parts →
// proxy.Upstream.Forward) and a Go upstream, both on loopback, each
// recording what it read per request path.
type keyRig struct {
	front    string // address
	n        atomic.Int64
	mu       sync.Mutex
	keyed    map[string]keyView // by path: what the gateway keyed on
	upstream map[string]keyView // by path: what the upstream read
}

func newKeyRig(tb testing.TB) *keyRig {
	tb.Helper()
	rig := &keyRig{keyed: map[string]keyView{}, upstream: map[string]keyView{}}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v keyView
		q, _ := url.ParseQuery(r.URL.RawQuery)
		users := q["user"]
		keys := r.Header.Values("X-Api-Key")
		var sids []string
		for _, c := range r.Cookies() {
			if c.Name == "sid" {
				sids = append(sids, c.Value)
			}
		}
		for i, vs := range [][]string{users, keys, sids} {
			if len(vs) > 1 {
				v.several = fmt.Sprintf("%s read %q", fuzzKey[i], vs)
			}
			if len(vs) > 0 {
				v.parts[i] = vs[0]
			}
		}
		if len(sids) > 0 {
			// cookie:sid is keyed as decoding upstreams read it: PHP's
			// $_COOKIE and Express's cookie parser must read one value.
			php, express := phpCookie(sids[0]), expressCookie(sids[0])
			if php != express {
				v.several = fmt.Sprintf("cookie %q: PHP reads %q, Express %q", sids[0], php, express)
			}
			v.parts[2] = php
		}
		rig.mu.Lock()
		rig.upstream[r.URL.Path] = v
		rig.mu.Unlock()
	}))
	tb.Cleanup(up.Close)
	tr := proxy.NewTransport(proxy.Settings{Logger: slog.New(slog.DiscardHandler)})
	rs := &api.RuleSet{Namespace: "fuzz", Routes: []api.Route{{ID: "all", Upstream: api.Upstream{Targets: []api.Target{{URL: up.URL}}}}}}
	rt, err := proxy.NewRouter(rs.Normalize().Routes, tr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { rt.CloseIdle(); tr.CloseIdle() })
	ks, err := ParseKey(fuzzKey, 0)
	if err != nil {
		tb.Fatal(err)
	}
	kc := NewKeyCheck(fuzzKey)
	front := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := testInfo{RouteID: "all", ClientIP: netip.MustParseAddr("192.0.2.1")}
		checked, plainView := info.View(r), info.View(r)
		if err := kc.ReadView(&checked); err != nil {
			answer.WriteProblem(w, r, http.StatusBadRequest, "Ambiguous request", err.Error())
			return
		}
		m := rt.Match(r)
		var v keyView
		var ipBuf [16]byte
		for i := range ks.dims {
			v.parts[i], _ = ks.dims[i].part(&checked, &ipBuf)
			if plain, _ := ks.dims[i].part(&plainView, &ipBuf); plain != v.parts[i] {
				v.several = fmt.Sprintf("%s: the check kept %q, parsing again reads %q", ks.dims[i].spec, v.parts[i], plain)
			}
		}
		rig.mu.Lock()
		rig.keyed[m.Path] = v
		rig.mu.Unlock()
		if o := m.Route.Upstream.Forward(w, r, m); o.Aborted {
			panic(http.ErrAbortHandler)
		}
	}))
	front.Config.MaxHeaderBytes = proxy.MaxHeaderBytes
	front.Config.ErrorLog = nil
	front.Start()
	tb.Cleanup(front.Close)
	rig.front = front.Listener.Addr().String()
	return rig
}

// send writes a raw request with the given raw query, header lines and
// Cookie value to the front and returns the path it was sent to and the
// answer's status (0 when the connection failed).
func (rig *keyRig) send(tb testing.TB, query, lines, cookie string) (string, int) {
	path := fmt.Sprintf("/f/%d", rig.n.Add(1))
	var b strings.Builder
	b.WriteString("GET " + path)
	if query != "" {
		b.WriteString("?" + query)
	}
	b.WriteString(" HTTP/1.1\r\nHost: fuzz.test\r\n")
	for _, l := range strings.Split(lines, "\n") {
		if l = strings.TrimRight(l, "\r"); l != "" {
			b.WriteString(l + "\r\n")
		}
	}
	if cookie != "" {
		b.WriteString("Cookie: " + cookie + "\r\n")
	}
	b.WriteString("Connection: close\r\n\r\n")
	c, err := net.DialTimeout("tcp", rig.front, 5*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	// A request the server waits on (a Content-Length among the lines) is
	// given up quickly: it is neither keyed nor forwarded.
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, b.String()); err != nil {
		return path, 0
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return path, 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return path, resp.StatusCode
}

// check asserts the property for the request sent to path: the gateway
// either refused it (it keyed on nothing and forwarded nothing) or the
// upstream read each key part once, as exactly the value the gateway keyed
// on.
func (rig *keyRig) check(tb testing.TB, path string, status int) {
	tb.Helper()
	rig.mu.Lock()
	k, keyed := rig.keyed[path]
	u, got := rig.upstream[path]
	delete(rig.keyed, path)
	delete(rig.upstream, path)
	rig.mu.Unlock()
	switch {
	case !keyed && got:
		tb.Fatalf("%s reached the upstream without being keyed", path)
	case !keyed:
		return // refused by the server or by KeyCheck
	case k.several != "":
		tb.Fatalf("%s: %s", path, k.several)
	case !got:
		tb.Fatalf("%s was keyed on %q but did not reach the upstream (status %d)", path, k.parts, status)
	case u.several != "":
		tb.Fatalf("%s: keyed on %q, the upstream %s", path, k.parts, u.several)
	case k.parts != u.parts:
		tb.Fatalf("%s: keyed on %q, the upstream read %q", path, k.parts, u.parts)
	}
}

// phpCookie is a cookie value (as Go's parser read it, quotes removed) as
// PHP's $_COOKIE reads it: php_raw_url_decode, which decodes every valid
// %XX escape, leaves any other "%" as it is, and keeps "+".
func phpCookie(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '%' && i+2 < len(v) && ishex(v[i+1]) && ishex(v[i+2]) {
			b.WriteByte(unhex(v[i+1])<<4 | unhex(v[i+2]))
			i += 2
			continue
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// expressCookie is a cookie value as Express's cookie parser (npm cookie)
// reads it: decodeURIComponent when it holds a "%", the value unchanged
// when that throws (a malformed escape, or bytes that are not UTF-8).
func expressCookie(v string) string {
	if !strings.Contains(v, "%") {
		return v
	}
	d, err := url.PathUnescape(v)
	if err != nil || !utf8.ValidString(d) {
		return v
	}
	return d
}

// FuzzKeyExtraction: whatever raw query, header lines and Cookie header a
// client sends, the gateway either refuses the request as ambiguous, or each
// key part it keys on (query:user, header:X-Api-Key, cookie:sid) is exactly
// what a Go upstream parses from the forwarded request, the cookie as
// decoding upstreams read it (PHP's and Express's decoders, which must then
// agree). The seed corpus runs in make test; to fuzz:
// go test -fuzz=FuzzKeyExtraction ./dataplane/limit/
func FuzzKeyExtraction(f *testing.F) {
	seeds := []struct{ query, lines, cookie string }{
		{"user=alice", "X-Api-Key: k1", "sid=s1"},
		{"user=%zz1&user=alice", "", ""},
		{"user=x;1&user=alice", "", ""},
		{"a=1;user=bob", "", ""},
		{"us%65r=alice&user=bob", "", ""},
		{"USER=a&user=b", "", ""},
		{"user=a+b%2Bc", "", ""},
		{"user=%00", "", ""},
		{"user=%ff", "", ""},
		{"user=&user", "", ""},
		{"a=%zz&user=ok", "", ""},
		{"user=ok&a=1;b=2", "", ""},
		{"", "X-Api-Key: r1\nX-Api-Key: real", ""},
		{"", "x-api-key: r1\nX-API-KEY: real", ""},
		{"", "X-Api-Key: r1, real", ""},
		{"", "X_Api_Key: r1\nX-Api-Key: real", ""},
		{"", "X-Api-Key: real\nConnection: X-Api-Key", ""},
		{"", "Connection: close, cookie", "sid=real"},
		{"", "X-Api-Key:   spaced  ", ""},
		{"", "X-Api-Key: a\tb", ""},
		{"", "", "sid =real; sid=r123"},
		{"", "", "sid=r1; sid=real"},
		{"", "", "SID=r1; sid=real"},
		{"", "", `a=1; sid="quoted"`},
		{"", "", "sid=a[b"},
		{"", "", "sid"},
		{"", "Cookie: sid=other", "sid=real"},
		{"", "", "sid=; sid=x"},
		{"", "", "sid=%61pikey1"},
		{"", "", "sid=ap%69key1+x"},
		{"", "", "sid=100%"},
		{"", "", "sid=%61%zz"},
		{"", "", "sid=%C3%28"},
		{"", "", "sid=%C3%A9"},
		{"", "", "sid=%2561"},
		{"", "", "sid=%00"},
		{"", "", `sid="%61b"`},
	}
	for _, s := range seeds {
		f.Add(s.query, s.lines, s.cookie)
	}
	rig := newKeyRig(f)
	f.Fuzz(func(t *testing.T, query, lines, cookie string) {
		path, status := rig.send(t, query, lines, cookie)
		rig.check(t, path, status)
	})
}
