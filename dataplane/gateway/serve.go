package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"

	"github.com/sluicegw/sluice/dataplane/admin"
	"github.com/sluicegw/sluice/dataplane/breaker"
	"github.com/sluicegw/sluice/dataplane/degrade"
	"github.com/sluicegw/sluice/dataplane/proxy"
)

// ServeHTTP serves one request through the current snapshot, read once.
func (n *Node) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := n.current.Load()
	if s == nil {
		proxy.WriteProblem(w, r, http.StatusServiceUnavailable, "No rules", "the gateway has no rule set applied yet")
		return
	}
	s.ServeHTTP(w, r)
}

// Listeners are the node's bound sockets, for callers that listen on port 0.
type Listeners struct {
	Traffic net.Listener
	Admin   net.Listener
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
	return &Listeners{Traffic: tl, Admin: al}, nil
}

// AdminHandler returns the node admin endpoint's handler.
func (n *Node) AdminHandler() http.Handler {
	return admin.New(admin.Config{
		Token:    n.cfg.AdminToken,
		Status:   func() any { return n.Status() },
		Ready:    n.Ready,
		Gatherer: n.metrics.Registry,
		Extra:    n.adminExtras(),
	})
}

// Serve serves traffic and the admin endpoint on ls until ctx ends, then
// stops accepting, fails /readyz, and drains in-flight requests for up to
// ShutdownTimeout. It returns nil after a clean drain.
func (n *Node) Serve(ctx context.Context, ls *Listeners) error {
	traffic := &http.Server{
		// h2c lets clients speak HTTP/2 without TLS; HTTP/1.1 is served as usual.
		Handler:           h2c.NewHandler(n, &http2.Server{}),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    proxy.MaxHeaderBytes,
		ErrorLog:          nil,
	}
	adm := &http.Server{Handler: n.AdminHandler(), ReadHeaderTimeout: 5 * time.Second, MaxHeaderBytes: 64 << 10}
	errc := make(chan error, 2)
	var wg sync.WaitGroup
	for _, s := range []struct {
		srv *http.Server
		l   net.Listener
	}{{traffic, ls.Traffic}, {adm, ls.Admin}} {
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
	err := traffic.Shutdown(sctx)
	_ = adm.Shutdown(sctx)
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
	return extra
}
