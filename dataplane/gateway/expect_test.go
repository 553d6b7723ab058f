package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestExpectContinueAfterLimit: a request with "Expect: 100-continue" is
// told to send its body (100 Continue) only once the limits admitted it;
// one the limit refuses gets its 429 without a 100 (before, every engine
// but net/http answered 100 first), on every HTTP/1 engine, with a body of
// known length or chunked; a client that sends its body without waiting
// is served with it whole.
func TestExpectContinueAfterLimit(t *testing.T) {
	t.Parallel()
	up := newPlainUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "got %s", b)
	})
	rules := fmt.Sprintf(`namespace: expect
routes:
  - {id: limited, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}
limits:
  - {id: one-a-minute, routes: [limited], key: [header:X-Client], algorithm: token_bucket, rate: 1, period: 1m}
`, up)
	_, base, _ := MustStartConfig(t, rules, Config{})
	addr := strings.TrimPrefix(base, "http://")
	for _, chunked := range []bool{false, true} {
		client := fmt.Sprintf("c-%v", chunked)
		// The first is admitted: 100, then its answer.
		lines, answer := expectRequest(t, addr, client, chunked)
		if len(lines) != 2 || !strings.Contains(lines[0], " 100 ") || !strings.Contains(lines[1], " 200 ") || answer != "got hello" {
			t.Errorf("chunked %v, admitted: status lines %q, answer %q; want 100 then 200 \"got hello\"", chunked, lines, answer)
		}
		// A client that does not wait: served, its body whole.
		lines, answer = expectRequestEager(t, addr, client+"-eager", chunked, true)
		if !strings.Contains(lines[len(lines)-1], " 200 ") || answer != "got hello" {
			t.Errorf("chunked %v, body sent at once: status lines %q, answer %q; want 200 \"got hello\"", chunked, lines, answer)
		}
		// The second is refused: 429 and no 100.
		lines, _ = expectRequest(t, addr, client, chunked)
		if len(lines) != 1 || !strings.Contains(lines[0], " 429 ") {
			t.Errorf("chunked %v, refused: status lines %q, want one 429", chunked, lines)
		}
	}
}

// expectRequest sends a POST with "Expect: 100-continue" and waits for an
// answer before sending the body ("hello"), as a client does; it returns
// the status lines it read and the final answer's body.
func expectRequest(t *testing.T, addr, client string, chunked bool) ([]string, string) {
	return expectRequestEager(t, addr, client, chunked, false)
}

// expectRequestEager is expectRequest, sending the body with the header
// when eager (a client need not wait for the 100).
func expectRequestEager(t *testing.T, addr, client string, chunked, eager bool) ([]string, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	framing, body := "Content-Length: 5", "hello"
	if chunked {
		framing, body = "Transfer-Encoding: chunked", "5\r\nhello\r\n0\r\n\r\n"
	}
	head := fmt.Sprintf("POST /e HTTP/1.1\r\nHost: g.test\r\nX-Client: %s\r\nExpect: 100-continue\r\n%s\r\n\r\n", client, framing)
	if eager {
		head += body
	}
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	tp := textproto.NewReader(br)
	var lines []string
	for {
		line, err := tp.ReadLine()
		if err != nil {
			t.Fatalf("reading the answer: %v (so far %q)", err, lines)
		}
		lines = append(lines, line)
		h, err := tp.ReadMIMEHeader()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, " 100 ") {
			if eager {
				continue
			}
			if _, err := io.WriteString(c, body); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var r io.Reader = br
		if h.Get("Transfer-Encoding") == "chunked" {
			r = httputil.NewChunkedReader(br)
		} else {
			n, _ := strconv.Atoi(h.Get("Content-Length"))
			r = io.LimitReader(br, int64(n))
		}
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		return lines, string(b)
	}
}
