package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/admin"
	"github.com/sluicegw/sluice/dataplane/breaker"
	"github.com/sluicegw/sluice/dataplane/degrade"
	"github.com/sluicegw/sluice/dataplane/proxy"
)

// ServeHTTP serves one request through the current snapshot, read once. A
// request that already went through this node (its Via names it) or through
// too many proxies is refused first, with 508, before it costs any limit.
func (n *Node) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if n.cfg.Snapshot.Transport.Looping(r) {
		proxy.WriteLoopDetected(w, r)
		n.metrics.Requests.WithLabelValues("", "508").Inc()
		n.metrics.Served.Count(http.StatusLoopDetected)
		return
	}
	if r.ProtoMajor == 1 {
		// HTTP/1 write deadlines are the connection's: clear the one the
		// previous request on it may have left (see proxy.Upstream.Forward).
		_ = proxy.SetWriteDeadline(w, time.Time{})
		// Bound a body until the route's own bound applies (snapshot).
		proxy.GuardBody(w, r, api.DefaultBodyTimeout)
	}
	s := n.current.Load()
	if s == nil {
		proxy.WriteProblem(w, r, http.StatusServiceUnavailable, "No rules", "the gateway has no rule set applied yet")
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
	Traffic net.Listener
	Admin   net.Listener
	tls     *tlsListener // Config.ListenTLS; see TLSAddr
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
	return &Listeners{Traffic: tl, Admin: al, tls: tlsl}, nil
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

// Serve serves traffic and the admin endpoint on ls until ctx ends, then
// stops accepting, fails /readyz, and drains in-flight requests for up to
// ShutdownTimeout. It returns nil after a clean drain.
func (n *Node) Serve(ctx context.Context, ls *Listeners) error {
	traffic := &http.Server{
		// h2c lets clients speak HTTP/2 without TLS; HTTP/1.1 is served as usual.
		Handler: h2c.NewHandler(n, &http2.Server{IdleTimeout: IdleTimeout}),
		// Bodies and responses are bounded per route (bodyTimeout,
		// writeTimeout: see proxy.Upstream.Forward); the server bounds the
		// request header and the idle time between requests.
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    proxy.MaxHeaderBytes,
		ErrorLog:          nil,
	}
	fresh := &freshConns{conns: map[net.Conn]time.Time{}}
	traffic.ConnState = fresh.track
	adm := &http.Server{Handler: n.AdminHandler(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 2 * time.Minute, // /debug/pprof/profile takes 30s by default
		IdleTimeout:  IdleTimeout, MaxHeaderBytes: 64 << 10}
	errc := make(chan error, 3)
	var wg sync.WaitGroup
	servers := []struct {
		srv *http.Server
		l   net.Listener
	}{{traffic, ls.Traffic}, {adm, ls.Admin}}
	tlsSrv, tlsL, reloadCerts := n.tlsServer(ls, traffic)
	reloadCtx, stopReload := context.WithCancel(ctx)
	defer stopReload()
	if tlsSrv != nil {
		servers = append(servers, struct {
			srv *http.Server
			l   net.Listener
		}{tlsSrv, tlsL})
		wg.Go(func() { reloadCerts(reloadCtx) })
	}
	for _, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.srv.Serve(s.l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	n.log.Info("gateway serving", "listen", ls.Traffic.Addr().String(), "admin", ls.Admin.Addr().String(), "build", Build)
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
	var tlsErr error
	var tlsDone sync.WaitGroup
	if tlsSrv != nil {
		tlsDone.Go(func() { tlsErr = tlsSrv.Shutdown(sctx) })
	}
	err := traffic.Shutdown(sctx)
	tlsDone.Wait()
	err = errors.Join(err, tlsErr)
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
