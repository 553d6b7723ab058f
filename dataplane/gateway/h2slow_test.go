package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestH2NonReadingClient: an HTTP/2 client that opens the flow-control
// windows wide, asks for a 16 MB answer and never reads its socket holds
// the route's one concurrency slot only until the route's writeTimeout
// (the longest of the rules: Node.h2Stall), when its session ends, and
// the slot is free for a client on another connection. (A stream's own
// write deadline cannot end it: x/net resets the stream with a frame the
// stalled connection never takes. Without the session's bound, the slot
// was held as long as the client kept the connection.)
func TestH2NonReadingClient(t *testing.T) {
	addr, big := startSlowDownload(t, 1)

	// The non-reading client: a fixed 64 KiB receive buffer, windows as
	// wide as HTTP/2 allows, one request, and no read ever.
	d := nonReadingDialer()
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var out bytes.Buffer
	out.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&out, nil)
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	_ = fr.WriteWindowUpdate(0, 1<<31-1-65535)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}, {":path", "/big"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
	if _, err := c.Write(out.Bytes()); err != nil {
		t.Fatal(err)
	}

	h2 := &http.Client{Transport: &http2.Transport{AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}, Timeout: 5 * time.Second}
	status := func() int {
		resp, err := h2.Get("http://" + addr + "/small")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// No probe goes out before the big request reached the upstream: a
	// probe admitted first would take the slot and have it refused.
	start := time.Now()
	for big.started.Load() == 0 {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the non-reading client's request never reached the upstream")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for status() != http.StatusTooManyRequests {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the non-reading client never took the slot")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for status() != http.StatusOK {
		if time.Since(start) > 15*time.Second {
			t.Fatalf("the slot is still held %v after the non-reading client asked (writeTimeout 1s)", time.Since(start))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("slot free %v after the non-reading client asked", time.Since(start).Round(time.Millisecond))
}
