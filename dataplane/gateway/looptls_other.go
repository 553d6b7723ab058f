//go:build !linux

package gateway

import (
	"crypto/tls"
	"net"
)

// newTLSListener is the TLS listener of the gateway's TLS address: without
// event loops, tls.NewListener's.
func newTLSListener(l net.Listener, cfg *tls.Config) net.Listener {
	return tls.NewListener(l, cfg)
}

// serveTLS: no event loop serves TLS here (nor anything else).
func (e *loopEngine) serveTLS(*tls.Conn, []byte) bool { return false }
