package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/answer"
)

// StatusClientClosed is the status recorded, never sent, when the client
// went away before its response was complete (nginx's 499).
const StatusClientClosed = 499

// Errors reported in Outcome.Err besides the transport's own.
var (
	// ErrAborted: the upstream response was cut off after its header had
	// been sent to the client (the route's timeout fired mid-body, or the
	// upstream's body failed).
	ErrAborted = errors.New("response aborted mid-body")
)

// Outcome is what one Forward did, for the breaker, the degrade controller
// and the metrics.
type Outcome struct {
	// Status is the status code sent to the client: the upstream's, 502 or
	// 504 from the gateway, or StatusClientClosed (499, not sent) when the
	// client went away first. 101 for an upgraded connection.
	Status int
	// Err is the upstream's failure: the transport error (refused,
	// unreachable, reset, timeout) or ErrAborted. It is nil when the
	// upstream answered and its response was relayed whole, whatever its
	// status, and when the client went away first (ClientGone), which is no
	// fault of the upstream's. So Err != nil means "count against the
	// upstream" for breakers. It is for logs: never show it to clients.
	Err error
	// Timeout is set when the route's upstream timeout fired.
	Timeout bool
	// ClientGone is set when the client went away, or stalled: Status is
	// then 499, or 408 when the client's request body stalled past the
	// route's bodyTimeout; a client that took nothing of the response for the
	// route's writeTimeout is 499 too; or 504 when a gRPC client's own
	// deadline (grpc-timeout shorter than the route's timeout) ran out.
	// Such a request says nothing about the upstream's health.
	ClientGone bool
	// Upgraded is set when the connection was switched to another protocol
	// (WebSocket): Duration is then the connection's whole life, and should
	// not be judged as a slow call.
	Upgraded bool
	// Relay, with Upgraded, joins the client's connection to the upstream's
	// (ForwardFast's WebSocket): the engine runs it with the client's
	// connection once it has written the 101, and closes the connection
	// when it returns.
	Relay func(client net.Conn)
	// streamed: ForwardFast handed the body to the engine, which reports
	// the exchange's end to the balancer (fastRespBody.Close).
	streamed bool
	// Aborted is set when the response was cut off after its header had been
	// sent. The caller must then, after recording the outcome,
	// panic(http.ErrAbortHandler), so that the server resets the stream
	// instead of completing a truncated response as if it were whole.
	Aborted bool
	// Duration is the time spent in Forward.
	Duration time.Duration
}

// Upstream forwards one route's requests to its targets, chosen by smooth
// weighted round-robin. It is built by NewRouter, immutable but for the
// balancer's position, and safe for concurrent use.
type Upstream struct {
	routeID       string
	targets       []*target
	timeout       time.Duration
	timeoutDetail string
	bodyTimeout   time.Duration // client body: longest wait for the next part
	writeTimeout  time.Duration // client response: longest wait for one write
	bodyDetail    string
	strip         string // canonical escaped prefix removed before forwarding; "" for none
	balance       *balancer
	log           *slog.Logger
	health        *healthChecker // active health checks (health.go); nil without
}

// target is one upstream server with its own client and ReverseProxy.
type target struct {
	url    string // as configured, for logs
	scheme string // http or https (h2c targets are http over an HTTP/2-only transport)
	host   string // host[:port]
	base   string // escaped path prefix, without a trailing slash
	weight int
	origin *origin
	proxy  *httputil.ReverseProxy // protocol switches (WebSocket) that reach Forward (bridged)
	rt     http.RoundTripper      // the client (roundTripper), for both
	fast   bool                   // rt is the origin's fastPool (fastTransport)
	tr     *Transport             // for the Via entry
}

