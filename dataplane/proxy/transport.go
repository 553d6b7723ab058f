package proxy

import (
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

// MaxHeaderBytes is the recommended http.Server.MaxHeaderBytes for the
// gateway's traffic listener (and the HTTP/2 limit H2CHandler sets). The
// proxy cannot enforce it itself: the server reads the header before any
// handler runs, and answers 431 Request Header Fields Too Large to a larger
// one (net/http allows 4 KiB of slack above the figure).
const MaxHeaderBytes = 64 << 10

// Settings configure the upstream connections. Every zero field takes the
// default named beside it.
type Settings struct {
	// DialTimeout bounds a TCP connect to a target; default 5s. A target
	// that cannot be reached in time is answered 502, not 504.
	DialTimeout time.Duration
	// KeepAlive is the TCP keep-alive probe period; default 30s.
	KeepAlive time.Duration
	// MaxIdleConnsPerHost is the number of idle keep-alive connections kept
	// per target origin; default 256.
	MaxIdleConnsPerHost int
	// IdleConnTimeout closes a keep-alive connection idle for that long;
	// default 90s.
	IdleConnTimeout time.Duration
	// TLSHandshakeTimeout bounds the TLS handshake with https targets;
	// default 10s.
	TLSHandshakeTimeout time.Duration
	// MaxResponseHeaderBytes caps an upstream's response header; default
	// 1 MiB. A larger header is a transport error (502). It applies to
	// net/http's transports (h2c, h2 and https targets, WebSocket
	// handshakes); cleartext HTTP/1.1 targets are read by fastPool, whose
	// cap is MaxHeaderBytes (64 KiB) on both engines.
	MaxResponseHeaderBytes int64
	// TLSClientConfig is used for https targets; nil means the system roots.
	TLSClientConfig *tls.Config
	// DecodeSlashes decodes %2F in request paths to "/" before matching and
	// forwards the decoded path. The default keeps %2F inside its segment,
	// so that "/api%2Forders" neither matches nor is forwarded as
	// "/api/orders". Turn it on when upstreams decode %2F into a separator.
	// It applies to Routers built after it is set, that is, to all of them.
	DecodeSlashes bool
	// Logger receives debug logs (clients gone, upstream copy errors); nil
	// means slog.Default().
	Logger *slog.Logger
	// NodeID names this gateway in the Via header it adds to every
	// forwarded request ("1.1 sluice-<NodeID>", RFC 9110), by which Looping
	// recognises a request that came back; empty means the host name.
	NodeID string
	// MaxHops is the most Via entries a request may arrive with before
	// Looping refuses it; zero means DefaultMaxHops.
	MaxHops int
}

func (s Settings) withDefaults() Settings {
	if s.DialTimeout <= 0 {
		s.DialTimeout = 5 * time.Second
	}
	if s.KeepAlive <= 0 {
		s.KeepAlive = 30 * time.Second
	}
	if s.MaxIdleConnsPerHost <= 0 {
		s.MaxIdleConnsPerHost = 256
	}
	if s.IdleConnTimeout <= 0 {
		s.IdleConnTimeout = 90 * time.Second
	}
	if s.TLSHandshakeTimeout <= 0 {
		s.TLSHandshakeTimeout = 10 * time.Second
	}
	if s.MaxResponseHeaderBytes <= 0 {
		s.MaxResponseHeaderBytes = 1 << 20
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	if s.MaxHops <= 0 {
		s.MaxHops = DefaultMaxHops
	}
	return s
}

// SharedTransport returns the process's default Transport, made on first use
// with the zero Settings. Routers built on it share keep-alive connections.
var SharedTransport = sync.OnceValue(func() *Transport { return NewTransport(Settings{}) })

// Transport holds the gateway's upstream connection pools: one
// http.Transport per target origin (scheme, host and port), all with the
// same Settings, shared by every Router compiled with it. A process makes
// one (or uses SharedTransport) and passes it to every NewRouter, so keep-alive connections to an
// origin survive rule changes; when the last Router using an origin is
// retired (Router.CloseIdle), that origin's idle connections are closed.
//
// Create it with NewTransport; the zero value is not usable. It is safe for
// concurrent use.
type Transport struct {
	settings Settings
	dialer   *net.Dialer
	buffers  *bufferPool
	log      *slog.Logger

	mu      sync.Mutex
	origins map[string]*origin

	via, via11, via2 string   // Via pseudonym; "1.1 " and "2 " entries
	via11s, via2s    []string // the entries as header values, shared read-only
	self             selfSet
}

// origin is one target origin's transport, counted by the upstream targets
// that use it.
type origin struct {
	owner *Transport
	key   string
	rt    *http.Transport
	h2    *http2.Transport // h2 and h2c wires' client (newH2Transport); nil for the others
	refs  int
	loop  loopPools // the event-loop engine's pools (loopforward_linux.go)
}

// NewTransport returns an empty set of connection pools with s's settings.
func NewTransport(s Settings) *Transport {
	s = s.withDefaults()
	via := viaName(s.NodeID)
	return &Transport{
		settings: s,
		dialer:   &net.Dialer{Timeout: s.DialTimeout, KeepAlive: s.KeepAlive},
		buffers:  &bufferPool{},
		log:      s.Logger,
		origins:  map[string]*origin{},
		via:      via,
		via11:    "1.1 " + via,
		via2:     "2 " + via,
		via11s:   []string{"1.1 " + via},
		via2s:    []string{"2 " + via},
	}
}

// Targets take their pool with acquireWire (transport_h2.go): pools are
// named by origin, protocol and TLS settings.

// release counts one user less; the last one out closes the origin's idle
// connections and forgets it.
func (t *Transport) release(o *origin) {
	t.mu.Lock()
	o.refs--
	last := o.refs == 0
	if last && t.origins[o.key] == o {
		delete(t.origins, o.key)
	}
	t.mu.Unlock()
	if last {
		o.rt.CloseIdleConnections()
		if o.h2 != nil {
			o.h2.CloseIdleConnections()
		}
		closeFast(o)
		closeLoops(o)
	}
}

// Origins returns the number of target origins currently pooled.
func (t *Transport) Origins() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.origins)
}

