//go:build linux

package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// FuzzLoopFraming feeds the event-loop engine raw bytes on one connection,
// split into writes at points the fuzzer picks (cuts: each byte is the
// length of the next write, 1–256; what is left goes in one last write),
// then half-closes the connection and reads what comes back. It checks
// that:
//
//   - the node does not panic (a loop has no recover: a panic ends the
//     process, and the log is watched for one recovered elsewhere);
//   - the connection ends: every request is answered, or the node closes
//     the connection, within 5 s (nothing hangs on a framing it half read);
//   - every forwarded request was answered (as many answers as requests
//     the upstream got, at least);
//   - nothing is smuggled: the requests the upstream gets are, in order, a
//     subsequence of those a strict parser (strictRequests) reads from the
//     same bytes, with the same method and body; a framing that parser
//     refuses (two Content-Lengths, Content-Length with Transfer-Encoding,
//     a Transfer-Encoding other than chunked, an obs-fold, a bad chunk, a
//     bare CR) ends what it reads, so the node must not forward anything
//     past it.
//
// Writes are not reads: the kernel may join two writes before the loop
// reads them, so the pieces the loop sees are the fuzzer's cuts or coarser;
// a short pause after each write makes them usually the same. The seed
// corpus (testdata/fuzz/FuzzLoopFraming) runs in make test as ordinary
// tests.
func FuzzLoopFraming(f *testing.F) {
	up := newFramingUpstream(f)
	var panics atomic.Int32
	_, base, _ := MustStartConfig(f, fmt.Sprintf(`namespace: fuzz
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}
`, up.url), Config{Logger: panicWatchLogger(&panics)})
	addr := strings.TrimPrefix(base, "http://")

	f.Fuzz(func(t *testing.T, input, cuts []byte) {
		if len(input) > 128<<10 || len(cuts) > 64 {
			return // bounded: the engine's limits are covered by other tests
		}
		up.reset()
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		tc := c.(*net.TCPConn)
		_ = tc.SetNoDelay(true)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		// Read as it comes, so that answers never fill the socket while
		// the writes go on.
		got := make(chan []byte, 1)
		go func() {
			b, _ := io.ReadAll(c)
			got <- b
		}()
		rest := input
		for _, cut := range cuts {
			if len(rest) == 0 {
				break
			}
			n := min(int(cut)+1, len(rest))
			if _, err := c.Write(rest[:n]); err != nil {
				break // the node closed the connection: fine
			}
			rest = rest[n:]
			time.Sleep(50 * time.Microsecond) // let the loop read this piece on its own
		}
		if len(rest) > 0 {
			_, _ = c.Write(rest)
		}
		_ = tc.CloseWrite()
		answers := <-got
		var ne net.Error
		if _, err := c.Read(make([]byte, 1)); errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the connection neither answered nor closed within 5s; input %q", input)
		}
		if panics.Load() > 0 {
			t.Fatalf("the node logged a panic; input %q", input)
		}
		fwd := up.wait(t)
		if bytes.HasPrefix(input, []byte("PRI ")) {
			return // HTTP/2 (h2c with prior knowledge): not HTTP/1 framing
		}
		strict := strictRequests(input)
		j := 0
		for i, r := range fwd {
			for j < len(strict) && (strict[j].method != r.method || strict[j].body != r.body) {
				j++
			}
			if j == len(strict) {
				t.Fatalf("the upstream got request %d (%s, body %q) that a strict parser does not read there: "+
					"upstream got %v, strict parser reads %v; input %q", i+1, r.method, r.body, fwd, strict, input)
			}
			j++
		}
		t.Logf("forwarded %v; strict parser reads %v", fwd, strict)
		if n := countFramedAnswers(answers); n < len(fwd) {
			t.Fatalf("%d requests forwarded, %d answers back; input %q; answers %q", len(fwd), n, input, answers)
		}
	})
}

// framingRequest is a request as read: its method and (decoded) body.
type framingRequest struct{ method, body string }

func (r framingRequest) String() string { return fmt.Sprintf("%s %q", r.method, r.body) }

// framingUpstream records the method and body of each whole request it
// gets and answers each with an empty 204.
type framingUpstream struct {
	url      string
	mu       sync.Mutex
	got      []framingRequest
	inFlight atomic.Int32
}

func newFramingUpstream(tb testing.TB) *framingUpstream {
	tb.Helper()
	u := &framingUpstream{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.inFlight.Add(1)
		defer u.inFlight.Add(-1)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			// Cut off mid-body (the node found the framing bad while
			// streaming it): not a request the upstream would serve.
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		u.mu.Lock()
		u.got = append(u.got, framingRequest{r.Method, string(body)})
		u.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { srv.Close() })
	u.url = "http://" + ln.Addr().String()
	return u
}

func (u *framingUpstream) reset() {
	u.mu.Lock()
	u.got = nil
	u.mu.Unlock()
}

// wait returns what the upstream got, once no request is in its handler.
func (u *framingUpstream) wait(t *testing.T) []framingRequest {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); u.inFlight.Load() > 0; {
		if time.Now().After(deadline) {
			t.Fatal("the upstream still has a request in flight after 5s")
		}
		time.Sleep(time.Millisecond)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]framingRequest(nil), u.got...)
}

