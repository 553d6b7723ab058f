package gateway

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/sluicegw/sluice/dataplane/internal/testca"
	"github.com/sluicegw/sluice/dataplane/proxy"
)

// TestHeaderCapEveryEngine: one header bound, 64 KiB, on every HTTP/1
// engine, cleartext and TLS, and on HTTP/2 (h2c and TLS): an HTTP/1 header
// section (request line, fields, line ends, the blank line) of 65,536
// bytes is served, one byte more is 431; an HTTP/2 header list (RFC 9113
// §6.5.2: names, values and 32 bytes a field) alike. Before, 66–70 KB
// headers got 200 on the event loop and net/http and 431 on TLS.
func TestHeaderCapEveryEngine(t *testing.T) {
	t.Parallel()
	ca := testca.New(t, "header cap CA")
	_, ls, _, _ := tlsNode(t, ca, Config{})
	clear, sec := ls.Traffic.Addr().String(), ls.TLSAddr().String()
	dialTLS := func(proto string) func() (net.Conn, error) {
		return func() (net.Conn, error) {
			return tls.Dial("tcp", sec, &tls.Config{RootCAs: ca.Pool(), NextProtos: []string{proto}})
		}
	}
	dialClear := func() (net.Conn, error) { return net.Dial("tcp", clear) }
	for _, size := range []int{proxy.MaxHeaderBytes, proxy.MaxHeaderBytes + 1, 68000, 70000} {
		want := http.StatusOK
		if size > proxy.MaxHeaderBytes {
			want = http.StatusRequestHeaderFieldsTooLarge
		}
		for _, tc := range []struct {
			desc string
			dial func() (net.Conn, error)
			h2   bool
		}{
			{"HTTP/1.1", dialClear, false},
			{"HTTP/1.1 over TLS", dialTLS("http/1.1"), false},
			{"h2c", dialClear, true},
			{"h2 over TLS", dialTLS("h2"), true},
		} {
			c, err := tc.dial()
			if err != nil {
				t.Fatal(err)
			}
			var status int
			if tc.h2 {
				status = h2HeaderSized(t, c, size)
			} else {
				status = h1HeaderSized(t, c, size)
			}
			c.Close()
			if status != want {
				t.Errorf("%s, a header of %d bytes: %d, want %d", tc.desc, size, status, want)
			}
		}
	}
}

// h1HeaderSized sends a GET whose header section is size bytes on c and
// returns the answer's status.
func h1HeaderSized(t *testing.T, c net.Conn, size int) int {
	t.Helper()
	const head = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: "
	req := head + strings.Repeat("p", size-len(head)-4) + "\r\n\r\n"
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("a header of %d bytes: %v", size, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// h2HeaderSized sends, on a new HTTP/2 connection c, a GET whose header
// list is size (RFC 9113 §6.5.2) and returns the answer's status.
func h2HeaderSized(t *testing.T, c net.Conn, size int) int {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	used := 0
	for _, f := range h2Pseudo(c, "127.0.0.1", "/") {
		used += int(f.Size())
	}
	var fields []hpack.HeaderField
	// Fields of at most 16,000 bytes (a single field longer than the
	// bound is x/net's COMPRESSION_ERROR, the connection ended).
	for i := 0; used < size; i++ {
		pad := hpack.HeaderField{Name: fmt.Sprintf("x-pad-%d", i)}
		pad.Value = strings.Repeat("p", min(16000, size-used-int(pad.Size())))
		used += int(pad.Size())
		fields = append(fields, pad)
	}
	return h2Status(t, c, "127.0.0.1", "/", fields...)
}

// h2Pseudo are the pseudo-header fields of a GET of path from authority on
// c (scheme https on a TLS connection).
func h2Pseudo(c net.Conn, authority, path string) []hpack.HeaderField {
	scheme := "http"
	if _, ok := c.(*tls.Conn); ok {
		scheme = "https"
	}
	return []hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: scheme},
		{Name: ":authority", Value: authority}, {Name: ":path", Value: path}}
}

// h2Status sends, on a new HTTP/2 connection c (the preface not sent yet),
// a GET of path from authority with extra fields, and returns the answer's
// status, or 0 when the HTTP/2 server refused the request itself
// (RST_STREAM PROTOCOL_ERROR).
func h2Status(t *testing.T, c net.Conn, authority, path string, extra ...hpack.HeaderField) int {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fields := append(h2Pseudo(c, authority, path), extra...)
	size := 0
	for _, f := range fields {
		size += int(f.Size())
	}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range fields {
		_ = enc.WriteField(f)
	}
	bw := bufio.NewWriter(c)
	fr := http2.NewFramer(bw, bufio.NewReader(c))
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	_, _ = io.WriteString(bw, http2.ClientPreface)
	_ = fr.WriteSettings()
	b := block.Bytes()
	const chunk = 16384 // the default SETTINGS_MAX_FRAME_SIZE
	first := b[:min(chunk, len(b))]
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndStream: true, EndHeaders: len(b) <= chunk})
	for b = b[len(first):]; len(b) > 0; {
		k := min(chunk, len(b))
		_ = fr.WriteContinuation(1, k == len(b), b[:k])
		b = b[k:]
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("a header list of %d: %v", size, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
				_ = bw.Flush()
			}
		case *http2.MetaHeadersFrame:
			var status int
			_, _ = fmt.Sscan(f.PseudoValue("status"), &status)
			return status
		case *http2.GoAwayFrame:
			t.Fatalf("a header list of %d: GOAWAY %v", size, f.ErrCode)
		case *http2.RSTStreamFrame:
			if f.ErrCode == http2.ErrCodeProtocol {
				return 0 // refused by x/net's server itself
			}
			t.Fatalf("a header list of %d: RST_STREAM %v", size, f.ErrCode)
		}
	}
}
