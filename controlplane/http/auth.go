package http

import (
	"crypto/subtle"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

// authenticate identifies the caller by an API token (Authorization: Bearer)
// or the session cookie, and puts the actor in the request context. Bad
// credentials are remembered and reported by need, so that public routes
// still work.
func (s *Server) authenticate(c *gin.Context) {
	a := actorOf(c)
	if h := c.GetHeader("Authorization"); h != "" {
		scheme, secret, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Bearer") || secret == "" {
			c.Set(ctxAuthErr, sluice.Errorf(sluice.EUNAUTHORIZED, "the Authorization header must be \"Bearer <token>\""))
			c.Next()
			return
		}
		t, u, err := s.s.Tokens.Authenticate(c.Request.Context(), strings.TrimSpace(secret))
		if err != nil {
			if sluice.ErrorCode(err) != sluice.EUNAUTHORIZED {
				s.fail(c, err)
				return
			}
			c.Set(ctxAuthErr, err)
			c.Next()
			return
		}
		a.User, a.Role, a.TokenID = u, t.Role.Lesser(u.Role), t.ID
		s.setActor(c, a)
		c.Next()
		return
	}
	if cookie, err := c.Cookie(sessionCookie); err == nil && cookie != "" {
		sess, err := s.s.Sessions.FindSession(c.Request.Context(), cookie)
		if err != nil {
			if sluice.ErrorCode(err) != sluice.EUNAUTHORIZED {
				s.fail(c, err)
				return
			}
			c.Set(ctxAuthErr, err)
			c.Next()
			return
		}
		a.User, a.Role = sess.User, sess.User.Role
		c.Set(ctxSession, sess)
		s.setActor(c, a)
	}
	c.Next()
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// need requires an authenticated caller with at least role min, and a valid
// X-CSRF-Token on a mutation authenticated by the session cookie.
func (s *Server) need(min sluice.Role) gin.HandlerFunc {
	return func(c *gin.Context) {
		a := actorOf(c)
		if a.User == nil {
			if err, ok := c.Get(ctxAuthErr); ok {
				s.fail(c, err.(error))
				return
			}
			s.fail(c, sluice.Errorf(sluice.EUNAUTHORIZED, "authentication required: log in or send an API token"))
			return
		}
		if sess, ok := c.Get(ctxSession); ok && !safeMethod(c.Request.Method) {
			want := sess.(*sluice.Session).CSRFToken
			got := c.GetHeader("X-CSRF-Token")
			if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
				s.fail(c, sluice.Errorf(sluice.EFORBIDDEN, "missing or wrong X-CSRF-Token header"))
				return
			}
		}
		if !a.Role.Allows(min) {
			s.fail(c, sluice.Errorf(sluice.EFORBIDDEN, "this needs the %s role; you have %s", min, a.Role))
			return
		}
		c.Next()
	}
}

type loginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

type loginResponse struct {
	User      *sluice.User `json:"user"`
	CSRFToken string       `json:"csrfToken"`
	ExpiresAt time.Time    `json:"expiresAt"`
}

func (s *Server) secure(c *gin.Context) bool {
	return s.s.SecureCookies || c.Request.TLS != nil ||
		(s.s.TrustForwardedProto && strings.EqualFold(c.GetHeader("X-Forwarded-Proto"), "https"))
}

func (s *Server) login(c *gin.Context) error {
	var req loginRequest
	if err := s.bindJSON(c, &req, false); err != nil {
		return err
	}
	var fields api.Errors
	switch {
	case req.Username == "":
		fields = append(fields, api.FieldError{Path: "username", Message: "is required"})
	case len(req.Username) > 200:
		fields = append(fields, api.FieldError{Path: "username", Message: "must be at most 200 bytes"})
	}
	switch {
	case req.Password == "":
		fields = append(fields, api.FieldError{Path: "password", Message: "is required"})
	case len(req.Password) > 1024:
		fields = append(fields, api.FieldError{Path: "password", Message: "must be at most 1024 bytes"})
	}
	if len(fields) > 0 {
		return &sluice.Error{Code: sluice.EINVALID, Message: "invalid login", Fields: fields}
	}
	client := clientKey(c.ClientIP())
	pair := "u:" + strings.ToLower(req.Username) + "|" + client
	// The attempt counts as a failure from the start, so that guesses sent
	// in parallel are throttled like guesses sent one after another.
	if wait, blocked := s.throttle.attempt(pair, client); blocked {
		c.Set(ctxRetryAfter, int((wait+time.Second-1)/time.Second))
		return sluice.Errorf(sluice.ERATELIMITED, "too many failed logins from your address; try again in %s", wait.Round(time.Second))
	}
	u, err := s.s.Users.Authenticate(c.Request.Context(), req.Username, req.Password)
	if err != nil {
		if sluice.ErrorCode(err) != sluice.EUNAUTHORIZED {
			s.throttle.refund(pair, client) // not a judged password
		}
		return err
	}
	s.throttle.reset(pair)
	s.throttle.refund(client)
	sess, secret, err := s.s.Sessions.CreateSession(c.Request.Context(), u)
	if err != nil {
		return err
	}
	http.SetCookie(c.Writer, &http.Cookie{Name: sessionCookie, Value: secret, Path: "/", HttpOnly: true,
		Secure: s.secure(c), SameSite: http.SameSiteStrictMode, Expires: sess.CreatedAt.Add(s.s.SessionTTL), MaxAge: int(s.s.SessionTTL / time.Second)})
	c.JSON(http.StatusOK, loginResponse{User: u, CSRFToken: sess.CSRFToken, ExpiresAt: sess.ExpiresAt})
	return nil
}

