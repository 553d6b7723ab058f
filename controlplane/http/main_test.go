package http_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/etcd"
	sluicehttp "github.com/sluicegw/sluice/controlplane/http"
	"github.com/sluicegw/sluice/controlplane/internal/testenv"
	"github.com/sluicegw/sluice/controlplane/postgres"
	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
)

// sharedEtcd serves every test that does not stop etcd; each test writes
// under its own prefix.
var sharedEtcd *etcd.Embedded

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-etcd-")
	if err != nil {
		panic(err)
	}
	// Ports below the kernel's ephemeral range, picked again when another
	// process took one between the pick and etcd's bind (the packages'
	// tests run in parallel, and ":0" ports collide with their connections).
	for try := 0; ; try++ {
		client, err1 := etcdtest.PickLoopbackURL()
		peer, err2 := etcdtest.PickLoopbackURL()
		if err = errors.Join(err1, err2); err == nil {
			sharedEtcd, err = etcd.StartEmbedded(context.Background(), etcd.EmbeddedConfig{Dir: dir,
				ClientURL: client.String(), PeerURL: peer.String(), LogLevel: "fatal"})
		}
		if err == nil || try == 10 || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "embedded etcd:", err)
		os.Exit(1)
	}
	code := m.Run()
	sharedEtcd.Close()
	os.RemoveAll(dir)
	testenv.Cleanup()
	os.Exit(code)
}

const password = "correct horse battery"

// env is one control plane over a fresh database, served by httptest.
type env struct {
	t         testing.TB
	db        *postgres.DB
	srv       *httptest.Server
	api       *sluicehttp.Server
	etcd      *clientv3.Client
	keys      api.Keys
	publisher *etcd.Publisher
	history   *postgres.NodeHistory
}

type envOptions struct {
	dsn       string // a database to use instead of a fresh one
	endpoints []string
	settings  func(*sluicehttp.Settings)
	opTimeout time.Duration
	// watch starts a node watcher, as sluice-admin does.
	watch bool
	// argon2 replaces the tests' cheap password hashing.
	argon2 *postgres.Argon2Params
	// tracer records the API's and the publisher's spans, as sluice-admin's
	// --otlp-endpoint does.
	tracer trace.Tracer
}

func randomPrefix() string {
	b := make([]byte, 4)
	rand.Read(b)
	return "/test-" + hex.EncodeToString(b)
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	if o.dsn == "" {
		o.dsn = testenv.MustDatabase(t)
	}
	if o.endpoints == nil {
		o.endpoints = sharedEtcd.Endpoints()
	}
	e := &env{t: t, keys: api.Keys{Prefix: randomPrefix()}}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	var err error
	if e.etcd, err = etcd.NewClient(o.endpoints); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.etcd.Close() })
	argon := testenv.FastArgon2
	if o.argon2 != nil {
		argon = *o.argon2
	}
	auditKey := make([]byte, 32)
	rand.Read(auditKey)
	db, err := postgres.Open(context.Background(), o.dsn, postgres.Settings{Logger: logger, Argon2: argon,
		OnPublish: func(string) { e.publisher.Wake() }, AuditKey: []byte(hex.EncodeToString(auditKey)),
		AuditCheckpoint: &etcd.AuditCheckpoint{Client: e.etcd, Keys: e.keys}})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	e.db = db
	outbox := postgres.NewOutbox(db)
	users := postgres.NewUserService(db)
	audit := postgres.NewAuditService(db)
	e.history = postgres.NewNodeHistory(db)
	s := sluicehttp.Settings{
		Namespaces: postgres.NewNamespaceService(db), Drafts: postgres.NewDraftService(db), Changes: postgres.NewChangeService(db),
		Versions: postgres.NewVersionService(db), Users: users, Sessions: postgres.NewSessionService(db),
		Tokens: postgres.NewTokenService(db), Audit: audit, Outbox: outbox,
		Nodes:    &etcd.NodeService{Client: e.etcd, Keys: e.keys, History: e.history, Audit: audit, Logger: logger},
		Canaries: postgres.NewCanaryService(db),
		Ready: map[string]func(context.Context) error{"database": db.Ping,
			"etcd": func(ctx context.Context) error { return etcd.Ping(ctx, e.etcd) }},
		Logger: logger, Tracer: o.tracer,
	}
	if o.settings != nil {
		o.settings(&s)
	}
	if e.api, err = sluicehttp.New(s); err != nil {
		t.Fatal(err)
	}
	e.publisher = etcd.NewPublisher(etcd.Settings{Client: e.etcd, Outbox: outbox, Keys: e.keys, Logger: logger,
		PollInterval: 200 * time.Millisecond, OpTimeout: o.opTimeout, MinBackoff: 50 * time.Millisecond, MaxBackoff: 400 * time.Millisecond,
		Observe: e.api.ObservePublish, Tracer: o.tracer})
	e.publisher.Start(context.Background())
	t.Cleanup(e.publisher.Close)
	if o.watch {
		namespaces := postgres.NewNamespaceService(db)
		w := etcd.NewNodeWatcher(etcd.WatcherSettings{Client: e.etcd, History: e.history, Keys: e.keys, Logger: logger,
			Rescan: 100 * time.Millisecond, Heartbeat: 200 * time.Millisecond, MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond,
			Namespaces: func(ctx context.Context) ([]string, error) {
				nss, err := namespaces.FindNamespaces(ctx)
				var names []string
				for _, ns := range nss {
					names = append(names, ns.Name)
				}
				return names, err
			}})
		w.Start(context.Background())
		t.Cleanup(w.Close)
	}
	e.srv = httptest.NewServer(specChecked(t, e.api.Handler()))
	t.Cleanup(e.srv.Close)
	if _, err := users.EnsureBootstrapAdmin(context.Background(), "admin", password); err != nil {
		t.Fatal(err)
	}
	return e
}