func newUpstream(r *api.Route, tr *Transport, decodeSlashes bool) (_ *Upstream, err error) {
	u := &Upstream{routeID: r.ID, timeout: r.Upstream.Timeout.D(), log: tr.log}
	if u.timeout <= 0 {
		u.timeout = api.DefaultUpstreamTimeout
	}
	u.timeoutDetail = fmt.Sprintf("the upstream did not answer within %s", u.timeout)
	u.bodyTimeout, u.writeTimeout = r.Upstream.BodyTimeout.D(), r.Upstream.WriteTimeout.D()
	if u.bodyTimeout <= 0 {
		u.bodyTimeout = api.DefaultBodyTimeout
	}
	if u.writeTimeout <= 0 {
		u.writeTimeout = api.DefaultWriteTimeout
	}
	u.bodyDetail = fmt.Sprintf("the request body stalled: nothing arrived for %s", u.bodyTimeout)
	if r.Upstream.StripPrefix {
		if r.Match.PathPrefix == "" {
			return nil, errors.New("stripPrefix needs match.pathPrefix")
		}
		if r.Match.PathPrefix != "/" {
			u.strip = normalizePath(r.Match.PathPrefix, decodeSlashes)
		}
	}
	if len(r.Upstream.Targets) == 0 {
		return nil, errors.New("no targets")
	}
	defer func() {
		if err != nil {
			u.release()
		}
	}()
	errLog := log.New(slogWriter{tr.log, r.ID}, "", 0)
	weights := make([]int, 0, len(r.Upstream.Targets))
	for i, tg := range r.Upstream.Targets {
		t, err := parseTarget(tg.URL)
		if err != nil {
			return nil, fmt.Errorf("target %d: %w", i, err)
		}
		if err := tr.checkSelf(t.scheme, t.host); err != nil {
			return nil, fmt.Errorf("target %d (%s): %w", i, t.url, err)
		}
		t.tr = tr
		t.weight = max(tg.Weight, 1)
		if t.origin, err = tr.acquireWire(&r.Upstream, tg.URL, t.originKey(tg.URL)); err != nil {
			return nil, fmt.Errorf("target %d (%s): %w", i, t.url, err)
		}
		t.rt = t.roundTripper() // fastrt.go
		_, t.fast = t.rt.(*fastTransport)
		t.proxy = &httputil.ReverseProxy{
			Rewrite:        t.rewrite,
			Transport:      t.rt,
			BufferPool:     tr.buffers,
			ErrorLog:       errLog,
			ErrorHandler:   u.errorHandler,
			ModifyResponse: dropUpstreamID,
		}
		u.targets = append(u.targets, t)
		weights = append(weights, t.weight)
	}
	u.balance = newBalancer(weights)
	return u, nil
}

func parseTarget(raw string) (*target, error) {
	pu, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("parsing url %q: %w", api.RedactURL(raw), err)
	}
	t := &target{url: api.RedactURL(raw), host: pu.Host}
	switch pu.Scheme {
	case "http", "https":
		t.scheme = pu.Scheme
	case "h2c":
		t.scheme = "http"
	default:
		return nil, fmt.Errorf("url %q: scheme %q is not http, https or h2c", t.url, pu.Scheme)
	}
	if pu.Hostname() == "" {
		return nil, fmt.Errorf("url %q has no host", t.url)
	}
	if pu.RawQuery != "" || pu.Fragment != "" || pu.User != nil || pu.Opaque != "" {
		return nil, fmt.Errorf("url %q: only scheme, host, port and path are allowed", t.url)
	}
	t.base = strings.TrimRight(pu.EscapedPath(), "/")
	return t, nil
}

// originKey names the connection pool a target uses: its scheme as
// configured (so h2c and http to one address do not share), host and port.
func (t *target) originKey(raw string) string {
	scheme, _, _ := strings.Cut(raw, ":")
	host, port, err := net.SplitHostPort(t.host)
	if err != nil {
		host, port = t.host, map[string]string{"https": "443"}[scheme]
		if port == "" {
			port = "80"
		}
	}
	return strings.ToLower(scheme) + "://" + net.JoinHostPort(strings.ToLower(host), port)
}