// clientKey names a login client by its address; an IPv6 client by its /64,
// the block one host usually holds, so that rotating addresses within it
// does not reset the throttle.
func clientKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return "a:" + ip
	}
	a = a.Unmap()
	if a.Is6() {
		return "a:" + netip.PrefixFrom(a, 64).Masked().String()
	}
	return "a:" + a.String()
}

func (s *Server) logout(c *gin.Context) error {
	if cookie, err := c.Cookie(sessionCookie); err == nil && cookie != "" {
		if err := s.s.Sessions.DeleteSession(c.Request.Context(), cookie); err != nil {
			return err
		}
	}
	if err := s.s.Audit.RecordAuditEvent(c.Request.Context(), &sluice.AuditEvent{Action: sluice.ActionLogout, Object: "user/" + actorOf(c).Name()}); err != nil {
		return err
	}
	http.SetCookie(c.Writer, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true, Secure: s.secure(c),
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	c.Status(http.StatusNoContent)
	return nil
}

type meResponse struct {
	User       *sluice.User `json:"user"`
	Role       sluice.Role  `json:"role"`
	AuthMethod string       `json:"authMethod"`
	TokenID    int64        `json:"tokenId,omitempty"`
	CSRFToken  string       `json:"csrfToken,omitempty"`
}

func (s *Server) me(c *gin.Context) {
	a := actorOf(c)
	r := meResponse{User: a.User, Role: a.Role, AuthMethod: "token", TokenID: a.TokenID}
	if sess, ok := c.Get(ctxSession); ok {
		r.AuthMethod, r.CSRFToken = "session", sess.(*sluice.Session).CSRFToken
	}
	c.JSON(http.StatusOK, r)
}

// ThrottleSettings slows down password guessing. Failures are counted per
// (account, client) and per client, never per account alone, so that no one
// can lock a user out from another address. Once a key has had its free
// failures, each further failure makes it wait before the next attempt:
// BaseDelay, doubling with every failure, up to MaxDelay; attempts while it
// waits are answered 429 with Retry-After, without checking the password.
// Each attempt counts as a failure as soon as it is let through, so that
// parallel guesses get no more free tries than sequential ones; a successful
// login then clears its (account, client) key and gives back the client's
// count. A key's failures are forgotten Window after its wait ends. Zero values:
// PerAccount 5, PerClient 20, BaseDelay 1s, MaxDelay 15m, Window 15m.
type ThrottleSettings struct {
	PerAccount int
	PerClient  int
	BaseDelay  time.Duration
	MaxDelay   time.Duration
	Window     time.Duration
}

// throttle holds the failure counts of this process. Safe for concurrent
// use.
type throttle struct {
	mu   sync.Mutex
	set  ThrottleSettings
	now  func() time.Time
	keys map[string]*throttleKey
}

type throttleKey struct {
	free  int // failures before waits
	fails int
	last  time.Time // of the newest failure
	until time.Time // no attempt before this
}

const maxThrottleKeys = 100_000

func newThrottle(s ThrottleSettings, now func() time.Time) *throttle {
	if s.PerAccount == 0 {
		s.PerAccount = 5
	}
	if s.PerClient == 0 {
		s.PerClient = 20
	}
	if s.BaseDelay == 0 {
		s.BaseDelay = time.Second
	}
	if s.MaxDelay == 0 {
		s.MaxDelay = 15 * time.Minute
	}
	if s.Window == 0 {
		s.Window = 15 * time.Minute
	}
	return &throttle{set: s, now: now, keys: map[string]*throttleKey{}}
}

// get returns the live state of key, forgetting an expired one.
func (t *throttle) get(key string, now time.Time) *throttleKey {
	k := t.keys[key]
	if k != nil && !now.Before(k.until.Add(t.set.Window)) {
		delete(t.keys, key)
		return nil
	}
	return k
}

// wait is how long a key waits after its newest failure: nothing for its
// free failures, then BaseDelay doubling up to MaxDelay.
func (t *throttle) wait(k *throttleKey) time.Duration {
	over := k.fails - k.free
	switch {
	case over < 0:
		return 0
	case over >= 30:
		return t.set.MaxDelay
	}
	return min(t.set.BaseDelay<<over, t.set.MaxDelay)
}

// attempt reports whether the pair or the client must still wait, and how
// long; when neither must, it counts the attempt as a failure of both until
// reset or refund say otherwise.
func (t *throttle) attempt(pair, client string) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var wait time.Duration
	for _, key := range []string{pair, client} {
		if k := t.get(key, now); k != nil && now.Before(k.until) {
			wait = max(wait, k.until.Sub(now))
		}
	}
	if wait > 0 {
		return wait, true
	}
	if len(t.keys) >= maxThrottleKeys { // bound memory under a spray of names
		for key := range t.keys {
			t.get(key, now)
		}
	}
	for _, f := range []struct {
		key  string
		free int
	}{{pair, t.set.PerAccount}, {client, t.set.PerClient}} {
		k := t.get(f.key, now)
		if k == nil {
			if len(t.keys) >= maxThrottleKeys {
				continue
			}
			k = &throttleKey{free: f.free}
			t.keys[f.key] = k
		}
		k.fails++
		k.last = now
		k.until = now.Add(t.wait(k))
	}
	return 0, false
}

// refund gives back the failure an attempt counted for each key (the
// attempt succeeded, or its password was not judged).
func (t *throttle) refund(keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, key := range keys {
		k := t.keys[key]
		if k == nil {
			continue
		}
		if k.fails--; k.fails <= 0 {
			delete(t.keys, key)
			continue
		}
		k.until = k.last.Add(t.wait(k))
	}
}

func (t *throttle) reset(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.keys, key)
}
