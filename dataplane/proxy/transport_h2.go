package proxy

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"strings"

	"golang.org/x/net/http2"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/internal/batchwrite"
)

// wire is how one target is spoken to: the HTTP version and, for https://,
// the TLS client configuration. Targets with the same origin and wire share
// a connection pool.
type wire struct {
	// proto is what the connection speaks: ProtocolHTTP1, ProtocolH2,
	// ProtocolH2C, or "" for ALPN's choice of h2 and http/1.1 (an https://
	// target without upstream.protocol).
	proto api.UpstreamProtocol
	tls   *tls.Config // https:// only; nil means the Transport's Settings.TLSClientConfig
	key   string      // protocol and TLS settings, for the pool's name
}

// wireFor resolves the wire of target url (its scheme as configured) under
// up's protocol and tls. Validate has checked that they go together.
func wireFor(up *api.Upstream, url string) (wire, error) {
	scheme, _, _ := strings.Cut(url, ":")
	scheme = strings.ToLower(scheme)
	w := wire{proto: up.Protocol}
	switch {
	case scheme == "h2c":
		w.proto = api.ProtocolH2C
	case w.proto == "" && scheme == "http":
		w.proto = api.ProtocolHTTP1
	}
	if scheme == "https" && up.TLS != nil {
		cfg, err := up.TLS.ClientConfig()
		if err != nil {
			return wire{}, err
		}
		w.tls = cfg
		sum := sha256.Sum256([]byte(up.TLS.CA + "\x00" + up.TLS.ServerName))
		w.key = "|tls=" + hex.EncodeToString(sum[:8])
	}
	if scheme == "https" && w.proto == api.ProtocolH2C || scheme != "https" && w.proto == api.ProtocolH2 {
		return wire{}, fmt.Errorf("protocol %s cannot reach %s:// targets", w.proto, scheme)
	}
	w.key = "|" + string(w.proto) + w.key
	return w, nil
}

// acquireWire is acquire for a target of up: its pool is named by the
// target's origin and wire.
func (t *Transport) acquireWire(up *api.Upstream, url, originKey string) (*origin, error) {
	w, err := wireFor(up, url)
	if err != nil {
		return nil, err
	}
	key := originKey + w.key
	t.mu.Lock()
	defer t.mu.Unlock()
	o := t.origins[key]
	if o == nil {
		o = &origin{owner: t, key: key, rt: t.newWireTransport(w), h2: t.newH2Transport(w)}
		t.origins[key] = o
	}
	o.refs++
	return o, nil
}

// newWireTransport is newTransport with w's protocol and TLS settings:
//
//   - http1: HTTP/1.1 only, over TLS too (ALPN offers http/1.1 alone);
//   - h2: HTTP/2 over TLS only: a target that does not negotiate h2 is a
//     transport error (502), not a silent fall back to HTTP/1.1;
//   - h2c: HTTP/2 with prior knowledge over cleartext TCP;
//   - "": ALPN's choice of h2 and http/1.1 (https:// targets).
//
// Each HTTP/2 connection multiplexes many requests (gRPC streams among
// them), and request and response bodies stream both ways at once.
func (t *Transport) newWireTransport(w wire) *http.Transport {
	tr := t.newTransport(false)
	if w.tls != nil {
		tr.TLSClientConfig = w.tls
	} else if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	p := new(http.Protocols)
	switch w.proto {
	case api.ProtocolHTTP1:
		p.SetHTTP1(true)
	case api.ProtocolH2:
		p.SetHTTP2(true)
	case api.ProtocolH2C:
		p.SetUnencryptedHTTP2(true)
	default:
		p.SetHTTP1(true)
		p.SetHTTP2(true)
	}
	tr.Protocols = p
	return tr
}

// newH2Transport is the client of an h2 or h2c wire (nil for the others):
// x/net/http2's Transport, used directly (target.roundTripper), which
// multiplexes the origin's streams over as few connections as the
// target's SETTINGS_MAX_CONCURRENT_STREAMS allow, opening another only
// when those are full. It has the Settings of newTransport: the dial and
// TLS handshake timeouts (a target that cannot be reached in time is
// answered 502, not 504), the idle timeout, the response header cap, and
// no compression asked on the client's behalf; its HPACK encoder indexes
// nothing. Over TLS it offers h2
// alone, and a target that does not choose it fails the exchange (502).
func (t *Transport) newH2Transport(w wire) *http2.Transport {
	s := t.settings
	tr := &http2.Transport{
		DisableCompression: true,
		IdleConnTimeout:    s.IdleConnTimeout,
		MaxHeaderListSize:  uint32(min(s.MaxResponseHeaderBytes, 1<<32-1)),
		// No HPACK dynamic table for the requests: each carries fields
		// new every time (X-Request-Id, traceparent, X-Forwarded-For),
		// whose indexing evicts the rest at every stream; literals cost
		// the CPU less (gRPC unary through a node: about 7 % less CPU
		// per call, measured with h2load on a shared 2-core box).
		MaxEncoderHeaderTableSize: 1,
	}
	switch w.proto {
	case api.ProtocolH2C:
		tr.AllowHTTP = true
		tr.DialTLSContext = func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			c, err := t.dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return batchwrite.New(c, nil), nil // a request's HEADERS and DATA in one write
		}
	case api.ProtocolH2:
		cfg := w.tls
		if cfg == nil {
			cfg = s.TLSClientConfig
		}
		if cfg == nil {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		tr.TLSClientConfig = cfg
		tr.DialTLSContext = func(ctx context.Context, network, addr string, cfg *tls.Config) (net.Conn, error) {
			return t.dialH2TLS(ctx, network, addr, cfg)
		}
	default:
		return nil
	}
	return tr
}

// dialH2TLS connects to an h2 target over TLS: cfg is the Transport's,
// which offers h2 alone and names the target's host; the handshake is
// bounded by TLSHandshakeTimeout.
func (t *Transport) dialH2TLS(ctx context.Context, network, addr string, cfg *tls.Config) (net.Conn, error) {
	c, err := t.dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(c, cfg)
	hctx, cancel := context.WithTimeout(ctx, t.settings.TLSHandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != http2.NextProtoTLS {
		_ = c.Close()
		return nil, fmt.Errorf("the target negotiated %q, not h2 (upstream.protocol: h2)", p)
	}
	return batchwrite.New(tc, nil), nil // a request's HEADERS and DATA in one write (and record)
}