// panicWatchLogger is a JSON logger that counts records mentioning a panic.
func panicWatchLogger(n *atomic.Int32) *slog.Logger {
	return slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) (int, error) {
		if bytes.Contains(bytes.ToLower(p), []byte("panic")) {
			n.Add(1)
		}
		return len(p), nil
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// countFramedAnswers counts the HTTP/1 answers in b, read in order until one
// does not parse (a HEAD's answer is read as a GET's: the upstream's
// answers have no body, and the node's own end the connection).
func countFramedAnswers(b []byte) int {
	br := bufio.NewReader(bytes.NewReader(b))
	n := 0
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return n
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		n++
		if err != nil {
			return n
		}
	}
}

// strictRequests reads HTTP/1 requests from b as a strict parser (RFC 9112)
// would, in order, and stops at the first that is not whole or whose
// framing it would refuse: a line ending in a bare CR, an obs-fold, a
// header name that is not a token, a request line that is not
// "method SP target SP HTTP/1.x", more than one Content-Length or
// Transfer-Encoding, both, a Content-Length that is not digits, a
// Transfer-Encoding other than "chunked" (or any on HTTP/1.0), a bad chunk.
// It is lenient where framing does not depend on it (a bare LF ends a line,
// as RFC 9112 §2.2 allows; header values are not checked beyond CR, LF and
// NUL).
func strictRequests(b []byte) []framingRequest {
	var out []framingRequest
	for len(b) > 0 {
		r, n, ok := strictRequest(b)
		if !ok {
			break
		}
		out = append(out, r)
		b = b[n:]
	}
	return out
}

// strictLine returns the line at the start of b (without its CRLF or LF)
// and the bytes it took; ok is false when it has no end or holds a CR or
// NUL.
func strictLine(b []byte) (line []byte, n int, ok bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return nil, 0, false
	}
	line = b[:i]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	if bytes.IndexByte(line, '\r') >= 0 || bytes.IndexByte(line, 0) >= 0 {
		return nil, 0, false
	}
	return line, i + 1, true
}

func isToken(s []byte) bool {
	if len(s) == 0 {
		return false
	}
	for _, c := range s {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

func strictRequest(b []byte) (framingRequest, int, bool) {
	var r framingRequest
	line, off, ok := strictLine(b)
	if !ok {
		return r, 0, false
	}
	parts := bytes.Split(line, []byte(" "))
	if len(parts) != 3 || !isToken(parts[0]) || len(parts[1]) == 0 {
		return r, 0, false
	}
	version := string(parts[2])
	if version != "HTTP/1.1" && version != "HTTP/1.0" {
		return r, 0, false
	}
	r.method = string(parts[0])
	var cl, te []string
	for {
		line, n, ok := strictLine(b[off:])
		if !ok {
			return r, 0, false
		}
		off += n
		if len(line) == 0 {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			return r, 0, false // obs-fold
		}
		colon := bytes.IndexByte(line, ':')
		if colon < 0 || !isToken(line[:colon]) {
			return r, 0, false
		}
		value := strings.Trim(string(line[colon+1:]), " \t")
		switch strings.ToLower(string(line[:colon])) {
		case "content-length":
			cl = append(cl, value)
		case "transfer-encoding":
			te = append(te, value)
		}
	}
	switch {
	case len(te) > 0:
		if len(te) > 1 || len(cl) > 0 || version == "HTTP/1.0" || !strings.EqualFold(te[0], "chunked") {
			return r, 0, false
		}
		body, n, ok := strictChunked(b[off:])
		if !ok {
			return r, 0, false
		}
		r.body = body
		return r, off + n, true
	case len(cl) > 0:
		if len(cl) > 1 || len(cl[0]) == 0 || len(cl[0]) > 12 || strings.Trim(cl[0], "0123456789") != "" {
			return r, 0, false
		}
		n, _ := strconv.Atoi(cl[0])
		if len(b)-off < n {
			return r, 0, false
		}
		r.body = string(b[off : off+n])
		return r, off + n, true
	}
	return r, off, true
}

// strictChunked reads a chunked body (chunk extensions allowed, trailers
// read as header lines) and returns it decoded, and the bytes it took.
func strictChunked(b []byte) (string, int, bool) {
	var body strings.Builder
	off := 0
	for {
		line, n, ok := strictLine(b[off:])
		if !ok {
			return "", 0, false
		}
		off += n
		size := line
		if i := bytes.IndexByte(size, ';'); i >= 0 {
			size = size[:i]
		}
		size = bytes.TrimRight(size, " \t")
		if len(size) == 0 || len(size) > 8 || strings.Trim(string(size), "0123456789abcdefABCDEF") != "" {
			return "", 0, false
		}
		sz, _ := strconv.ParseInt(string(size), 16, 64)
		if sz == 0 {
			break
		}
		if int64(len(b)-off) < sz {
			return "", 0, false
		}
		body.Write(b[off : off+int(sz)])
		off += int(sz)
		switch {
		case bytes.HasPrefix(b[off:], []byte("\r\n")):
			off += 2
		case bytes.HasPrefix(b[off:], []byte("\n")):
			off++
		default:
			return "", 0, false
		}
	}
	for { // trailers, up to the blank line
		line, n, ok := strictLine(b[off:])
		if !ok {
			return "", 0, false
		}
		off += n
		if len(line) == 0 {
			return body.String(), off, true
		}
		if line[0] == ' ' || line[0] == '\t' {
			return "", 0, false
		}
		if colon := bytes.IndexByte(line, ':'); colon < 0 || !isToken(line[:colon]) {
			return "", 0, false
		}
	}
}
