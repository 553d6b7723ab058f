// Package admin serves a gateway node's admin endpoint: /status, /metrics,
// /healthz, /readyz, and the operator endpoints (breakers, degrades, local
// overrides) the node mounts on it.
//
// The endpoint binds to loopback by default. Requests from loopback peers are
// trusted; any other peer must present the node admin token as
// "Authorization: Bearer <token>" on every path except /healthz and /readyz
// (which load balancers probe). With no token configured, non-loopback peers
// are refused outright, so binding the endpoint to a public address without a
// token exposes nothing.
package admin

import (
	"crypto/subtle"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Config wires an admin endpoint. Zero fields are left out: a nil Status
// serves {} and a nil Ready is always ready.
type Config struct {
	// Token is the node admin token non-loopback peers must present; empty
	// refuses every non-loopback peer.
	Token string
	// Status returns the value served as JSON at /status.
	Status func() any
	// Ready returns nil when the node should receive traffic.
	Ready func() error
	// Gatherer serves /metrics.
	Gatherer prometheus.Gatherer
	// Extra handlers mounted as they are, keyed by pattern ("GET /breakers").
	Extra map[string]http.Handler
}

// New returns the admin handler. It is safe for concurrent use.
func New(cfg Config) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if cfg.Ready != nil {
			if err := cfg.Ready(); err != nil {
				writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": err.Error()})
				return
			}
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		var v any = struct{}{}
		if cfg.Status != nil {
			v = cfg.Status()
		}
		writeJSON(w, http.StatusOK, v)
	})
	if cfg.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}))
	}
	for pattern, h := range cfg.Extra {
		mux.Handle(pattern, h)
	}
	return &guard{token: []byte(cfg.Token), next: mux}
}

type guard struct {
	token []byte
	next  http.Handler
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || Loopback(r.RemoteAddr) {
		g.next.ServeHTTP(w, r)
		return
	}
	const prefix = "Bearer "
	h := r.Header.Get("Authorization")
	if len(g.token) == 0 || len(h) <= len(prefix) || h[:len(prefix)] != prefix ||
		subtle.ConstantTimeCompare([]byte(h[len(prefix):]), g.token) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice-node"`)
		WriteProblem(w, http.StatusUnauthorized, "unauthorized", "the node admin endpoint needs a valid admin token from non-loopback clients")
		return
	}
	g.next.ServeHTTP(w, r)
}

// Loopback reports whether a request's remote address is a loopback address.
func Loopback(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// WriteProblem writes an application/problem+json error.
func WriteProblem(w http.ResponseWriter, status int, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": title, "status": status, "detail": detail})
}
