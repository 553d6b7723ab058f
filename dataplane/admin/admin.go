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
//
// Because loopback is trusted, a web page the operator's browser opens must
// not be able to reach the endpoint through the browser (DNS rebinding: a
// name the attacker controls resolving to 127.0.0.1; or a plain cross-site
// form post). So on every path but /healthz and /readyz, before the token
// check:
//
//   - the Host header must name the endpoint: localhost, a loopback address,
//     the host of the admin listen address (with a wildcard listen address,
//     any address of this machine's interfaces), or one of
//     Settings.AllowedHosts; any port. Otherwise 421 Misdirected Request.
//   - a request from another origin is refused with 403: an Origin header
//     that is not http://<Host>, a Sec-Fetch-Site other than same-origin or
//     none, and on POST, PUT, PATCH and DELETE a Content-Type other than
//     application/json (which a cross-site page cannot send without a CORS
//     preflight the endpoint never grants).
//
// curl from the node itself passes all of these (curl sends Host:
// 127.0.0.1:9901 and no Origin); give mutations their type:
// curl --json '{"rule":"checkout","level":1,"ttl":"10m"}' http://127.0.0.1:9901/degrade.
package admin

import (
	"crypto/subtle"
	"encoding/json"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicegw/sluice/dataplane/answer"
)

// Settings wire an admin endpoint. Zero fields are left out: a nil Status
// serves {} and a nil Ready is always ready.
type Settings struct {
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
	// Addr is the admin listen address (host:port); its host is an allowed
	// Host. A wildcard or empty host allows this machine's interface
	// addresses instead.
	Addr string
	// AllowedHosts are further names (or addresses) the Host header may
	// carry, without port, compared case-insensitively: the names operators
	// and scrapers reach the endpoint by.
	AllowedHosts []string
}

// Config is the former name of Settings, kept only until its last caller
// (package gateway) is renamed.
//
// Deprecated: use Settings.
type Config = Settings

// New returns the admin handler. It is safe for concurrent use.
func New(cfg Settings) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if cfg.Ready != nil {
			if err := cfg.Ready(); err != nil {
				WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": err.Error()})
				return
			}
		}
		WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		var v any = struct{}{}
		if cfg.Status != nil {
			v = cfg.Status()
		}
		WriteJSON(w, http.StatusOK, v)
	})
	if cfg.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}))
	}
	for pattern, h := range cfg.Extra {
		mux.Handle(pattern, h)
	}
	return &guard{token: []byte(cfg.Token), next: mux, hosts: allowedHosts(cfg)}
}

type guard struct {
	token []byte
	next  http.Handler
	hosts hostSet
}

// hostSet is what a Host header may name.
type hostSet struct {
	names map[string]bool     // lower case, no port, no brackets
	addrs map[netip.Addr]bool // besides loopback
}

func allowedHosts(cfg Settings) hostSet {
	hs := hostSet{names: map[string]bool{"localhost": true}, addrs: map[netip.Addr]bool{}}
	add := func(h string) {
		h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
		if h == "" {
			return
		}
		if a, err := netip.ParseAddr(h); err == nil {
			hs.addrs[a.Unmap()] = true
			return
		}
		hs.names[h] = true
	}
	for _, h := range cfg.AllowedHosts {
		if host, _, err := net.SplitHostPort(h); err == nil {
			h = host
		}
		add(h)
	}
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		host = cfg.Addr
	}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); host == "" || (err == nil && a.IsUnspecified()) {
		// Listening on every interface: any of this machine's addresses.
		if ifas, err := net.InterfaceAddrs(); err == nil {
			for _, ifa := range ifas {
				if p, err := netip.ParsePrefix(ifa.String()); err == nil {
					hs.addrs[p.Addr().Unmap()] = true
				}
			}
		}
	} else {
		add(host)
	}
	return hs
}

// allows reports whether a Host header value names the endpoint.
func (hs hostSet) allows(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap()
		return a.IsLoopback() || hs.addrs[a]
	}
	return hs.names[host]
}

// crossOrigin returns why r comes from another origin than the endpoint's,
// or "" when it does not.
func crossOrigin(r *http.Request) string {
	if o, ok := r.Header["Origin"]; ok {
		u, err := url.Parse(strings.Join(o, ","))
		if len(o) != 1 || err != nil || u.Scheme != "http" || !strings.EqualFold(u.Host, r.Host) || u.Path != "" {
			return "the request's Origin is not this endpoint's"
		}
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return "the request comes from another site (Sec-Fetch-Site)"
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			return "a change must be sent as Content-Type: application/json"
		}
	}
	return ""
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
		g.next.ServeHTTP(w, r)
		return
	}
	if !g.hosts.allows(r.Host) {
		answer.WriteProblem(w, r, http.StatusMisdirectedRequest, "unknown host",
			"the Host header does not name this admin endpoint; add the name to --admin-allowed-hosts")
		return
	}
	if why := crossOrigin(r); why != "" {
		answer.WriteProblem(w, r, http.StatusForbidden, "cross-origin request refused", why)
		return
	}
	if Loopback(r.RemoteAddr) {
		g.next.ServeHTTP(w, r)
		return
	}
	const prefix = "Bearer "
	h := r.Header.Get("Authorization")
	if len(g.token) == 0 || len(h) <= len(prefix) || h[:len(prefix)] != prefix ||
		subtle.ConstantTimeCompare([]byte(h[len(prefix):]), g.token) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice-node"`)
		answer.WriteProblem(w, r, http.StatusUnauthorized, "unauthorized", "the node admin endpoint needs a valid admin token from non-loopback clients")
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

// WriteJSON answers with status and v as indented JSON, not to be cached:
// the one JSON writer of the node admin endpoint and the handlers mounted on
// it (breaker.Handlers, degrade.Handlers). Errors are written by
// answer.WriteProblem, as the gateway's own are.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
