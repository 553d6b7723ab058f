// Package http is the control plane's admin REST API (Gin): authentication
// with session cookies (plus CSRF tokens) or API tokens, role checks on every
// route, problem+json errors mapped from domain codes in one table
// (statusOf), health, readiness and Prometheus metrics, and the console's
// static files.
//
// Roles per route are declared next to each route in routes(); the services
// enforce the domain rules on top (four eyes, emergency rollback by admins).
package http

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

// VersionDiffer diffs two versions of a namespace.
type VersionDiffer interface {
	DiffVersions(ctx context.Context, ns string, a, b int64) (*api.Diff, error)
}

// Settings configures a Server. The services are required; other zero
// values have the meaning documented on each field.
type Settings struct {
	Namespaces sluice.NamespaceService
	Drafts     sluice.DraftService
	Changes    sluice.ChangeService
	Versions   interface {
		sluice.VersionService
		VersionDiffer
	}
	Users    sluice.UserService
	Sessions sluice.SessionService
	Tokens   sluice.TokenService
	Audit    sluice.AuditService
	Outbox   sluice.Outbox
	// Nodes, if nil, makes the node routes answer 503.
	Nodes sluice.NodeService
	// Canaries, if nil, makes the canary routes answer 503.
	Canaries sluice.CanaryService
	// Previews, if nil, makes the preview routes answer 503.
	Previews sluice.PreviewService
	// Stats, Events and Stream serve the fleet routes (stats, events,
	// stream); each, if nil, makes its route answer 503.
	Stats  sluice.StatsService
	Events sluice.EventService
	Stream sluice.StreamHub
	// Ready lists the readiness checks of /readyz by name.
	Ready map[string]func(context.Context) error
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MaxBodyBytes bounds request bodies; zero means 4 MiB.
	MaxBodyBytes int64
	// SecureCookies marks the session cookie Secure. It is also Secure on a
	// TLS request, or with TrustForwardedProto when X-Forwarded-Proto is https.
	SecureCookies       bool
	TrustForwardedProto bool
	// TrustedProxies are the CIDRs whose X-Forwarded-For is believed for
	// the client address; nil trusts none.
	TrustedProxies []string
	// SessionTTL is the cookie's lifetime: the sessions' absolute cap
	// (the store ends idle sessions sooner); zero means 7 days (match the
	// session store's SessionMaxAge).
	SessionTTL time.Duration
	// WebDir, when set and holding index.html, serves the console from
	// disk (development); otherwise the console embedded at build time is
	// served, or a placeholder page when the binary was built without it.
	WebDir string
	// LoginThrottle slows down failed logins per (account, client) and per
	// client; see ThrottleSettings for its zero value.
	LoginThrottle ThrottleSettings
	// Streams bounds the event streams; see StreamSettings for its zero
	// value.
	Streams StreamSettings
	// Tracer, if set, records a span per request (tracing.go).
	Tracer trace.Tracer
}

// Server is the admin API. It is safe for concurrent use.
type Server struct {
	s        Settings
	engine   *gin.Engine
	metrics  *metrics
	throttle *throttle
	drafts   draftCache
	console  console
	streams  *streamSlots
	// replays holds a slot per replay query running (ReplayQueries).
	replays chan struct{}
	// closing is closed by CloseStreams: every open stream ends.
	closing     context.Context
	closeStream context.CancelFunc
}

const (
	ctxRequestID  = "sluice.requestId"
	ctxSession    = "sluice.session"
	ctxAuthErr    = "sluice.authErr"
	ctxRetryAfter = "sluice.retryAfter"
	sessionCookie = "sluice_session"
)

func init() { gin.SetMode(gin.ReleaseMode) }