func (u *Upstream) release() {
	u.health.stop()
	for _, t := range u.targets {
		if t.origin != nil {
			// Transport is reached through the origin's owner; every
			// origin of one Upstream comes from the same Transport.
			t.origin.owner.release(t.origin)
		}
	}
}

// Targets returns the upstream's target URLs (passwords redacted), in rule
// order.
func (u *Upstream) Targets() []string {
	s := make([]string, len(u.targets))
	for i, t := range u.targets {
		s[i] = t.url
	}
	return s
}

// Timeout returns the bound on one whole exchange with the upstream.
func (u *Upstream) Timeout() time.Duration { return u.timeout }

// WriteTimeout returns the route's bound on one write of its answer to the
// client (writeTimeout, api.DefaultWriteTimeout when the rules leave it).
func (u *Upstream) WriteTimeout() time.Duration { return u.writeTimeout }

// GuardBody bounds the wait for r's body before the gateway reads any of it,
// for answers the gateway writes itself (429, 503): net/http reads an unread
// HTTP/1 body of up to 256 KiB before it sends such an answer, and without a
// deadline a client that promised a body and stalls would hold the answer,
// and whatever limit slot the request holds, forever. Call it once the route
// is known; Forward then renews the deadline as the body arrives. It does
// nothing for requests without a body and for HTTP/2, whose streams need no
// such read.
func (u *Upstream) GuardBody(w http.ResponseWriter, r *http.Request) {
	GuardBody(w, r, u.bodyTimeout)
}

// GuardBody is Upstream.GuardBody with an explicit timeout, for requests no
// route matched.
func GuardBody(w http.ResponseWriter, r *http.Request, timeout time.Duration) {
	if r.ProtoMajor != 1 || r.Body == nil || r.Body == http.NoBody || timeout <= 0 {
		return
	}
	_ = SetReadDeadline(w, time.Now().Add(timeout))
}

