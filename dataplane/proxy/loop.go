package proxy

import (
	"fmt"
	"github.com/sluicegw/sluice/dataplane/answer"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultMaxHops is the most Via entries a request may carry into the
// gateway when Settings.MaxHops is zero.
const DefaultMaxHops = 10

// StatusLoopDetected is the status of a request refused as looping (RFC
// 5842's 508 Loop Detected).
const StatusLoopDetected = http.StatusLoopDetected

// viaName is the Via pseudonym of a node: "sluice-" and its id, with every
// character a Via token cannot carry replaced by '-'.
func viaName(nodeID string) string {
	if nodeID == "" {
		if h, err := os.Hostname(); err == nil {
			nodeID = h
		}
	}
	b := []byte("sluice-" + nodeID)
	for i := 7; i < len(b); i++ {
		if c := b[i]; !isTokenChar(c) {
			b[i] = '-'
		}
	}
	return string(b)
}

// isTokenChar reports whether c may appear in an RFC 9110 token.
func isTokenChar(c byte) bool {
	return tokenByte[c]
}

// viaValue is the Via entry this node adds to a request received with
// protocol major.minor: "1.1 sluice-gw-1", "2 sluice-gw-1".
func (t *Transport) viaValue(major, minor int) string {
	switch {
	case major == 1 && minor == 1:
		return t.via11
	case major == 2:
		return t.via2
	}
	return strconv.Itoa(major) + "." + strconv.Itoa(minor) + " " + t.via
}

// viaHeader is the Via header of a request that arrived without one. The
// common cases share one slice of capacity 1 (read only: an append copies).
func (t *Transport) viaHeader(major, minor int) []string {
	switch {
	case major == 1 && minor == 1:
		return t.via11s
	case major == 2:
		return t.via2s
	}
	return []string{t.viaValue(major, minor)}
}

// Looping reports whether r has gone round a loop: its Via header names this
// node (Settings.NodeID) as one of the proxies it went through, or holds at
// least Settings.MaxHops entries. The caller answers such a request with
// WriteLoopDetected instead of forwarding it again. A request without Via
// costs one map lookup.
func (t *Transport) Looping(r *http.Request) bool {
	vs, ok := r.Header["Via"]
	if !ok {
		return false
	}
	return t.LoopingVia(vs)
}

// LoopingVia is Looping on a request's Via header lines, for serving stacks
// other than net/http.
func (t *Transport) LoopingVia(vs []string) bool {
	hops := 0
	for _, v := range vs {
		for v != "" {
			var entry string
			entry, v, _ = strings.Cut(v, ",")
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			hops++
			// received-protocol RWS received-by [ RWS comment ]
			_, by, _ := strings.Cut(entry, " ")
			by = strings.TrimLeft(by, " \t")
			if i := strings.IndexAny(by, " \t"); i >= 0 {
				by = by[:i]
			}
			if strings.EqualFold(by, t.via) {
				return true
			}
		}
	}
	return hops >= t.settings.MaxHops
}

// WriteLoopDetected answers a looping request: 508 problem+json.
func WriteLoopDetected(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Connection", "close")
	answer.WriteProblem(w, r, StatusLoopDetected, "Loop detected",
		"the request already went through this gateway, or through too many proxies (Via); check the route's targets")
}

// selfSet is what the gateway's own listeners accept: the addresses bound
// and, for wildcard listeners, their ports on every local address.
type selfSet struct {
	mu        sync.RWMutex
	listeners []listener
	local     map[netip.Addr]bool // this machine's interface addresses, loopback included
	hostname  string              // lower case
}

type listener struct {
	desc string     // as given, for errors
	addr netip.Addr // invalid or unspecified: every address
	port uint16
}

// SetListeners tells the Transport which addresses (host:port, as given to
// --listen and --admin, or as bound) are the gateway's own, so that routes
// whose targets point at them are refused at compile time (they would send
// every request round a loop). Calling it again adds to the set. Host names
// other than localhost are not resolved; at run time Looping catches what
// this misses. Safe for concurrent use.
func (t *Transport) SetListeners(addrs ...string) {
	var ls []listener
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			continue
		}
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil || p == 0 {
			continue
		}
		l := listener{desc: a, port: uint16(p)}
		switch h := strings.ToLower(strings.Trim(host, "[]")); {
		case h == "":
		case h == "localhost":
			l.addr = netip.MustParseAddr("127.0.0.1")
			ls = append(ls, listener{desc: a, addr: netip.IPv6Loopback(), port: uint16(p)})
		default:
			if ip, err := netip.ParseAddr(h); err == nil {
				l.addr = ip.Unmap()
			} else {
				continue // a name: not resolved
			}
		}
		ls = append(ls, l)
	}
	local := map[netip.Addr]bool{}
	if ifas, err := net.InterfaceAddrs(); err == nil {
		for _, ifa := range ifas {
			if p, err := netip.ParsePrefix(ifa.String()); err == nil {
				local[p.Addr().Unmap()] = true
			}
		}
	}
	hn, _ := os.Hostname()
	s := &t.self
	s.mu.Lock()
	s.listeners = append(s.listeners, ls...)
	s.local, s.hostname = local, strings.ToLower(hn)
	s.mu.Unlock()
}

