package snapshot

import (
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/dataplane/proxy"
	"github.com/sluicegw/sluice/dataplane/reqview"
)

// fakeExchange is an Exchange of function fields and a recorded answer: a
// serving stack that is not net/http, as a second engine would be.
type fakeExchange struct {
	h       http.Header
	status  int
	body    strings.Builder
	routed  []string // the route of each Routed call
	forward func(u *proxy.Upstream, m proxy.Match) proxy.Outcome
	paths   []string // the path of each Forward call
}

func (x *fakeExchange) Header() http.Header { return x.h }
func (x *fakeExchange) WriteHeader(code int) {
	if x.status == 0 {
		x.status = code
	}
}
func (x *fakeExchange) Write(b []byte) (int, error) {
	if x.status == 0 {
		x.status = http.StatusOK
	}
	return x.body.Write(b)
}
func (x *fakeExchange) Status() int { return x.status }
func (x *fakeExchange) Routed(u *proxy.Upstream) {
	x.routed = append(x.routed, u.Targets()[0])
}
func (x *fakeExchange) Forward(u *proxy.Upstream, m proxy.Match) proxy.Outcome {
	x.paths = append(x.paths, m.Path)
	if x.forward != nil {
		return x.forward(u, m)
	}
	return proxy.Outcome{Status: http.StatusOK}
}

// forwarder is a test's Exchange that also stands in for the serving
// stack's forward.
type forwarder interface {
	Exchange
	Forward(u *proxy.Upstream, m proxy.Match) proxy.Outcome
}

// serve drives the request path as a serving stack does: Decide, then the
// forward the plan names (x's stand-in), then Plan.Finish with its
// outcome. It reports whether the forward was aborted.
func serve(s *Snapshot, x forwarder, v *reqview.View) (aborted bool) {
	p := s.Decide(x, v)
	if p == nil {
		return false
	}
	out := x.Forward(p.Upstream(), p.Match())
	p.Finish(out, nil)
	return out.Aborted
}

// TestServeThroughAnotherExchange: the request path decides on the view
// alone and answers only through its Exchange, so a stack other than
// net/http drives it whole: the route is matched on the cleaned path, the
// stack hears of the route before any rule decides, rejections are written
// through the Exchange without forwarding, an admitted request is forwarded
// once on the cleaned path, and an aborted forward is reported back.
func TestServeThroughAnotherExchange(t *testing.T) {
	now := time.Unix(1_000_000, 0).UnixNano() // frozen: the token bucket does not refill
	s := MustCompile(t, `namespace: x
routes:
  - {id: api, match: {pathPrefix: /api}, upstream: {targets: [{url: "http://127.0.0.1:1"}]}}
  - {id: keyed, match: {pathPrefix: /keyed}, upstream: {targets: [{url: "http://127.0.0.1:2"}]}}
  - {id: shed, match: {pathPrefix: /shed}, upstream: {targets: [{url: "http://127.0.0.1:3"}]}}
limits:
  - {id: one, routes: [api], key: [ip], algorithm: token_bucket, rate: 1, period: 1h, burst: 1}
  - {id: by-user, routes: [keyed], key: ["query:user"], algorithm: token_bucket, rate: 100, period: 1s}
degrades:
  - {id: off, routes: [shed], mode: manual, level: 2}
`, func() int64 { return now })
	view := func(method, rawPath, query string) *reqview.View {
		v := reqview.View{Method: method, Host: "gw.example", RawPath: rawPath, RawQuery: query,
			ContentLength: 0, ClientIP: netip.MustParseAddr("192.0.2.1"), RequestID: "req-1",
			Trace: reqview.Trace{Parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
		v.SetHeader(http.Header{})
		return &v
	}
	tests := []struct {
		desc        string
		v           *reqview.View
		aborted     bool
		wantStatus  int
		wantRouted  []string
		wantPaths   []string
		wantAborted bool
		wantInBody  string
	}{
		// Forwarded requests: the fake forward writes nothing (status 0);
		// the limit's RateLimit headers are on the exchange's header.
		{"admitted and forwarded on the cleaned path", view("GET", "/api/./a//b/../c", ""), false,
			0, []string{"http://127.0.0.1:1"}, []string{"/api/a/c"}, false, ""},
		{"the second is over the limit: 429, not forwarded", view("GET", "/api/x", ""), false,
			http.StatusTooManyRequests, []string{"http://127.0.0.1:1"}, nil, false, `"rule":"one"`},
		{"no route: 404 through the exchange", view("GET", "/nowhere", ""), false,
			http.StatusNotFound, nil, nil, false, "req-1"},
		{"an unknown method: 400 before routing", view("get", "/api/x", ""), false,
			http.StatusBadRequest, nil, nil, false, "method"},
		{"an ambiguous key part: 400 after routing, not forwarded", view("GET", "/keyed", "user=a&user=b"), false,
			http.StatusBadRequest, []string{"http://127.0.0.1:2"}, nil, false, "repeated"},
		{"shed by degrade: 503, not forwarded", view("GET", "/shed", ""), false,
			http.StatusServiceUnavailable, []string{"http://127.0.0.1:3"}, nil, false, ""},
		{"an aborted forward is reported", view("GET", "/keyed", "user=a"), true,
			0, []string{"http://127.0.0.1:2"}, []string{"/keyed"}, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			x := &fakeExchange{h: http.Header{}}
			if tc.aborted {
				x.forward = func(*proxy.Upstream, proxy.Match) proxy.Outcome {
					return proxy.Outcome{Status: http.StatusOK, Aborted: true, Err: proxy.ErrAborted}
				}
			}
			aborted := serve(s, x, tc.v)
			if aborted != tc.wantAborted || x.status != tc.wantStatus || !equal(x.routed, tc.wantRouted) || !equal(x.paths, tc.wantPaths) {
				t.Fatalf("aborted %v status %d routed %q forwarded %q; want %v %d %q %q (body %s)",
					aborted, x.status, x.routed, x.paths, tc.wantAborted, tc.wantStatus, tc.wantRouted, tc.wantPaths, x.body.String())
			}
			if len(tc.wantPaths) > 0 && tc.wantRouted[0] == "http://127.0.0.1:1" && x.h.Get("RateLimit-Policy") == "" {
				t.Fatalf("admitted without RateLimit headers on the exchange: %v", x.h)
			}
			if !strings.Contains(x.body.String(), tc.wantInBody) {
				t.Fatalf("body %q lacks %q", x.body.String(), tc.wantInBody)
			}
		})
	}
}

func equal(a, b []string) bool { return slices.Equal(a, b) }