// Forward sends r to the next target and relays the answer to w. m is what
// Router.Match returned for r: its Path is what the upstream receives, after
// stripPrefix and behind the target URL's own path. The query string is
// passed on (less unparsable parameters; see the package documentation).
//
// The request gets X-Forwarded-For (the peer appended to what the client
// sent), X-Forwarded-Host and X-Forwarded-Proto, and an X-Request-Id (see
// answer.EnsureRequestID), which the response carries back, once, in place of any
// the upstream set. The route's
// timeout bounds the whole exchange, body included; for an upgrade
// (WebSocket) it bounds the handshake only.
//
// The client side is bounded too, with read and write deadlines on the
// client's connection (or HTTP/2 stream), as http.ResponseController sets
// them: a request body of which
// nothing arrives for the route's bodyTimeout is answered 408 (connection
// closed); when the route's timeout fires first while the transport still
// reads the body, that read is ended at once (a read deadline in the past)
// and the answer is 504, the HTTP/1 connection closed after it; and a response write the client takes nothing of for the route's
// writeTimeout aborts the response, so that a slow or non-reading client
// holds no limit slot longer than that. Both are progress timeouts, renewed
// as data moves. A writer without deadlines (a test recorder) is served
// without them.
//
// A target that cannot be reached is answered 502, a timeout 504, both as
// application/problem+json; a client that went away gets nothing. Forward
// never panics because of the exchange, but see Outcome.Aborted.
func (u *Upstream) Forward(w http.ResponseWriter, r *http.Request, m Match) Outcome {
	start := time.Now()
	ti := u.balance.pick()
	t := u.targets[ti]
	id := answer.EnsureRequestID(w, r)

	rec := getRecorder(w, r.Context())
	rec.id = id
	rec.writeTimeout = u.writeTimeout
	rec.bodyDetail = u.bodyDetail
	// The route's timeout cancels with ErrRouteTimeout as the cause, so
	// that the transport tells it from a client gone (fastPool.do).
	ctx, cancel := context.WithCancelCause(r.Context())
	rec.cancel = cancel
	timeout, grpc, clientDeadline := u.timeout, answer.IsGRPC(r.Header), false
	if grpc {
		timeout, clientDeadline = grpcTimeout(r, timeout) // the client's grpc-timeout, bounded by the route's
		rec.clientDeadline = clientDeadline
	}
	rec.due = start.Add(timeout)
	if r.ProtoMajor == 1 {
		// The node bounds its own answers' writes (a connection-wide
		// deadline); the wait for the upstream is the route's timeout's,
		// and the answer's writes set writeTimeout as they go (a 1xx
		// written late must not meet the node's old deadline).
		_ = SetWriteDeadline(w, time.Time{})
	}
	out := r.WithContext(ctx)
	ou := *r.URL
	u.setPath(&ou, t, m.Path)
	out.URL = &ou
	if r.Body != nil && r.Body != http.NoBody {
		rec.body = &bodyReader{ReadCloser: r.Body, w: w, timeout: u.bodyTimeout}
		out.Body = rec.body
	}
	rec.timer = time.AfterFunc(timeout, rec.expire) // after rec.body: onTimeout reads it

	var aborted bool
	if len(r.Header["Upgrade"]) == 0 {
		aborted = t.relay(u, rec, r, out) // relay.go
	} else {
		aborted = serve(t.proxy, rec, out) // a WebSocket bridged to an https or h2c target
	}

	rec.disarm()
	cancel(nil)
	if rec.body != nil {
		rec.body.finish()
	}
	if rec.deadline && !aborted && !rec.upgraded && r.ProtoMajor == 1 {
		// Bound the server's final flush of what is still buffered; the
		// node clears it before the connection's next request.
		_ = SetWriteDeadline(w, time.Now().Add(u.writeTimeout))
	}
	o := Outcome{Status: rec.status, Err: rec.err, Timeout: rec.timedOut.Load(), Upgraded: rec.upgraded, Aborted: aborted}
	if aborted && grpc && rec.wrote {
		o.Timeout = o.Timeout || rec.pastDue()
		endGRPC(w, o.Timeout) // gRPC ends a broken stream with trailers, not a reset
		o.Aborted = false
	}
	if o.Status == 0 {
		o.Status = http.StatusOK // nothing written: net/http sends 200
	}
	if aborted && o.Err == nil {
		o.Err = ErrAborted
	}
	switch {
	case rec.bodyStalled:
		// The client's body stalled (answered 408 by errorHandler).
		o.ClientGone, o.Status, o.Err, o.Timeout = true, http.StatusRequestTimeout, nil, false
	case rec.writeFailed:
		// The client did not take the response (writeTimeout, or gone).
		// (ReverseProxy aborts then under a net/http server; on the
		// fasthttp engine's bridge, which is none, it just returns.)
		o.ClientGone, o.Status, o.Err = true, StatusClientClosed, nil
	case rec.parent.Err() != nil && !o.Timeout && (o.Err != nil || aborted):
		o.ClientGone, o.Status, o.Err = true, StatusClientClosed, nil
	}
	if clientDeadline && o.Timeout && !o.ClientGone {
		// A gRPC client's own deadline, shorter than the route's, ran out:
		// the client chose it, so it says nothing of the upstream's health
		// (and a client cannot open a breaker with grpc-timeout: 1n).
		o.ClientGone, o.Err = true, nil
	}
	o.Duration = time.Since(start)
	u.balance.done(ti, o.Err != nil || o.Status >= 500, o.ClientGone)
	if o.Err != nil && !o.ClientGone {
		u.log.Debug("upstream exchange failed", "route", u.routeID, "target", t.url, "status", o.Status,
			"timeout", o.Timeout, "aborted", aborted, "err", o.Err)
	} else if o.ClientGone {
		u.log.Debug("client went away", "route", u.routeID, "target", t.url)
	}
	putRecorder(rec)
	return o
}

