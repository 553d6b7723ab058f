package http_test

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	sluice "github.com/sluicegw/sluice/controlplane"
	sluicehttp "github.com/sluicegw/sluice/controlplane/http"
)

// manualClock is a clock the test moves.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestLoginThrottle: failed logins slow down the (account, client) pair and
// the client with doubling waits (429 + Retry-After), and never lock the
// account for anyone else: before, five wrong passwords from one address
// locked the real user out from every address for 15 minutes.
func TestLoginThrottle(t *testing.T) {
	t.Parallel()
	clock := &manualClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	e := newEnv(t, envOptions{settings: func(s *sluicehttp.Settings) {
		s.Now = clock.Now
		s.TrustedProxies = []string{"127.0.0.1/32", "::1/128"}
	}})
	admin := e.login("admin")
	admin.must(http.StatusCreated, "POST", "/api/v1/users", map[string]any{"username": "ed", "password": password, "role": "editor"})
	const (
		mallory = "203.0.113.7"
		ed      = "198.51.100.2"
		sprayer = "192.0.2.9"
	)
	type step struct {
		desc       string
		addr, user string
		password   string
		wait       time.Duration // the clock moves this much first
		status     int
		retryAfter int // for 429
	}
	steps := []step{}
	for i := range 5 {
		steps = append(steps, step{desc: "free failure " + strconv.Itoa(i+1), addr: mallory, user: "ed", password: "guess", status: 401})
	}
	steps = append(steps,
		step{desc: "sixth try waits", addr: mallory, user: "ed", password: "guess", status: 429, retryAfter: 1},
		step{desc: "the right password waits too", addr: mallory, user: "ed", password: password, status: 429, retryAfter: 1},
		step{desc: "the user logs in from elsewhere", addr: ed, user: "ed", password: password, status: 200},
		step{desc: "case of the name does not dodge", addr: mallory, user: "ED", password: "guess", status: 429, retryAfter: 1},
		step{desc: "after the wait, one try", addr: mallory, user: "ed", password: "guess", wait: time.Second, status: 401},
		step{desc: "the wait doubles to 2s", addr: mallory, user: "ed", password: "guess", status: 429, retryAfter: 2},
		step{desc: "after 2s, one try", addr: mallory, user: "ed", password: "guess", wait: 2 * time.Second, status: 401},
		step{desc: "the wait doubles to 4s", addr: mallory, user: "ed", password: "guess", status: 429, retryAfter: 4},
		step{desc: "after 4s, one try", addr: mallory, user: "ed", password: "guess", wait: 4 * time.Second, status: 401},
		step{desc: "the wait doubles to 8s", addr: mallory, user: "ed", password: "guess", status: 429, retryAfter: 8},
		step{desc: "the user still logs in from elsewhere", addr: ed, user: "ed", password: password, status: 200},
		step{desc: "another account from the same client is free", addr: mallory, user: "admin", password: password, status: 200},
		step{desc: "success from the client resets the pair", addr: mallory, user: "ed", password: password, wait: 8 * time.Second, status: 200},
		step{desc: "so a slip costs nothing", addr: mallory, user: "ed", password: "guess", status: 401},
	)
	for i := range 20 {
		steps = append(steps, step{desc: "spray " + strconv.Itoa(i), addr: sprayer, user: "user" + strconv.Itoa(i), password: "guess", status: 401})
	}
	steps = append(steps,
		step{desc: "the spraying client waits, whatever the name", addr: sprayer, user: "ed", password: password, status: 429, retryAfter: 1},
		step{desc: "nobody else does", addr: ed, user: "ed", password: password, status: 200},
	)
	for i := range 5 {
		steps = append(steps, step{desc: "IPv6 failure " + strconv.Itoa(i+1), addr: "2001:db8::" + strconv.Itoa(i+1), user: "ed", password: "guess", status: 401})
	}
	steps = append(steps,
		step{desc: "a new address in the same /64 waits", addr: "2001:db8::ff", user: "ed", password: "guess", status: 429, retryAfter: 1},
		step{desc: "another /64 does not", addr: "2001:db8:0:1::1", user: "ed", password: password, status: 200},
	)
	c := e.anon()
	for _, st := range steps {
		t.Run(st.desc, func(t *testing.T) {
			c.t = t
			clock.Add(st.wait)
			r := c.do("POST", "/api/v1/auth/login", map[string]string{"username": st.user, "password": st.password}, "X-Forwarded-For: "+st.addr)
			if r.status != st.status {
				t.Fatalf("%s as %s: %d, want %d: %s", st.addr, st.user, r.status, st.status, r.body)
			}
			if st.status == 429 {
				if got := r.header.Get("Retry-After"); got != strconv.Itoa(st.retryAfter) {
					t.Fatalf("Retry-After %q, want %d", got, st.retryAfter)
				}
				if p := r.problem(t); p.Code != sluice.ERATELIMITED {
					t.Fatalf("problem %+v", p)
				}
			}
		})
	}
}

