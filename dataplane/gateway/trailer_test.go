package gateway

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"slices"
	"testing"
)

// trailerAnswer is what a net/http client sees of an answer's trailers.
type trailerAnswer struct {
	Status   int
	Body     string
	CL       int64       // ContentLength
	Declared []string    // resp.Trailer's keys before the body is read, sorted
	Trailer  http.Header // resp.Trailer once the body is read (nil when empty)
}

func getTrailers(tb testing.TB, c *http.Client, url string) (trailerAnswer, http.Header) {
	tb.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return doTrailers(tb, c, req)
}

// doTrailers is getTrailers for any request.
func doTrailers(tb testing.TB, c *http.Client, req *http.Request) (trailerAnswer, http.Header) {
	tb.Helper()
	url := req.URL.String()
	resp, err := c.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", req.Method, url, err)
	}
	a := trailerAnswer{Status: resp.StatusCode, CL: resp.ContentLength}
	for k := range resp.Trailer {
		a.Declared = append(a.Declared, k)
	}
	slices.Sort(a.Declared)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		tb.Errorf("%s %s: reading the body: %v", req.Method, url, err)
	}
	a.Body = string(b)
	if len(resp.Trailer) > 0 {
		a.Trailer = resp.Trailer
	}
	return a, resp.Header
}

// TestRelayedTrailers: on either HTTP/1.1 engine, a chunked answer's
// trailers reach an HTTP/1.1 client as they reach it through net/http
// alone (httputil.ReverseProxy over http.Transport, the peer compared on
// the same answers): the upstream's Trailer field declares them, and the
// fields that arrive, declared or not, follow the body; an answer with
// Content-Length is relayed as before, without a Trailer field. Where the
// gateway departs from that peer (fasthttp refuses a field that must not be
// a trailer: see docs/gateway.md), departs says what the client gets instead.
func TestRelayedTrailers(t *testing.T) {
	const chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
	cases := []struct {
		desc    string
		answer  string
		want    trailerAnswer
		departs *trailerAnswer
	}{
		{desc: "declared and undeclared", answer: chunked + "Trailer: x-sum\r\n\r\n3\r\nabc\r\n0\r\nx-sum: 1\r\nX-Extra: 2\r\n\r\n",
			want: trailerAnswer{Status: 200, Body: "abc", CL: -1, Declared: []string{"X-Sum"}, Trailer: http.Header{"X-Sum": {"1"}, "X-Extra": {"2"}}}},
		{desc: "undeclared only", answer: chunked + "\r\n3\r\nabc\r\n2\r\nde\r\n0\r\nX-Only: u\r\nX-Only: v\r\n\r\n",
			want: trailerAnswer{Status: 200, Body: "abcde", CL: -1, Trailer: http.Header{"X-Only": {"u", "v"}}}},
		{desc: "Content-Length", answer: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc",
			want: trailerAnswer{Status: 200, Body: "abc", CL: 3}},
		{desc: "Content-Length with a Trailer field", answer: "HTTP/1.1 200 OK\r\nTrailer: X-Sum\r\nContent-Length: 3\r\n\r\nabc",
			want: trailerAnswer{Status: 200, Body: "abc", CL: 3}},
		{desc: "forbidden field", answer: chunked + "Trailer: X-Sum\r\n\r\n3\r\nabc\r\n0\r\nX-Sum: 1\r\nContent-Type: text/evil\r\n\r\n",
			want:    trailerAnswer{Status: 200, Body: "abc", CL: -1, Declared: []string{"X-Sum"}, Trailer: http.Header{"X-Sum": {"1"}, "Content-Type": {"text/evil"}}},
			departs: &trailerAnswer{Status: 200, Body: "abc", CL: -1, Declared: []string{"X-Sum"}, Trailer: http.Header{"X-Sum": nil}}},
		{desc: "forbidden field declared", answer: chunked + "Trailer: Set-Cookie\r\n\r\n3\r\nabc\r\n0\r\nSet-Cookie: a=1\r\n\r\n",
			want:    trailerAnswer{Status: 200, Body: "abc", CL: -1, Declared: []string{"Set-Cookie"}, Trailer: http.Header{"Set-Cookie": {"a=1"}}},
			departs: &trailerAnswer{Status: http.StatusBadGateway}},
		{desc: "chunked, no trailers", answer: chunked + "\r\n3\r\nabc\r\n0\r\n\r\n",
			want: trailerAnswer{Status: 200, Body: "abc", CL: -1}},
	}
	answers := make([]string, len(cases))
	for i, tc := range cases {
		answers[i] = tc.answer
	}

	t.Run("net/http", func(t *testing.T) {
		u, _ := url.Parse(scriptedUpstream(t, answers...))
		rp := httputil.NewSingleHostReverseProxy(u)
		rp.ErrorLog = log.New(io.Discard, "", 0)
		peer := httptest.NewServer(rp)
		defer peer.Close()
		c := &http.Client{Transport: &http.Transport{}}
		for _, tc := range cases {
			if got, _ := getTrailers(t, c, peer.URL+"/x"); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s: net/http gives %+v\nwant %+v", tc.desc, got, tc.want)
			}
		}
	})
	up := scriptedUpstream(t, answers...)
	_, base, _ := MustStart(t, fmt.Sprintf(`namespace: trailers
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}
`, up))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for _, tc := range cases {
		want := tc.want
		if tc.departs != nil {
			want = *tc.departs
		}
		got, h := getTrailers(t, c, base+"/x")
		if want.Status == http.StatusBadGateway {
			got.Body, got.CL = "", 0 // the gateway's problem
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the client gets %+v\nwant %+v", tc.desc, got, want)
		}
		if h.Get("X-Request-Id") == "" || h.Get("Content-Type") == "text/evil" {
			t.Errorf("%s: header %v", tc.desc, h)
		}
	}
}