// serve runs the proxy, turning its http.ErrAbortHandler panic (a failed
// body copy) into a result; other panics go on.
func serve(p *httputil.ReverseProxy, w http.ResponseWriter, r *http.Request) (aborted bool) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler { //nolint:errorlint // sentinel identity
				panic(v)
			}
			aborted = true
		}
	}()
	p.ServeHTTP(w, r)
	return false
}

// setPath puts the forwarded path in u: path less the stripped prefix,
// behind the target's base path. Escapes stay as matched (RawPath).
func (u *Upstream) setPath(out *url.URL, t *target, path string) {
	p := path
	if u.strip != "" {
		if rest, ok := strings.CutPrefix(p, u.strip); ok {
			if rest == "" || rest[0] != '/' {
				rest = "/" + rest
			}
			p = rest
		}
	}
	if t.base != "" {
		p = t.base + p
	}
	out.Path, out.RawPath = p, ""
	if strings.IndexByte(p, '%') >= 0 {
		if dec, err := url.PathUnescape(p); err == nil {
			out.Path, out.RawPath = dec, p
		}
	}
}

// rewrite routes the outbound request to the target.
func (t *target) rewrite(pr *httputil.ProxyRequest) {
	out := pr.Out
	out.URL.Scheme = t.scheme
	out.URL.Host = t.host
	out.Host = "" // the target's host; the client's is in X-Forwarded-Host
	if prior, ok := pr.In.Header["X-Forwarded-For"]; ok {
		out.Header["X-Forwarded-For"] = prior
	}
	pr.SetXForwarded()
	// Via (RFC 9110 §7.6.3), appended to any the request came with: it
	// lets this node, and others, recognise a request that loops.
	if prior := out.Header["Via"]; len(prior) > 0 {
		out.Header["Via"] = append(prior, t.tr.viaValue(pr.In.ProtoMajor, pr.In.ProtoMinor))
	} else {
		out.Header["Via"] = t.tr.viaHeader(pr.In.ProtoMajor, pr.In.ProtoMinor)
	}
}

// dropUpstreamID removes an upstream's own X-Request-Id: the client gets
// the gateway's (set by the recorder), once.
func dropUpstreamID(resp *http.Response) error {
	delete(resp.Header, api.HeaderRequestID)
	return nil
}

// errorHandler answers a failed exchange: nothing for a client gone, 504
// for the route's timeout, 502 for anything else (refused, unreachable,
// reset, bad response).
func (u *Upstream) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	rec, ok := w.(*recorder)
	if !ok { // not through Forward
		answer.WriteProblem(w, r, http.StatusBadGateway, "Bad gateway", "the upstream could not be reached")
		return
	}
	rec.err = err
	switch {
	case rec.wrote:
		// A header is out already (an upgrade that failed after the
		// switch); there is nothing more to say.
	case rec.body != nil && rec.body.timedOut.Load():
		// The client's body stalled: not the upstream's fault. The
		// connection cannot be read on; close it after the answer.
		rec.w.Header().Set("Connection", "close")
		answer.WriteProblem(rec, r, http.StatusRequestTimeout, "Request timeout", rec.bodyDetail)
		rec.bodyStalled = true
	case (rec.timedOut.Load() || rec.pastDue()) && rec.clientDeadline:
		answer.WriteProblem(rec, r, http.StatusGatewayTimeout, "Gateway timeout", clientDeadlineDetail)
	case rec.timedOut.Load() || rec.pastDue() || rec.body != nil && rec.body.pastRoute.Load():
		rec.timedOut.Store(true) // the Outcome's Timeout
		if rec.body != nil && rec.body.cut.Load() && r.ProtoMajor == 1 {
			// The timeout ended the body's reading half way: the
			// connection cannot be read on. (An HTTP/2 stream ends
			// alone; Connection: close there would end the connection.)
			rec.w.Header().Set("Connection", "close")
		}
		answer.WriteProblem(rec, r, http.StatusGatewayTimeout, "Gateway timeout", u.timeoutDetail)
	case rec.parent.Err() != nil:
		rec.status = StatusClientClosed
	default:
		answer.WriteProblem(rec, r, http.StatusBadGateway, "Bad gateway", "the upstream could not be reached")
	}
}

