// Package proxy routes the gateway's requests and forwards them upstream.
//
// NewRouter turns a rule set's routes into a Router, with one Upstream per
// route. Per request the integrator calls
//
//	answer.EnsureRequestID(w, r)       // first, so that every answer carries it
//	m := router.Match(r)               // cleaned path and the matched route (or nil)
//	if m.Invalid != "" { answer.WriteProblem(w, r, 400, "Bad request", m.Invalid); return }
//	if m.Route == nil { answer.WriteNoRoute(w, r); return }
//	proxy.FilterUpgrade(r)             // only WebSocket may switch protocols
//	... key check, degrade, limits, breaker ...
//	o := m.Route.Upstream.Forward(w, r, m)
//	... record o: Status, Err (upstream failure), Timeout, ClientGone, Upgraded, Duration ...
//	if o.Aborted { panic(http.ErrAbortHandler) }
//
// After a hot swap the retired Router's CloseIdle releases its connection
// pools. Connections come from one Transport per process (SharedTransport,
// or NewTransport), shared by every Router, so keep-alive connections
// survive rule changes.
//
// # Paths
//
// A route is matched on the same path the upstream receives. RequestPath
// takes the request's escaped path (r.URL.EscapedPath, the bytes the client
// sent, not the decoded r.URL.Path) and
//
//  1. decodes escaped unreserved characters (ALPHA DIGIT - . _ ~), so that
//     "%2e%2e" is seen as the ".." it means to any upstream, upper-cases the
//     hex of the other escapes, and escapes bytes that may not appear raw;
//  2. cleans it with api.CleanPath: "//" collapsed, "." and ".." resolved
//     (never above "/"), a trailing slash kept.
//
// So "/api/orders/../orders", "//api//orders" and "/api/orders/%2e%2e/x"
// are matched, limited and forwarded as "/api/orders", "/api/orders" and
// "/api/x". An encoded slash (%2F, either case) follows the Router's
// SlashPolicy (RouterSettings.EncodedSlashes, the gateway's
// --encoded-slashes), because upstreams disagree on it and the gateway must
// not match one path while the upstream routes another:
//
//   - SlashReject (the default of NewRouterWith and of the gateway): the
//     request is refused with 400 (Match.Invalid);
//   - SlashDecode: %2F becomes "/" before cleaning, so "/api%2Forders" is
//     matched, limited and forwarded as "/api/orders";
//   - SlashKeep: "/api%2Forders" is one segment, does not match pathPrefix
//     "/api/orders", and is forwarded as "/api%2Forders", byte for byte what
//     was matched (for upstreams that never decode it).
//
// NewRouter keeps the older Settings.DecodeSlashes switch: decode when set,
// keep otherwise. Rule paths are put in the same form when compiled, and
// matching is case sensitive. The query string is not matched, and is forwarded as sent, except
// that parameters net/url cannot parse (a bad escape, a ";" separator) are
// dropped, as httputil.ReverseProxy does, so that the upstream cannot read a
// parameter the gateway (limit keys on query:NAME) did not see.
//
// # Matching
//
// A route matches when every constraint it sets holds:
//
//   - path: exact equality; pathPrefix: segment-aware, so "/api/orders"
//     matches "/api/orders" and "/api/orders/1" but not "/api/ordersX", and
//     a prefix written with a trailing slash ("/api/orders/") matches only
//     below it; pathRegex: RE2, matched unanchored against the cleaned
//     escaped path (write ^ and $ to anchor);
//   - hosts (any of them): compared case-insensitively with the Host header
//     less one trailing dot; "*.example.com" matches any host ending in
//     ".example.com" with at least one label before it (not "example.com"
//     itself); the request's port is ignored unless the rule names one, and
//     then it must be the same;
//   - methods (any of them): exact, case-sensitive; a route that lists GET
//     also matches HEAD (a HEAD is a GET without the body, and counts
//     against the same limits). A request whose method is neither an
//     upper-case method of the IANA HTTP Method Registry nor listed by some
//     route ("get", "Get", "FOO") is refused with 400 (Match.Invalid), as
//     nginx refuses lower-case methods, instead of falling through to a
//     catch-all route that skips the limits of the route it meant;
//   - headers: each named header must have a value exactly equal to the
//     rule's (any one of its values, if repeated).
//
// # Precedence
//
// When several routes match, the most specific wins. Routes fall in four
// tiers, tried in order; the first tier with a match decides:
//
//  1. exact path;
//  2. path prefix, longest first (pathPrefix "/" excepted);
//  3. path regex;
//  4. catch-alls: pathPrefix "/" or no path constraint.
//
// Regexes outrank catch-alls so that a regex route is reachable beside a
// default route. Within one tier (for prefixes, one prefix), routes are
// ordered by host, exact before wildcard (the longer wildcard suffix first)
// before any host; then by the number of constraints (methods count as one,
// each header as one), more first; then by document order. A route with
// several hosts ranks by the host that matched.
//
// Match and Lookup do not allocate when the request path is already clean;
// a lookup costs a map probe for the exact path, one per segment boundary
// for prefixes, then the regexes and catch-alls in order.
//
// # Forwarding
//
// Forward sends the request through the target's client itself (relay.go,
// with pooled 32 KiB buffers), for HTTP/2 streams (h2, h2c, gRPC) and
// HTTP/1.1 requests bridged from the fasthttp engine alike;
// httputil.ReverseProxy (Rewrite) is left only for a protocol switch
// (WebSocket) that reaches Forward: one bridged to an https:// or h2c
// target (ForwardFast's own upgrades are forwardUpgradeFast's). The client for
// cleartext HTTP/1.1 targets is the origin's fastPool (fastTransport:
// fasthttp's request writer and response parser, no goroutine per
// connection or request, the pool the HTTP/1.1 engines use), x/net/http2's
// Transport for h2 and h2c targets (streams multiplexed over a few
// connections per origin), and net/http's Transport for https targets with
// ALPN's choice or HTTP/1.1 and for every protocol switch; the choice is
// made once, in target.roundTripper.
// It sets X-Forwarded-For (the peer appended to the client's list),
// X-Forwarded-Host and X-Forwarded-Proto, sends the target's host as Host,
// passes a sane X-Request-Id through or generates one and returns it on the
// response. Hop-by-hop headers are removed both ways. Only WebSocket
// upgrades pass (the timeout then bounds the handshake only): FilterUpgrade,
// called by the integrator before Forward, removes every other Upgrade token,
// so that an upstream answering 101 to anything cannot open a tunnel that
// carries further requests past every limit.
// Targets are picked by smooth weighted round-robin. h2c:// targets are
// spoken to with HTTP/2 over cleartext (prior knowledge); H2CHandler lets
// the gateway's own server accept h2c.
//
// ForwardFast is Forward for the fasthttp engine (the fasthttp request in,
// the answer read straight into the fasthttp response), and ForwardLoop for
// the event-loop engine (Linux): the same head, parser and cleaning, over
// upstream connections of the caller's event loop, returning at once and
// ending with a callback on the loop; an answer whose body must stream
// leaves the loop for the origin's fastPool (adopt). LoopCapable tells the
// routes a loop may forward (cleartext HTTP/1.1 targets).
//
// Failures are application/problem+json (package answer writes them): no
// route 404 (answer.WriteNoRoute), an unreachable or refusing target 502,
// the route's timeout 504. A client that goes away gets nothing and is
// recorded as 499. Bodies name the
// request id and carry only fixed phrases, never internal error text.
//
// The server, not this package, bounds request headers: set
// http.Server.MaxHeaderBytes to MaxHeaderBytes; a larger header is refused
// with 431 before any handler runs.
//
// # Protocols and gRPC
//
// A route's upstream.protocol and upstream.tls choose how its targets are
// spoken to (transport_h2.go): HTTP/1.1 only, HTTP/2 over TLS only (ALPN h2
// required), cleartext HTTP/2, or, left out, by each target's scheme;
// https:// targets are verified against the system roots or tls.ca, under
// tls.serverName. Each origin, protocol and TLS setting has its own pool.
//
// gRPC requests (answer.IsGRPC: content-type application/grpc*) are
// forwarded as any other, with trailers; their deadline is the shorter of
// the client's grpc-timeout and the route's timeout, and the upstream is
// sent that one. Every answer the gateway writes itself to a gRPC request
// is a gRPC answer (answer.WriteGRPCStatus: HTTP 200, Trailers-Only,
// grpc-status and grpc-message), written from the one problem writer
// (answer.WriteProblem, mapping the status with answer.GRPCCodeFor) and
// from the limit, breaker and degrade writers; a response cut off
// mid-stream ends with grpc-status trailers instead of a reset.
package proxy
