package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2cAnswer is what came back on an h2c-upgraded connection's stream 1.
type h2cAnswer struct {
	status string
	header map[string]string
	body   string
}

// h2cUpgradeRequest sends head (a request asking for h2c, without the final
// CRLF) and body on a new connection to addr and returns the HTTP/1 status
// of the answer, and, after a 101, the HTTP/2 answer on stream 1.
func h2cUpgradeRequest(t *testing.T, addr, head, body string) (int, *h2cAnswer) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, head+"\r\n"+body); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	if resp.Header.Get("Upgrade") != "h2c" {
		t.Fatalf("101 with Upgrade %q", resp.Header.Get("Upgrade"))
	}
	fr := http2.NewFramer(c, br)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	a := &h2cAnswer{header: map[string]string{}}
	var data bytes.Buffer
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading HTTP/2 frames: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID != 1 {
				t.Fatalf("headers on stream %d", f.StreamID)
			}
			a.status = f.PseudoValue("status")
			for _, hf := range f.RegularFields() {
				a.header[http.CanonicalHeaderKey(hf.Name)] = hf.Value
			}
			if f.StreamEnded() {
				return http.StatusSwitchingProtocols, a
			}
		case *http2.DataFrame:
			data.Write(f.Data())
			if f.StreamEnded() {
				a.body = data.String()
				return http.StatusSwitchingProtocols, a
			}
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v", f.ErrCode)
		case *http2.RSTStreamFrame:
			t.Fatalf("RST_STREAM %v", f.ErrCode)
		}
	}
}

// TestH2CUpgrade: on both HTTP/1.1 engines an HTTP/1.1 request with
// "Upgrade: h2c" and HTTP2-Settings switches its connection to HTTP/2 (101)
// and is answered as stream 1 through the request path, its body (read
// whole first, as x/net's h2c handler does, when it fits H2CBodyMax; a
// longer or chunked one is served as HTTP/1.1) forwarded; a missing
// HTTP2-Settings is answered 500 on both, an Upgrade without it in
// Connection is no upgrade (the request is served as HTTP/1.1), and a
// request whose framing is refused is refused before any switch.
func TestH2CUpgrade(t *testing.T) {
	up := newPlainUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if len(b) > 64 {
			b = fmt.Appendf(nil, "%d bytes", len(b)) // within the test client's HTTP/2 window
		}
		w.Header().Set("X-Upstream-Upgrade", r.Header.Get("Upgrade"))
		fmt.Fprintf(w, "%s %s [%s]", r.Method, r.URL.Path, b)
	})
	rules := fmt.Sprintf(`namespace: h2cup
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}]}}
`, up)
	const ask = "Host: g.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n"
	tests := []struct {
		desc       string
		head, body string
		wantStatus int    // the HTTP/1 answer
		wantBody   string // stream 1's body after a 101
	}{
		{"a GET switches", "GET /a HTTP/1.1\r\n" + ask, "", http.StatusSwitchingProtocols, "GET /a []"},
		{"a POST's body goes along", "POST /p HTTP/1.1\r\n" + ask + "Content-Length: 5\r\n", "hello", http.StatusSwitchingProtocols, "POST /p [hello]"},
		// A body of unknown length, or over H2CBodyMax, is not read
		// whole for a switch: the request is served as HTTP/1.1.
		{"a chunked body is served as HTTP/1.1", "POST /c HTTP/1.1\r\n" + ask + "Transfer-Encoding: chunked\r\n", "3\r\nabc\r\n0\r\n\r\n", http.StatusOK, ""},
		{"a body of 64 KiB switches", "POST /p HTTP/1.1\r\n" + ask + "Content-Length: 65536\r\n", strings.Repeat("x", 65536), http.StatusSwitchingProtocols, "POST /p [65536 bytes]"},
		{"a longer body is served as HTTP/1.1", "POST /p HTTP/1.1\r\n" + ask + "Content-Length: 65537\r\n", strings.Repeat("x", 65537), http.StatusOK, ""},
		{"no HTTP2-Settings", "GET /a HTTP/1.1\r\nHost: g.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n", "", http.StatusInternalServerError, ""},
		{"not asked in Connection", "GET /a HTTP/1.1\r\nHost: g.test\r\nConnection: Upgrade\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n", "", http.StatusOK, ""},
		{"bad framing is refused first", "POST /p HTTP/1.1\r\n" + ask + "Content-Length: 3\r\nContent-Length: 4\r\n", "abc", http.StatusBadRequest, ""},
	}
	_, base, _ := MustStart(t, rules)
	addr := strings.TrimPrefix(base, "http://")
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			status, a := h2cUpgradeRequest(t, addr, tc.head, tc.body)
			if status != tc.wantStatus {
				t.Fatalf("HTTP/1 status %d, want %d", status, tc.wantStatus)
			}
			if a == nil {
				return
			}
			if a.status != "200" || a.body != tc.wantBody {
				t.Fatalf("stream 1: %s %q, want 200 %q", a.status, a.body, tc.wantBody)
			}
			if a.header["X-Request-Id"] == "" {
				t.Errorf("no X-Request-Id on stream 1: %v", a.header)
			}
			if v := a.header["X-Upstream-Upgrade"]; v != "" {
				t.Errorf("the upstream received Upgrade %q", v)
			}
		})
	}
}
