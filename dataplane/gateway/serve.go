package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"sync"
	"time"

	"golang.org/x/net/http2"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/api/buildinfo"
	"github.com/sluicegw/sluice/dataplane/admin"
	"github.com/sluicegw/sluice/dataplane/answer"
	"github.com/sluicegw/sluice/dataplane/breaker"
	"github.com/sluicegw/sluice/dataplane/degrade"
	"github.com/sluicegw/sluice/dataplane/proxy"
)

// ServeHTTP serves one request through the current snapshot, read once. An
// HTTP/1 request whose target is not a path is refused first (400, see
// strictTarget); a request that already went through this node (its Via
// names it) or through too many proxies is refused next, with 508, before it
// costs any limit.
func (n *Node) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 {
		if why := strictTarget(r); why != "" {
			// Refused before anything else reads it, and the connection
			// is closed after the answer.
			w.Header().Set("Connection", "close")
			answer.WriteProblem(w, r, http.StatusBadRequest, "Bad request", why)
			n.metrics.Requests.WithLabelValues("", "400").Inc()
			n.metrics.Served.Count(http.StatusBadRequest)
			return
		}
	}
	if n.cfg.Snapshot.Transport.Looping(r) {
		proxy.WriteLoopDetected(w, r)
		n.metrics.Requests.WithLabelValues("", "508").Inc()
		n.metrics.Served.Count(http.StatusLoopDetected)
		return
	}
	if r.ProtoMajor == 1 {
		// HTTP/1 write deadlines are the connection's: replace the one the
		// previous request on it may have left with the bound of the
		// gateway's own answers (404, 429, 503, ...), as the other engines
		// bound theirs; proxy.Upstream.Forward sets the route's.
		_ = proxy.SetWriteDeadline(w, time.Now().Add(api.DefaultWriteTimeout))
		// Bound a body until the route's own bound applies (snapshot).
		proxy.GuardBody(w, r, api.DefaultBodyTimeout)
	}
	s := n.current.Load()
	if s == nil {
		answer.WriteProblem(w, r, http.StatusServiceUnavailable, "No rules", "the gateway has no rule set applied yet")
		return
	}
	s.ServeHTTP(w, r)
}

// Server timeouts of the traffic listener.
const (
	// ReadHeaderTimeout bounds the reading of a request's header (a
	// slowloris client is cut off after it).
	ReadHeaderTimeout = 10 * time.Second
	// IdleTimeout closes a keep-alive connection (HTTP/1 or h2c) idle for
	// this long, as nginx's keepalive_timeout 75s does.
	IdleTimeout = 75 * time.Second
)

// Listeners are the node's bound sockets, for callers that listen on port 0.
type Listeners struct {
	// Traffic serves cleartext HTTP/1.1 and h2c (prior knowledge, or an
	// "Upgrade: h2c" request).
	Traffic net.Listener
	// TLS, when not nil, is a listener of TLS connections made by
	// Node.ListenTLS (or Listen, for Config.ListenTLS): each connection is
	// served by HTTP/2 when ALPN chose "h2", else by HTTP/1.1 on the event
	// loops, with the same request path as Traffic. The loops take over
	// only the connections of those listeners (tls.Conns over the
	// gateway's record layer): another listener's (tls.NewListener's) are
	// served when ALPN chose "h2" and closed otherwise, with a warning.
	// The caller owns the TLS configuration (certificates and their
	// reload); Serve closes the listener when it stops.
	TLS   net.Listener
	Admin net.Listener
	tls   *tlsListener // Config.ListenTLS: the certificate reloader; see TLSAddr
}

// Listen binds the traffic and admin addresses. Serve uses them; binding
// first lets a caller learn the ports and fail early on a taken address.
func (n *Node) Listen() (*Listeners, error) {
	tl, err := net.Listen("tcp", n.cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", n.cfg.Listen, err)
	}
	al, err := net.Listen("tcp", n.cfg.Admin)
	if err != nil {
		tl.Close()
		return nil, fmt.Errorf("listening on admin address %s: %w", n.cfg.Admin, err)
	}
	// Rule sets compiled from now on refuse targets that are these sockets,
	// whatever port 0 became.
	n.cfg.Snapshot.Transport.SetListeners(tl.Addr().String(), al.Addr().String())
	tlsl, err := n.listenTLS()
	if err != nil {
		tl.Close()
		al.Close()
		return nil, err
	}
	ls := &Listeners{Traffic: tl, Admin: al, tls: tlsl}
	if tlsl != nil {
		ls.TLS = newTLSListener(tlsl.l, tlsl.certs.ServerConfig())
	}
	return ls, nil
}