// recorder wraps the client's ResponseWriter to learn the status sent, the
// exchange's error and whether it was upgraded. Recorders are pooled.
type recorder struct {
	w        http.ResponseWriter
	id       string          // request id, set on the final response header
	parent   context.Context // the client's request context
	status   int
	wrote    bool
	upgraded bool
	err      error
	cancel   context.CancelCauseFunc
	timer    *time.Timer
	stopped  bool // timer stopped before it fired
	timedOut atomic.Bool
	expire   func() // rec.onTimeout, bound once

	// Client-side deadlines (see Forward).
	writeTimeout time.Duration
	lastDeadline time.Time   // when the write deadline was last set
	deadline     bool        // a write deadline was set on the client's connection
	writeFailed  bool        // a write to the client failed
	bodyStalled  bool        // errorHandler answered 408: the client's body stalled
	body         *bodyReader // the client's body, when it has one
	bodyDetail   string
	due          time.Time // the exchange's deadline: the route's timeout, or gRPC's passed on to the upstream (see pastDue)
	// clientDeadline: gRPC, and due is the client's grpc-timeout, shorter
	// than the route's timeout.
	clientDeadline bool
}

var recorders = sync.Pool{New: func() any {
	rec := &recorder{}
	rec.expire = rec.onTimeout
	return rec
}}

func getRecorder(w http.ResponseWriter, parent context.Context) *recorder {
	rec := recorders.Get().(*recorder)
	rec.w, rec.parent = w, parent
	return rec
}

// putRecorder recycles rec unless its timer fired: the timer's function may
// still be running and must not find the recorder reused.
func putRecorder(rec *recorder) {
	if !rec.stopped {
		return
	}
	expire := rec.expire
	*rec = recorder{expire: expire}
	recorders.Put(rec)
}

// onTimeout ends the exchange when the route's timeout fires: the context
// (the upstream's side), and a read of the client's body in progress, which
// the transport may be blocked in while the client sends nothing (it sends
// the body before it reads the answer), so that the answer is a prompt 504
// rather than waiting for the body's next part or its bodyTimeout.
func (rec *recorder) onTimeout() {
	rec.timedOut.Store(true)
	rec.cancel(ErrRouteTimeout)
	if rec.body != nil {
		rec.body.interrupt()
	}
}

// disarm stops the timeout timer, remembering whether it was stopped in
// time. It runs on the request's goroutine only.
func (rec *recorder) disarm() {
	if !rec.stopped && rec.timer.Stop() {
		rec.stopped = true
	}
}

func (rec *recorder) Header() http.Header { return rec.w.Header() }

func (rec *recorder) WriteHeader(code int) {
	if code >= 200 && !rec.wrote {
		rec.wrote, rec.status = true, code
		// Set here, not earlier: a 1xx from the upstream clears the
		// header map, and copying the upstream's header may have added one.
		if h := rec.w.Header(); len(h[api.HeaderRequestID]) != 1 || h[api.HeaderRequestID][0] != rec.id {
			h[api.HeaderRequestID] = []string{rec.id}
		}
		rec.extendWrite()
	}
	rec.w.WriteHeader(code)
}

func (rec *recorder) Write(b []byte) (int, error) {
	if !rec.wrote {
		rec.WriteHeader(http.StatusOK)
	} else {
		rec.extendWrite()
	}
	n, err := rec.w.Write(b)
	if err != nil {
		rec.writeFailed = true
	}
	return n, err
}

// extendWrite moves the client connection's write deadline to now +
// writeTimeout, at most every quarter of it (so that a steady stream of
// writes costs few deadline updates): a write that makes no progress for
// between 3/4 and all of writeTimeout fails.
func (rec *recorder) extendWrite() {
	if rec.writeTimeout <= 0 {
		return
	}
	now := time.Now()
	if rec.deadline && now.Sub(rec.lastDeadline) < rec.writeTimeout/4 {
		return
	}
	if SetWriteDeadline(rec.w, now.Add(rec.writeTimeout)) != nil {
		rec.writeTimeout = 0 // not supported by this writer: stop trying
		return
	}
	rec.deadline, rec.lastDeadline = true, now
}