// TestLoginInput: a login without a password is a 400 naming the field (it
// was a 401), and names match whatever their case, which is why two users
// may not differ only in case.
func TestLoginInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	admin := e.login("admin")
	admin.must(http.StatusCreated, "POST", "/api/v1/users", map[string]any{"username": "Carol", "password": password, "role": "viewer"})
	anon := e.anon()
	for _, tc := range []struct {
		desc   string
		body   any
		status int
		field  string
	}{
		{desc: "no password", body: map[string]string{"username": "Carol"}, status: 400, field: "password"},
		{desc: "empty password", body: map[string]string{"username": "Carol", "password": ""}, status: 400, field: "password"},
		{desc: "no username", body: map[string]string{"password": password}, status: 400, field: "username"},
		{desc: "wrong password", body: map[string]string{"username": "Carol", "password": "wrong password"}, status: 401},
		{desc: "name in another case", body: map[string]string{"username": "cAROL", "password": password}, status: 200},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			anon.t = t
			r := anon.do("POST", "/api/v1/auth/login", tc.body)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if tc.field != "" {
				if p := r.problem(t); len(p.Errors) != 1 || p.Errors[0].Path != tc.field {
					t.Fatalf("errors %+v, want one at %q", p.Errors, tc.field)
				}
			}
		})
	}
	for _, name := range []string{"carol", "CAROL"} {
		r := admin.do("POST", "/api/v1/users", map[string]any{"username": name, "password": password, "role": "viewer"})
		if r.status != http.StatusConflict {
			t.Fatalf("creating %q beside Carol: %d %s", name, r.status, r.body)
		}
	}
}

// TestPasswordChangeRevokesTokens: a new password ends the user's sessions
// and revokes their API tokens (before, tokens minted with a leaked
// password outlived the change).
func TestPasswordChangeRevokesTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	admin := e.login("admin")
	var u sluice.User
	admin.must(http.StatusCreated, "POST", "/api/v1/users", map[string]any{"username": "ed", "password": password, "role": "editor"}).decode(t, &u)
	ed := e.login("ed")
	tok := e.token(ed, sluice.RoleEditor)
	tok.must(http.StatusOK, "GET", "/api/v1/me", nil)
	admin.must(http.StatusOK, "PATCH", "/api/v1/users/"+strconv.FormatInt(u.ID, 10), map[string]any{"password": "a brand new password"})
	tok.must(http.StatusUnauthorized, "GET", "/api/v1/me", nil)
	ed.must(http.StatusUnauthorized, "GET", "/api/v1/me", nil)
	var toks struct{ Items []sluice.Token }
	admin.must(http.StatusOK, "GET", "/api/v1/tokens", nil).decode(t, &toks)
	if len(toks.Items) != 1 || toks.Items[0].RevokedAt == nil {
		t.Fatalf("tokens after the password change: %+v", toks.Items)
	}
	// The new password works.
	ed2 := e.anon()
	ed2.must(http.StatusOK, "POST", "/api/v1/auth/login", map[string]string{"username": "ed", "password": "a brand new password"})
}

// TestLoginThrottleParallel: guesses sent at once are counted as they
// arrive, not when their password check ends, so a burst gets no more free
// tries than a sequence; and successful logins cost a client nothing.
func TestLoginThrottleParallel(t *testing.T) {
	t.Parallel()
	clock := &manualClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	e := newEnv(t, envOptions{settings: func(s *sluicehttp.Settings) { s.Now = clock.Now }})
	admin := e.login("admin")
	admin.must(http.StatusCreated, "POST", "/api/v1/users", map[string]any{"username": "ed", "password": password, "role": "editor"})
	const burst = 30
	statuses := make(chan int, burst)
	var wg sync.WaitGroup
	for range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := e.anon()
			statuses <- c.do("POST", "/api/v1/auth/login", map[string]string{"username": "ed", "password": "guess"}).status
		}()
	}
	wg.Wait()
	close(statuses)
	count := map[int]int{}
	for s := range statuses {
		count[s]++
	}
	if count[http.StatusUnauthorized] != 5 || count[http.StatusTooManyRequests] != burst-5 {
		t.Fatalf("a burst of %d guesses: %v, want 5 checked and the rest 429", burst, count)
	}
	for i := range 25 {
		if r := e.anon().do("POST", "/api/v1/auth/login", map[string]string{"username": "admin", "password": password}); r.status != http.StatusOK {
			t.Fatalf("successful login %d from one address: %d %s", i+1, r.status, r.body)
		}
	}
}