// ListenTLS binds addr for TLS traffic and returns the listener to set as
// Listeners.TLS: a listener of *tls.Conn over the socket with cfg (cloned;
// ALPN "h2" and "http/1.1" when cfg names no NextProtos), whose HTTP/1.1
// connections the event loops can serve (newTLSListener). The address is also
// registered as the node's own, so routes whose targets point at it are
// refused like routes to --listen. cfg is the caller's: certificates and
// their reload (GetCertificate), versions and cipher suites.
func (n *Node) ListenTLS(addr string, cfg *tls.Config) (net.Listener, error) {
	if cfg == nil {
		return nil, errors.New("listening for TLS: no TLS configuration")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on TLS address %s: %w", addr, err)
	}
	n.cfg.Snapshot.Transport.SetListeners(addr, ln.Addr().String())
	cfg = cfg.Clone()
	if len(cfg.NextProtos) == 0 {
		cfg.NextProtos = []string{http2.NextProtoTLS, "http/1.1"}
	}
	return newTLSListener(ln, cfg), nil
}

// AdminHandler returns the node admin endpoint's handler.
func (n *Node) AdminHandler() http.Handler {
	return admin.New(admin.Config{
		Token:        n.cfg.AdminToken,
		Status:       func() any { return n.Status() },
		Ready:        n.Ready,
		Gatherer:     n.metrics.Registry,
		Extra:        n.adminExtras(),
		Addr:         n.cfg.Admin,
		AllowedHosts: n.cfg.AdminAllowedHosts,
	})
}

// Serve serves traffic (ls.Traffic, and ls.TLS when set) and the admin
// endpoint on ls until ctx ends, then stops accepting, fails /readyz, and
// drains in-flight requests for up to ShutdownTimeout. It returns nil after
// a clean drain.
//
// Each traffic connection is dispatched once, by protocol (see
// dispatcher): a TLS connection by ALPN ("h2" to HTTP/2, else HTTP/1.1), a
// cleartext one by whether it opens with the HTTP/2 preface (h2c with prior
// knowledge) or not (HTTP/1.1, where "Upgrade: h2c" is still honoured).
// Both protocols serve every request through the node's one request path
// (ServeHTTP, then snapshot.Decide).
func (n *Node) Serve(ctx context.Context, ls *Listeners) error {
	h2s := &http2.Server{
		IdleTimeout: IdleTimeout,
		// No HPACK dynamic table for the answers, as nginx keeps none:
		// each carries fields new every time (X-Request-Id, RateLimit),
		// whose indexing evicts the rest at every stream; literals cost
		// the CPU less (about 5 % per stream through a limited route,
		// measured with h2load on a shared 2-core box).
		MaxEncoderHeaderTableSize: 1,
	}
	// traffic serves no connection: it is HTTP/2's base configuration
	// (dispatcher.h2base) and carries its graceful shutdown. HTTP/1.1 is
	// the event loops'.
	traffic := &http.Server{
		// Streams' bodies and responses are bounded per route
		// (bodyTimeout, writeTimeout: see proxy.Upstream.Forward); the
		// server bounds the header and the idle time between streams.
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
	}
	d, err := newDispatcher(traffic, h2s, n)
	if err != nil {
		return fmt.Errorf("configuring HTTP/2: %w", err)
	}
	d.guard = n.guardH2
	// x/net's connection errors (one line per client that breaks the
	// protocol, or resets too fast) go to the node's log, at debug level.
	d.h2log = slog.NewLogLogger(n.log.Handler(), slog.LevelDebug)
	fresh := &freshConns{conns: map[net.Conn]time.Time{}}
	traffic.ConnState = fresh.track
	adm := &http.Server{Handler: n.AdminHandler(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 2 * time.Minute, // /debug/pprof/profile takes 30s by default
		IdleTimeout:  IdleTimeout, MaxHeaderBytes: 64 << 10}
	// Started once the servers they hand connections to are set up.
	nloops := loopCount(n.cfg.EventLoops)
	loops, err := n.startLoops(d, ls.Traffic, nloops)
	if err != nil {
		return fmt.Errorf("starting the event loops: %w", err)
	}
	d.tlsLoop = func(tc *tls.Conn) bool { return loops.serveTLS(tc, nil) } // TLS HTTP/1.1 too, after its handshake
	errc := make(chan error, 4)
	var wg sync.WaitGroup
	run := func(serve func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
				errc <- err
			}
		}()
	}
	trafficLns := []net.Listener{ls.Traffic}
	if ls.TLS != nil {
		trafficLns = append(trafficLns, ls.TLS)
	}
	if ls.TLS != nil {
		run(func() error { return d.serve(ls.TLS) }) // the loops accept from ls.Traffic
	}
	run(func() error { return adm.Serve(ls.Admin) })
	reloadCtx, stopReload := context.WithCancel(ctx)
	defer stopReload()
	if ls.tls != nil {
		wg.Go(func() { _ = ls.tls.certs.Run(reloadCtx) })
	}
	attrs := []any{"listen", ls.Traffic.Addr().String(), "admin", ls.Admin.Addr().String(), "build", buildinfo.Version}
	if ls.TLS != nil {
		attrs = append(attrs, "listenTLS", ls.TLS.Addr().String())
	}
	attrs = append(attrs, "gomaxprocs", runtime.GOMAXPROCS(0), "eventLoops", nloops)
	n.log.Info("gateway serving", attrs...)
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	n.draining.Store(true)
	n.log.Info("gateway draining", "timeout", n.cfg.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), n.cfg.ShutdownTimeout)
	defer cancel()
	// http.Server.Shutdown waits up to 5s for connections that were opened
	// but never sent a request (clients dial ahead); close those that have
	// been silent for a second so a drain takes as long as the real work.
	stopReaper := make(chan struct{})
	go fresh.reap(stopReaper, time.Second)
	for _, l := range trafficLns {
		l.Close() // stop accepting; the dispatcher's serve loops return
	}
	loopErr := make(chan error, 1)
	go func() { loopErr <- loops.drain(sctx) }()
	err = d.shutdown(sctx)
	if lerr := <-loopErr; err == nil {
		err = lerr
	}
	close(stopReaper)
	_ = adm.Shutdown(sctx)
	stopReload()
	wg.Wait()
	if s := n.current.Load(); s != nil {
		s.Retire(nil)
	}
	n.log.Info("gateway stopped")
	if serveErr != nil {
		return serveErr
	}
	if err != nil {
		return fmt.Errorf("draining in-flight requests: %w", err)
	}
	return nil
}

