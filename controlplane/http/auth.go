package http

import (
	"crypto/subtle"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

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

func (s *Server) login(c *gin.Context) {
	var req loginRequest
	if err := s.bindJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	if req.Username == "" || req.Password == "" || len(req.Username) > 200 || len(req.Password) > 1024 {
		s.fail(c, sluice.Errorf(sluice.EUNAUTHORIZED, "wrong username or password"))
		return
	}
	userKey, addrKey := "u:"+strings.ToLower(req.Username), "a:"+c.ClientIP()
	if wait, blocked := s.throttle.blocked(userKey, addrKey); blocked {
		c.Set(ctxRetryAfter, int(wait/time.Second)+1)
		s.fail(c, sluice.Errorf(sluice.ERATELIMITED, "too many failed logins; try again in %s", wait.Round(time.Second)))
		return
	}
	u, err := s.s.Users.Authenticate(c.Request.Context(), req.Username, req.Password)
	if err != nil {
		if sluice.ErrorCode(err) == sluice.EUNAUTHORIZED {
			s.throttle.fail(userKey, addrKey)
		}
		s.fail(c, err)
		return
	}
	s.throttle.reset(userKey)
	sess, secret, err := s.s.Sessions.CreateSession(c.Request.Context(), u)
	if err != nil {
		s.fail(c, err)
		return
	}
	http.SetCookie(c.Writer, &http.Cookie{Name: sessionCookie, Value: secret, Path: "/", HttpOnly: true,
		Secure: s.secure(c), SameSite: http.SameSiteStrictMode, Expires: sess.ExpiresAt, MaxAge: int(s.s.SessionTTL / time.Second)})
	c.JSON(http.StatusOK, loginResponse{User: u, CSRFToken: sess.CSRFToken, ExpiresAt: sess.ExpiresAt})
}

func (s *Server) logout(c *gin.Context) {
	if cookie, err := c.Cookie(sessionCookie); err == nil && cookie != "" {
		if err := s.s.Sessions.DeleteSession(c.Request.Context(), cookie); err != nil {
			s.fail(c, err)
			return
		}
	}
	if err := s.s.Audit.RecordAuditEvent(c.Request.Context(), &sluice.AuditEvent{Action: sluice.ActionLogout, Object: "user/" + actorOf(c).Name()}); err != nil {
		s.fail(c, err)
		return
	}
	http.SetCookie(c.Writer, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true, Secure: s.secure(c),
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	c.Status(http.StatusNoContent)
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

// ThrottleSettings limits failed logins within a sliding window. Zero
// values: Window 15m, PerUser 5, PerAddress 20.
type ThrottleSettings struct {
	Window     time.Duration
	PerUser    int
	PerAddress int
}

// throttle counts failed logins per user and per client address, in this
// process. Safe for concurrent use.
type throttle struct {
	mu    sync.Mutex
	set   ThrottleSettings
	now   func() time.Time
	fails map[string][]time.Time
}

func newThrottle(s ThrottleSettings, now func() time.Time) *throttle {
	if s.Window == 0 {
		s.Window = 15 * time.Minute
	}
	if s.PerUser == 0 {
		s.PerUser = 5
	}
	if s.PerAddress == 0 {
		s.PerAddress = 20
	}
	return &throttle{set: s, now: now, fails: map[string][]time.Time{}}
}

func (t *throttle) recent(key string, now time.Time) []time.Time {
	list := t.fails[key]
	i := 0
	for i < len(list) && now.Sub(list[i]) >= t.set.Window {
		i++
	}
	if i == len(list) {
		delete(t.fails, key)
		return nil
	}
	list = list[i:]
	t.fails[key] = list
	return list
}

// blocked reports whether either key is over its limit, and for how long.
func (t *throttle) blocked(userKey, addrKey string) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var wait time.Duration
	for _, k := range []struct {
		key   string
		limit int
	}{{userKey, t.set.PerUser}, {addrKey, t.set.PerAddress}} {
		if list := t.recent(k.key, now); len(list) >= k.limit {
			wait = max(wait, list[len(list)-k.limit].Add(t.set.Window).Sub(now))
		}
	}
	return wait, wait > 0
}

func (t *throttle) fail(keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if len(t.fails) > 100_000 { // bound memory under a spray of names
		for k := range t.fails {
			t.recent(k, now)
		}
	}
	for _, k := range keys {
		t.fails[k] = append(t.fails[k], now)
	}
}

func (t *throttle) reset(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.fails, key)
}
