package proxy

import (
	"net/http"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
)

// H2CHandler wraps the gateway's traffic handler so that its cleartext
// server also accepts HTTP/2 without TLS: with prior knowledge, and through
// the HTTP/1.1 "Upgrade: h2c" handshake. HTTP/1.1 requests pass through
// untouched. The HTTP/2 connections take their limits from the
// http.Server serving them, so set its MaxHeaderBytes (to MaxHeaderBytes):
// it becomes the advertised SETTINGS_MAX_HEADER_LIST_SIZE.
//
// (Setting http.Server.Protocols with SetUnencryptedHTTP2(true) is the
// standard library's equivalent for prior-knowledge clients; it does not do
// the Upgrade handshake.)
func H2CHandler(h http.Handler) http.Handler {
	return h2c.NewHandler(h, &http2.Server{})
}