// checkSelf returns an error when target (scheme http or https, host[:port])
// is one of the gateway's own listeners.
func (t *Transport) checkSelf(scheme, hostport string) error {
	s := &t.self
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.listeners) == 0 {
		return nil
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, "80"
		if scheme == "https" {
			port = "443"
		}
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	var addr netip.Addr // invalid: some local address, unknown which
	anyLocal := false
	switch {
	case host == "localhost" || strings.HasSuffix(host, ".localhost"):
		addr = netip.MustParseAddr("127.0.0.1")
	case host == s.hostname && host != "":
		anyLocal = true
	default:
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return nil // a name: not resolved here; Looping catches it at run time
		}
		addr = ip.Unmap()
		if addr.IsUnspecified() { // connecting to 0.0.0.0 reaches this machine
			anyLocal = true
		}
	}
	isLocal := anyLocal || addr.IsLoopback() || s.local[addr]
	for _, l := range s.listeners {
		if uint16(p) != l.port {
			continue
		}
		wildcard := !l.addr.IsValid() || l.addr.IsUnspecified()
		if (wildcard && isLocal) || (!wildcard && (addr == l.addr || (anyLocal && s.local[l.addr]))) {
			return fmt.Errorf("points at this gateway's own listener %s: every request would loop back into the gateway", l.desc)
		}
	}
	return nil
}

// Deadlines the client's writer may set directly: net/http's HTTP/1 and
// HTTP/2 writers do, so the common case needs no http.ResponseController
// (which costs an allocation per call).
type (
	readDeadliner  interface{ SetReadDeadline(time.Time) error }
	writeDeadliner interface{ SetWriteDeadline(time.Time) error }
)

// SetReadDeadline sets the read deadline of w's connection (or stream), as
// http.ResponseController does (following Unwrap), without allocating. It
// returns http.ErrNotSupported when w cannot.
func SetReadDeadline(w http.ResponseWriter, t time.Time) error {
	for {
		switch d := w.(type) {
		case readDeadliner:
			return d.SetReadDeadline(t)
		case interface{ Unwrap() http.ResponseWriter }:
			w = d.Unwrap()
		default:
			return http.ErrNotSupported
		}
	}
}

// SetWriteDeadline is SetReadDeadline for writes.
func SetWriteDeadline(w http.ResponseWriter, t time.Time) error {
	for {
		switch d := w.(type) {
		case writeDeadliner:
			return d.SetWriteDeadline(t)
		case interface{ Unwrap() http.ResponseWriter }:
			w = d.Unwrap()
		default:
			return http.ErrNotSupported
		}
	}
}
