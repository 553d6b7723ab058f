package proxy

import (
	"net/http"
	"net/textproto"
	"strings"
)

// FilterUpgrade removes every protocol upgrade from r but WebSocket, before
// r is forwarded: an upstream that answers 101 to an arbitrary Upgrade
// token would otherwise open a raw tunnel through the gateway, and every
// request sent through it would pass no route, limit or breaker. The rule:
//
//   - an Upgrade header listing "websocket" (any case) is forwarded as
//     exactly "Upgrade: websocket", whatever else it lists;
//   - any other Upgrade header is removed, and r goes on as a plain request
//     (RFC 9110 §7.8: a server may ignore Upgrade). An upstream that still
//     answers 101 is refused by the proxy (502): Forward (relay.go) never
//     switches a request that asked for no switch, and the WebSocket
//     handshake (forwardUpgradeFast, or httputil.ReverseProxy in Forward)
//     only to the protocol that was requested.
//
// h2c never reaches here: H2CHandler serves the h2c upgrade (and prior
// knowledge) itself; an "Upgrade: h2c" it did not take is removed like any
// other. Call FilterUpgrade once per request, before Forward.
func FilterUpgrade(r *http.Request) {
	ups, ok := r.Header["Upgrade"]
	if !ok {
		return
	}
	for _, line := range ups {
		for line != "" {
			var tok string
			tok, line, _ = strings.Cut(line, ",")
			if strings.EqualFold(textproto.TrimString(tok), "websocket") {
				r.Header["Upgrade"] = []string{"websocket"}
				return
			}
		}
	}
	delete(r.Header, "Upgrade")
}