// CloseIdle closes the idle connections of every origin, as at shutdown.
// Routers keep working: new connections are dialed on demand.
func (t *Transport) CloseIdle() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range t.origins {
		o.rt.CloseIdleConnections()
		if o.h2 != nil {
			o.h2.CloseIdleConnections()
		}
		if c, ok := fastClients.Load(o); ok {
			c.(*fastPool).CloseIdleConnections()
		}
		closeLoopsIdle(o)
	}
}

func (t *Transport) newTransport(h2c bool) *http.Transport {
	s := t.settings
	tr := &http.Transport{
		Proxy:                  nil, // never route upstream traffic through $HTTP_PROXY
		DialContext:            t.dialer.DialContext,
		MaxIdleConns:           0, // bounded per host below
		MaxIdleConnsPerHost:    s.MaxIdleConnsPerHost,
		IdleConnTimeout:        s.IdleConnTimeout,
		TLSHandshakeTimeout:    s.TLSHandshakeTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: s.MaxResponseHeaderBytes,
		TLSClientConfig:        s.TLSClientConfig,
		ForceAttemptHTTP2:      true,
		// Pass the client's Accept-Encoding through untouched instead of
		// asking for gzip and decompressing on the client's behalf.
		DisableCompression: true,
	}
	if h2c {
		// Prior-knowledge HTTP/2 over cleartext TCP, for h2c:// targets.
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	return tr
}

// bufferSize is the size of the buffers ReverseProxy copies bodies through.
const bufferSize = 32 << 10

// bufferPool is an httputil.BufferPool of 32 KiB buffers. It stores array
// pointers, so Get and Put do not allocate.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[bufferSize]byte); ok {
		return v[:]
	}
	return new([bufferSize]byte)[:]
}

func (b *bufferPool) Put(buf []byte) {
	if len(buf) != bufferSize {
		return
	}
	b.p.Put((*[bufferSize]byte)(buf))
}