// adminExtras are the operator endpoints of the current snapshot's breakers
// and degrade controllers.
func (n *Node) adminExtras() map[string]http.Handler {
	extra := map[string]http.Handler{}
	for k, v := range breaker.Handlers(func() *breaker.Set {
		if s := n.current.Load(); s != nil {
			return s.Breakers()
		}
		return nil
	}) {
		extra[k] = v
	}
	for k, v := range degrade.Handlers(func() *degrade.Set {
		if s := n.current.Load(); s != nil {
			return s.Degrades()
		}
		return nil
	}) {
		extra[k] = v
	}
	if n.cfg.Pprof {
		extra["/debug/pprof/"] = http.HandlerFunc(pprof.Index)
		extra["/debug/pprof/profile"] = http.HandlerFunc(pprof.Profile)
		extra["/debug/pprof/trace"] = http.HandlerFunc(pprof.Trace)
		extra["/debug/pprof/symbol"] = http.HandlerFunc(pprof.Symbol)
		extra["/debug/pprof/cmdline"] = http.HandlerFunc(pprof.Cmdline)
	}
	return extra
}

// freshConns tracks connections that have not sent a request yet.
type freshConns struct {
	mu    sync.Mutex
	conns map[net.Conn]time.Time
}

func (f *freshConns) track(c net.Conn, s http.ConnState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s == http.StateNew {
		f.conns[c] = time.Now()
	} else {
		delete(f.conns, c)
	}
}

// reap closes connections silent for longer than quiet, every quiet/4, until
// stop is closed.
func (f *freshConns) reap(stop <-chan struct{}, quiet time.Duration) {
	t := time.NewTicker(quiet / 4)
	defer t.Stop()
	for {
		f.mu.Lock()
		for c, since := range f.conns {
			if time.Since(since) > quiet {
				c.Close()
				delete(f.conns, c)
			}
		}
		f.mu.Unlock()
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// loopCount is the number of event loops when Config.EventLoops is 0: one
// per processor (GOMAXPROCS, which Go sets from the cgroup's CPU quota), as
// nginx runs one worker per core, so that a gateway that owns its cores
// serves on all of them; a configured count (--event-loops) lowers it.
func loopCount(configured int) int {
	if configured > 0 {
		return configured
	}
	return max(1, runtime.GOMAXPROCS(0))
}