// TestTrailersDeclaringRequestID: on the fasthttp engine, an upstream that
// declares X-Request-Id a trailer does not take the gateway's X-Request-Id
// out of the header: the name is not declared to the client, and the
// other trailers are relayed.
func TestTrailersDeclaringRequestID(t *testing.T) {
	up := scriptedUpstream(t, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Request-Id, X-Sum\r\n\r\n"+
		"3\r\nabc\r\n0\r\nX-Sum: 1\r\n\r\n")
	_, base, _ := MustStart(t, fmt.Sprintf(`namespace: trailers
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}
`, up))
	req, _ := http.NewRequest("GET", base+"/x", nil)
	req.Header.Set("X-Request-Id", "client-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := resp.Header.Values("X-Request-Id"); len(got) != 1 || got[0] != "client-1" || string(b) != "abc" {
		t.Errorf("X-Request-Id %q, body %q", got, b)
	}
	if !reflect.DeepEqual(resp.Trailer, http.Header{"X-Sum": {"1"}}) {
		t.Errorf("Trailer %v", resp.Trailer)
	}
}

// TestTrailersHTTP10Client: on either HTTP/1.1 engine, an HTTP/1.0 client
// gets a chunked answer's body without its trailers, and on the fasthttp
// engine without the Trailer field either (net/http's server writes the
// one ReverseProxy declares, as it does for any HTTP/1.0 client).
func TestTrailersHTTP10Client(t *testing.T) {
	up := scriptedUpstream(t, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n"+
		"3\r\nabc\r\n0\r\nX-Sum: 1\r\nX-Extra: 2\r\n\r\n")
	_, base, _ := MustStart(t, fmt.Sprintf(`namespace: trailers
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}
`, up))
	resp, b := getHTTP10(t, base, "/x")
	if string(b) != "abc" {
		t.Errorf("body %q", b)
	}
	if len(resp.Trailer) > 0 || resp.Header["Trailer"] != nil {
		t.Errorf("an HTTP/1.0 client got trailers: Trailer %v, header %v", resp.Trailer, resp.Header)
	}
}
