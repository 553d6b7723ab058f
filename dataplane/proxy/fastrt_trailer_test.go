package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"reflect"
	"slices"
	"testing"
)

// trailerResult is what a client of an http.RoundTripper sees of an
// answer's trailers: the Trailer field left in the header, the declared
// names when RoundTrip returns, and Trailer once the body is read.
type trailerResult struct {
	Field    []string    // Header["Trailer"]
	Declared []string    // resp.Trailer's keys before the body is read
	Body     string      // the body
	ReadErr  bool        // reading it failed
	Trailer  http.Header // resp.Trailer after the body's end
}

func roundTripTrailers(tb testing.TB, rt http.RoundTripper, url string) trailerResult {
	tb.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		tb.Fatalf("%T: RoundTrip: %v", rt, err)
	}
	var r trailerResult
	r.Field = resp.Header["Trailer"]
	for k, v := range resp.Trailer {
		if v != nil {
			tb.Errorf("%T: Trailer[%q] = %q before the body, want nil", rt, k, v)
		}
		r.Declared = append(r.Declared, k)
	}
	slices.Sort(r.Declared) // a map's keys, in no order
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	r.Body, r.ReadErr = string(b), err != nil
	if len(resp.Trailer) > 0 {
		r.Trailer = resp.Trailer
	}
	return r
}

// TestFastTransportTrailers: a chunked answer's trailers reach the
// fastTransport's caller as net/http's Transport gives them (compared on
// the same scripted answers): the declared names in Trailer when RoundTrip
// returns, with the Trailer field out of the header, and every field that
// arrives, declared or not, in Trailer at the body's end, keys canonical;
// an answer with Content-Length has none, its Trailer field left in the
// header. A field fasthttp refuses in a trailer section (Content-Type,
// Set-Cookie, ...), which net/http's Transport reports, departs: the body
// ends whole without the section, on a connection not reused.
func TestFastTransportTrailers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc    string
		answer  string
		departs *trailerResult // what fastTransport gives instead of net/http's result
	}{
		{desc: "declared and undeclared", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: x-sum\r\n\r\n" +
			"3\r\nabc\r\n0\r\nx-sum: 1\r\nX-Extra: 2\r\n\r\n"},
		{desc: "undeclared only", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"3\r\nabc\r\n2\r\nde\r\n0\r\nX-Only: u\r\nX-Only: v\r\n\r\n"},
		{desc: "declared, none sent", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum, X-Other\r\n\r\n" +
			"3\r\nabc\r\n0\r\n\r\n"},
		{desc: "chunked, no trailers", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"},
		{desc: "Content-Length", answer: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"},
		{desc: "Content-Length with a Trailer field", answer: "HTTP/1.1 200 OK\r\nTrailer: X-Sum\r\nContent-Length: 3\r\n\r\nabc"},
		{desc: "forbidden field", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n" +
			"3\r\nabc\r\n0\r\nX-Sum: 1\r\nContent-Type: text/evil\r\n\r\n",
			departs: &trailerResult{Declared: []string{"X-Sum"}, Body: "abc", Trailer: http.Header{"X-Sum": nil}}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			up := newRawUpstream(t, func(c net.Conn, br *bufio.Reader) {
				if readRequestHead(t, br) != nil {
					_, _ = io.WriteString(c, tc.answer)
				}
			})
			url := "http://" + up.addr + "/"
			peer := &http.Transport{}
			defer peer.CloseIdleConnections()
			want := roundTripTrailers(t, peer, url)
			if tc.departs != nil {
				want = *tc.departs
			}
			got := roundTripTrailers(t, mustFastTransport(t, "http://"+up.addr), url)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("fastTransport gives %+v\nwant %+v", got, want)
			}
			if tc.departs != nil {
				// Both connections end: net/http's closed here, the
				// fastTransport's by the gateway.
				peer.CloseIdleConnections()
				wantClosed(t, up)
				wantClosed(t, up)
			}
		})
	}
}