// client is one user's HTTP session: a cookie jar and CSRF token, or a
// bearer token.
type client struct {
	t      testing.TB
	e      *env
	http   *http.Client
	csrf   string
	bearer string
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r *resp) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

func (r *resp) problem(t testing.TB) sluicehttp.Problem {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != sluicehttp.ProblemContentType {
		t.Fatalf("content type %q, want problem+json (status %d, body %s)", ct, r.status, r.body)
	}
	var p sluicehttp.Problem
	r.decode(t, &p)
	return p
}

func (e *env) anon() *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: e.t, e: e, http: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
}

// waitReady waits for /readyz to answer 200. Its checks give each
// dependency a second, which etcd under the race detector on a busy
// machine sometimes misses; readiness is expected to come back.
func (e *env) waitReady() {
	e.t.Helper()
	c := e.anon()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := c.do("GET", "/readyz", nil)
		if r.status == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("GET /readyz: status %d, want 200: %s", r.status, r.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// do sends a request; body is JSON-encoded unless it is []byte or string.
// hdr are "Name: value" pairs.
func (c *client) do(method, path string, body any, hdr ...string) *resp {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, c.e.srv.URL+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.csrf != "" {
		req.Header.Set("X-CSRF-Token", c.csrf)
	}
	if c.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+c.bearer)
	}
	for _, h := range hdr {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	res, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return &resp{status: res.StatusCode, header: res.Header, body: b}
}

// must sends a request and fails the test unless the status is want.
func (c *client) must(want int, method, path string, body any, hdr ...string) *resp {
	c.t.Helper()
	r := c.do(method, path, body, hdr...)
	if r.status != want {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, want, r.body)
	}
	return r
}

func (e *env) login(user string) *client {
	e.t.Helper()
	c := e.anon()
	r := c.must(http.StatusOK, "POST", "/api/v1/auth/login", map[string]string{"username": user, "password": password})
	var out struct {
		User      sluice.User `json:"user"`
		CSRFToken string      `json:"csrfToken"`
	}
	r.decode(e.t, &out)
	if out.CSRFToken == "" || out.User.Username != user {
		e.t.Fatalf("login response %s", r.body)
	}
	c.csrf = out.CSRFToken
	return c
}

// token returns a client using a new API token of user with role.
func (e *env) token(from *client, role sluice.Role) *client {
	e.t.Helper()
	r := from.must(http.StatusCreated, "POST", "/api/v1/tokens", map[string]any{"name": "t-" + string(role), "role": role})
	var out struct {
		ID    int64  `json:"id"`
		Token string `json:"token"`
	}
	r.decode(e.t, &out)
	c := e.anon()
	c.bearer = out.Token
	return c
}