// Unwrap lets http.ResponseController reach the server's writer (Flush,
// deadlines).
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.w }

// Hijack takes over the client connection for an upgrade; from then on the
// route's timeout no longer applies.
func (rec *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	rec.w.Header()[api.HeaderRequestID] = []string{rec.id} // written with the 101
	c, brw, err := http.NewResponseController(rec.w).Hijack()
	if err == nil {
		// A tunnel lives as long as its peers want: no deadlines left
		// over from the request.
		_ = c.SetDeadline(time.Time{})
		rec.writeTimeout, rec.deadline = 0, false
		if rec.body != nil {
			rec.body.finish()
		}
		rec.disarm()
		rec.wrote, rec.status, rec.upgraded = true, http.StatusSwitchingProtocols, true
	}
	return c, brw, err
}

// bodyReader is the client's request body as the upstream transport reads
// it: each read first renews the client connection's read deadline (at most
// every quarter of the timeout), so a body that stops arriving fails after
// timeout without progress (timedOut: the client stalled). interrupt, when
// the route's timeout fires, fails the reads in progress and to come (cut:
// the route's timeout, not a stall). The transport may read or close it
// from its own goroutine, even after Forward returned; finish stops the
// deadline updates then, as a finished handler's writer must not be
// touched.
type bodyReader struct {
	io.ReadCloser
	w        http.ResponseWriter // the client's, for its read deadline
	timeout  time.Duration
	timedOut atomic.Bool // a read failed by the bodyTimeout deadline
	cut      atomic.Bool // interrupt ended the body before its end; set under mu
	// pastRoute: a read failed because the route's deadline passed, as
	// the fasthttp engine's body (fastReqBody, bridged) says with
	// errRouteDeadline: its deadline is the route's counted from the
	// engine's start, a little before Forward's timer fires.
	pastRoute atomic.Bool

	mu    sync.Mutex
	last  time.Time // deadline last set at
	done  bool
	ended bool // a read returned an error (io.EOF among them)
}

func (b *bodyReader) Read(p []byte) (int, error) {
	b.mu.Lock()
	if !b.done && !b.cut.Load() && b.timeout > 0 {
		if now := time.Now(); now.Sub(b.last) >= b.timeout/4 {
			if SetReadDeadline(b.w, now.Add(b.timeout)) != nil {
				b.timeout = 0 // not supported by this writer
			} else {
				b.last = now
			}
		}
	}
	b.mu.Unlock()
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.mu.Lock()
		b.ended = true
		if !b.cut.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
			b.timedOut.Store(true)
		}
		if errors.As(err, new(errRouteDeadline)) {
			b.pastRoute.Store(true)
		}
		b.mu.Unlock()
	}
	return n, err
}

// interrupt fails the body's read in progress, if any, and those to come,
// with a read deadline in the past on the client's connection (or HTTP/2
// stream, whose body it ends): the route's timeout fired. It does nothing
// once the body ended (read to its end, or stalled) or the handler is done
// with the writer (finish). It may run on the timer's goroutine.
func (b *bodyReader) interrupt() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done || b.ended {
		return
	}
	if SetReadDeadline(b.w, interruptedAt) == nil {
		b.cut.Store(true)
	}
}

// finish ends the deadline updates: the handler is done with the writer.
func (b *bodyReader) finish() {
	b.mu.Lock()
	b.done = true
	b.mu.Unlock()
}

// slogWriter adapts ReverseProxy's log.Logger to slog at debug level.
type slogWriter struct {
	log   *slog.Logger
	route string
}

func (s slogWriter) Write(p []byte) (int, error) {
	s.log.Debug(strings.TrimSpace(string(p)), "route", s.route)
	return len(p), nil
}