// New builds the Server and its routes.
func New(s Settings) (*Server, error) {
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.MaxBodyBytes == 0 {
		s.MaxBodyBytes = 4 << 20
	}
	if s.SessionTTL == 0 {
		s.SessionTTL = 7 * 24 * time.Hour
	}
	s.Streams.defaults()
	srv := &Server{s: s, metrics: newMetrics(s.Outbox), throttle: newThrottle(s.LoginThrottle, s.Now), console: newConsole(s.WebDir),
		streams: newStreamSlots(s.Streams.PerUser, s.Streams.Total), replays: make(chan struct{}, s.Streams.ReplayQueries)}
	srv.closing, srv.closeStream = context.WithCancel(context.Background())
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.ContextWithFallback = true
	if err := e.SetTrustedProxies(s.TrustedProxies); err != nil {
		return nil, err
	}
	mw := []gin.HandlerFunc{srv.requestID}
	if s.Tracer != nil {
		mw = append(mw, srv.trace)
	}
	e.Use(append(mw, srv.recover, srv.metrics.middleware, srv.limitBody)...)
	e.NoRoute(srv.noRoute)
	e.NoMethod(func(c *gin.Context) {
		srv.failStatus(c, http.StatusMethodNotAllowed, &sluice.Error{Code: sluice.EINVALID, Message: "method " + c.Request.Method + " is not allowed here"})
	})
	srv.engine = e
	srv.routes()
	return srv, nil
}

// CloseStreams ends every open event stream (their clients reconnect
// elsewhere): call it when the HTTP server shuts down (http.Server's
// RegisterOnShutdown), whose graceful shutdown would otherwise wait for
// them. Streams opened afterwards end at once.
func (s *Server) CloseStreams() { s.closeStream() }

// StreamSettings returns the stream bounds in force (defaults applied).
func (s *Server) StreamSettings() StreamSettings { return s.s.Streams }

// OpenStreams returns the number of event streams open now.
func (s *Server) OpenStreams() int { return s.streams.open() }

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler { return s.engine }

// Engine returns the Gin engine (for route listings).
func (s *Server) Engine() *gin.Engine { return s.engine }

var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

func (s *Server) requestID(c *gin.Context) {
	id := c.GetHeader("X-Request-ID")
	if !requestIDPattern.MatchString(id) {
		b := make([]byte, 8)
		rand.Read(b)
		id = hex.EncodeToString(b)
	}
	c.Set(ctxRequestID, id)
	c.Header("X-Request-ID", id)
	actor := sluice.Actor{RequestID: id, ClientAddr: c.ClientIP()}
	c.Request = c.Request.WithContext(sluice.NewContextWithActor(c.Request.Context(), actor))
	c.Next()
}

func (s *Server) recover(c *gin.Context) {
	defer func() {
		if r := recover(); r != nil {
			if r == http.ErrAbortHandler {
				panic(r)
			}
			s.s.Logger.Error("handler panicked", "requestId", c.GetString(ctxRequestID), "panic", r)
			s.fail(c, errors.New("panic"))
		}
	}()
	c.Next()
}

func (s *Server) limitBody(c *gin.Context) {
	if c.Request.ContentLength > s.s.MaxBodyBytes {
		s.fail(c, sluice.Errorf(sluice.ETOOLARGE, "the body is %d bytes; the limit is %d", c.Request.ContentLength, s.s.MaxBodyBytes))
		return
	}
	if c.Request.Body != nil {
		c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, s.s.MaxBodyBytes)
	}
	c.Next()
}

// body reads the whole request body within the limit.
func (s *Server) body(c *gin.Context) ([]byte, error) {
	if c.Request.Body == nil {
		return nil, nil
	}
	b, err := io.ReadAll(c.Request.Body)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, sluice.Errorf(sluice.ETOOLARGE, "the body is over the limit of %d bytes", s.s.MaxBodyBytes)
	}
	if err != nil {
		return nil, sluice.Errorf(sluice.EINVALID, "reading the body: %v", err)
	}
	return b, nil
}

// bindJSON strictly decodes a JSON body into v (unknown fields and wrong
// types are EINVALID with their paths). An empty body leaves v as it is
// when optional.
func (s *Server) bindJSON(c *gin.Context, v any, optional bool) error {
	b, err := s.body(c)
	if err != nil {
		return err
	}
	if len(b) == 0 && optional {
		return nil
	}
	if err := api.UnmarshalJSON(b, v); err != nil {
		return sluice.Invalid("the body is invalid", err)
	}
	return nil
}

func actorOf(c *gin.Context) sluice.Actor { return sluice.ActorFromContext(c.Request.Context()) }

func (s *Server) setActor(c *gin.Context, a sluice.Actor) {
	c.Request = c.Request.WithContext(sluice.NewContextWithActor(c.Request.Context(), a))
}