// mustShop logs in as admin, creates the namespace "shop" and the users "ed"
// (editor) and "ap" (approver), and returns the three clients.
func (e *env) mustShop() (admin, ed, ap *client) {
	e.t.Helper()
	admin = e.login("admin")
	admin.must(http.StatusCreated, "POST", "/api/v1/namespaces", map[string]string{"name": "shop"})
	return admin, e.mustUser(admin, "ed", sluice.RoleEditor), e.mustUser(admin, "ap", sluice.RoleApprover)
}

func (e *env) mustUser(admin *client, name string, role sluice.Role) *client {
	e.t.Helper()
	admin.must(http.StatusCreated, "POST", "/api/v1/users", map[string]any{"username": name, "password": password, "role": role})
	return e.login(name)
}

// draft returns the draft's rule set and ETag.
func (c *client) draft(ns string) (*api.RuleSet, string) {
	c.t.Helper()
	r := c.must(http.StatusOK, "GET", "/api/v1/namespaces/"+ns+"/draft", nil)
	rs, err := api.Decode(r.body)
	if err != nil {
		c.t.Fatal(err)
	}
	return rs, r.header.Get("ETag")
}

func route(id string) api.Route {
	return api.Route{ID: id, Match: api.Match{PathPrefix: "/" + id}, Upstream: api.Upstream{Targets: []api.Target{{URL: "http://127.0.0.1:8081"}}}}
}

// publishRoutes edits the draft to hold routes, opens a change as author,
// approves it as approver, publishes it, and returns the version.
func publishRoutes(t testing.TB, ns string, author, approver *client, routes ...string) *sluice.Version {
	t.Helper()
	rs, etag := author.draft(ns)
	rs.Routes = nil
	for _, id := range routes {
		rs.Routes = append(rs.Routes, route(id))
	}
	author.must(http.StatusOK, "PUT", "/api/v1/namespaces/"+ns+"/draft", rs, "If-Match: "+etag)
	var ch sluice.Change
	author.must(http.StatusCreated, "POST", "/api/v1/namespaces/"+ns+"/changes", map[string]string{"title": "routes " + strings.Join(routes, ",")}).decode(t, &ch)
	approver.must(http.StatusOK, "POST", fmt.Sprintf("/api/v1/namespaces/%s/changes/%d/approve", ns, ch.ID), map[string]string{"comment": "lgtm"})
	var v sluice.Version
	approver.must(http.StatusCreated, "POST", fmt.Sprintf("/api/v1/namespaces/%s/changes/%d/publish", ns, ch.ID), nil).decode(t, &v)
	return v2(v)
}

func v2(v sluice.Version) *sluice.Version { return &v }

// waitPublished waits until etcd holds version n of ns and returns it.
func (e *env) waitPublished(ns string, n int64, within time.Duration) *api.Published {
	e.t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		res, err := e.etcd.Get(ctx, e.keys.RuleSet(ns))
		cancel()
		if err == nil && len(res.Kvs) == 1 {
			var head struct{ Version int64 }
			if err := json.Unmarshal(res.Kvs[0].Value, &head); err != nil {
				e.t.Fatalf("etcd holds an invalid value: %v", err)
			}
			if head.Version == n {
				p, err := api.DecodePublished(res.Kvs[0].Value)
				if err != nil {
					e.t.Fatalf("etcd holds an invalid value: %v", err)
				}
				return p
			}
			last = fmt.Sprintf("version %d", head.Version)
		} else if err != nil {
			last = err.Error()
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("etcd did not get version %d of %s within %s (last: %s)", n, ns, within, last)
	return nil
}

// waitVersion waits until etcd holds version n of ns, reading only the
// version field (cheap enough to poll a large value).
func (e *env) waitVersion(ns string, n int64, within time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		res, err := e.etcd.Get(ctx, e.keys.RuleSet(ns))
		cancel()
		if err == nil && len(res.Kvs) == 1 {
			var head struct{ Version int64 }
			if json.Unmarshal(res.Kvs[0].Value, &head) == nil && head.Version == n {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.t.Fatalf("etcd did not get version %d of %s within %s", n, ns, within)
}
