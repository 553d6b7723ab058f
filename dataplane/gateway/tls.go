package gateway

import (
	"crypto/x509"
	"fmt"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicegw/sluice/dataplane/tlsreload"
)

// The TLS listener (Config.ListenTLS) is wired here: its socket and its
// certificate reloader. Listen wraps the socket in a TLS listener
// (newTLSListener) as Listeners.TLS, and Serve's dispatcher serves each TLS connection by ALPN
// (h2, gRPC among it, to HTTP/2; http/1.1 or none to HTTP/1.1), through the
// same request path as the cleartext listener; Serve runs the reloader.

// tlsListener is the TLS part of Listeners.
type tlsListener struct {
	l     net.Listener // TCP; the TLS server wraps it
	certs *tlsreload.Reloader
}

// listenTLS loads Config.TLSCertFile and TLSKeyFile and binds
// Config.ListenTLS; it returns nil, nil when ListenTLS is empty.
func (n *Node) listenTLS() (*tlsListener, error) {
	if n.cfg.ListenTLS == "" {
		if n.cfg.TLSCertFile != "" || n.cfg.TLSKeyFile != "" {
			return nil, fmt.Errorf("a TLS certificate and key need a TLS address to serve on (--listen-tls)")
		}
		return nil, nil
	}
	reloads := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_tls_cert_reloads_total",
		Help: "Attempts to load changed TLS certificate files, by result (ok, error: the previous certificate is still served).",
	}, []string{"result"})
	notAfter := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_tls_cert_not_after_seconds",
		Help: "Expiry (Unix time) of the TLS certificate the traffic listener serves.",
	})
	ocspRequests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_tls_ocsp_requests_total",
		Help: "OCSP requests for the served certificate's staple (--tls-ocsp-staple), by result (ok, error: see the log).",
	}, []string{"result"})
	stapleUntil := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_tls_ocsp_staple_next_update_seconds",
		Help: "NextUpdate (Unix time) of the OCSP response stapled to TLS handshakes; 0 when none is stapled.",
	})
	certs, err := tlsreload.New(tlsreload.Settings{
		CertFile: n.cfg.TLSCertFile, KeyFile: n.cfg.TLSKeyFile, Logger: n.log, Interval: n.cfg.TLSReloadInterval,
		Staple: n.cfg.TLSOCSPStaple,
		OnStaple: func(err error, until time.Time) {
			if err != nil {
				ocspRequests.WithLabelValues("error").Inc()
			} else {
				ocspRequests.WithLabelValues("ok").Inc()
			}
			if until.IsZero() {
				stapleUntil.Set(0)
			} else {
				stapleUntil.Set(float64(until.Unix()))
			}
		},
		OnReload: func(err error, leaf *x509.Certificate) {
			if err != nil {
				reloads.WithLabelValues("error").Inc()
				return
			}
			reloads.WithLabelValues("ok").Inc()
			notAfter.Set(float64(leaf.NotAfter.Unix()))
		},
	})
	if err != nil {
		return nil, err
	}
	notAfter.Set(float64(certs.Certificate().Leaf.NotAfter.Unix()))
	if err := n.metrics.Registry.Register(reloads); err == nil {
		_ = n.metrics.Registry.Register(notAfter)
		if n.cfg.TLSOCSPStaple {
			_ = n.metrics.Registry.Register(ocspRequests)
			_ = n.metrics.Registry.Register(stapleUntil)
		}
	} // a second Listen on one node keeps the first registration's series
	l, err := net.Listen("tcp", n.cfg.ListenTLS)
	if err != nil {
		return nil, fmt.Errorf("listening on TLS address %s: %w", n.cfg.ListenTLS, err)
	}
	n.cfg.Snapshot.Transport.SetListeners(l.Addr().String())
	return &tlsListener{l: l, certs: certs}, nil
}

// TLSAddr returns the bound TLS address, or nil without a TLS listener.
func (ls *Listeners) TLSAddr() net.Addr {
	if ls.tls == nil {
		return nil
	}
	return ls.tls.l.Addr()
}
