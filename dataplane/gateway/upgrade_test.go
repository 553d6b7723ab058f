package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// switchingUpstream answers 101 to every request, switching to the first
// protocol the request names in Upgrade (or "raw" when it names none), and
// then echoes what it reads back, counting the lines carried through the
// tunnel: the upstream an attacker hopes for.
type switchingUpstream struct {
	ln       net.Listener
	mu       sync.Mutex
	heads    []string
	tunneled atomic.Int64
}

func newSwitchingUpstream(tb testing.TB) *switchingUpstream {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	u := &switchingUpstream{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go u.serve(c)
		}
	}()
	tb.Cleanup(func() { ln.Close() })
	return u
}

func (u *switchingUpstream) serve(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	r, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	var head bytes.Buffer
	_ = r.Header.Write(&head)
	u.mu.Lock()
	u.heads = append(u.heads, head.String())
	u.mu.Unlock()
	proto := "raw"
	if up := r.Header.Get("Upgrade"); up != "" {
		proto, _, _ = strings.Cut(up, ",")
	}
	fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", strings.TrimSpace(proto))
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		u.tunneled.Add(1)
		if _, err := io.WriteString(c, line); err != nil {
			return
		}
	}
}

func (u *switchingUpstream) lastHead() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.heads) == 0 {
		return ""
	}
	return u.heads[len(u.heads)-1]
}

// TestUpgradeOnlyWebSocket: an upstream that answers 101 to anything opens
// a tunnel only for WebSocket; any other Upgrade token is removed before
// forwarding, the upstream's 101 is refused (502) and nothing the client
// sends afterwards reaches the upstream.
func TestUpgradeOnlyWebSocket(t *testing.T) {
	t.Parallel()
	up := newSwitchingUpstream(t)
	_, base, _ := MustStart(t, fmt.Sprintf(`namespace: upgrades
routes:
  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: "http://%s"}]}}
`, up.ln.Addr()))
	addr := strings.TrimPrefix(base, "http://")
	tests := []struct {
		desc     string
		upgrade  string
		want     int
		upstream string // Upgrade header the upstream received; "" for none
	}{
		{"an arbitrary protocol is not switched to", "foo", http.StatusBadGateway, ""},
		{"h2c the gateway did not take is not passed on", "h2c", http.StatusBadGateway, ""},
		{"a TLS upgrade is not passed on", "TLS/1.2", http.StatusBadGateway, ""},
		{"websocket passes", "websocket", http.StatusSwitchingProtocols, "websocket"},
		{"websocket in any case, alone", "foo, WebSocket", http.StatusSwitchingProtocols, "websocket"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			before := up.tunneled.Load()
			fmt.Fprintf(c, "GET /chat HTTP/1.1\r\nHost: u.test\r\nConnection: Upgrade\r\nUpgrade: %s\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", tt.upgrade)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.want)
			}
			head := up.lastHead()
			got := ""
			for _, l := range strings.Split(head, "\r\n") {
				if v, ok := strings.CutPrefix(l, "Upgrade: "); ok {
					got = v
				}
			}
			if got != tt.upstream {
				t.Fatalf("upstream received Upgrade %q, want %q\n%s", got, tt.upstream, head)
			}
			if tt.want != http.StatusSwitchingProtocols {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				// Whatever follows on the connection is a new request to the
				// gateway, never bytes in a tunnel.
				fmt.Fprintf(c, "GET /smuggled HTTP/1.1\r\nHost: u.test\r\nConnection: close\r\n\r\n")
				_, _ = io.ReadAll(br)
				if n := up.tunneled.Load() - before; n != 0 {
					t.Fatalf("%d lines went through a tunnel", n)
				}
				return
			}
			fmt.Fprintf(c, "ping\n")
			line, err := br.ReadString('\n')
			if err != nil || line != "ping\n" {
				t.Fatalf("websocket tunnel echo %q, %v", line, err)
			}
		})
	}
}
