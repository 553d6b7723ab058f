package e2e

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
)

// ns is the namespace every gateway of the harness follows.
const ns = "e2e"

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
	builtDir  string // removed by TestMain
)

func TestMain(m *testing.M) {
	code := m.Run()
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

// repoRoot walks up from the package directory to the one holding go.work.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work above the package directory")
		}
		dir = parent
	}
}

// mustBinaries builds sluice-admin and sluice-gateway once per test binary
// (without -race, whatever the test runs with) and returns their directory.
// SLUICE_E2E_BIN names a directory holding them already.
func mustBinaries(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		if d := os.Getenv("SLUICE_E2E_BIN"); d != "" {
			binDir = d
			return
		}
		root, err := repoRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "sluice-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtDir = dir
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = filepath.Join(runtimeGOROOT(), "bin", "go")
		}
		for _, b := range []struct{ name, pkg string }{
			{"sluice-gateway", "./dataplane/cmd/sluice-gateway"},
			{"sluice-admin", "./controlplane/cmd/sluice-admin"},
		} {
			cmd := exec.Command(goBin, "build", "-o", filepath.Join(dir, b.name), b.pkg)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s (in %s): %v\n%s", b.pkg, root, err, out)
				return
			}
		}
		binDir = dir
	})
	if buildErr != nil {
		tb.Fatalf("building the binaries: %v", buildErr)
	}
	return binDir
}

func runtimeGOROOT() string {
	if r := os.Getenv("GOROOT"); r != "" {
		return r
	}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return "/usr/local/go"
	}
	return strings.TrimSpace(string(out))
}

// freeAddr picks a free loopback address below the kernel's ephemeral range,
// handed out once per test binary (etcdtest.FreeLoopbackURL).
func freeAddr(tb testing.TB) string {
	tb.Helper()
	return etcdtest.FreeLoopbackURL(tb).Host
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ---- etcd ----

// testEtcd is the embedded etcd of package etcdtest; Stop and Restart keep
// its directory and ports.
type testEtcd = etcdtest.Server

func mustEtcd(tb testing.TB) *testEtcd { return etcdtest.Start(tb) }

// etcdClient returns a client of the server that the test's cleanup closes.
func (h *harness) etcdClient() *clientv3.Client {
	h.tb.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{h.etcd.Addr()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		h.tb.Fatalf("etcd client: %v", err)
	}
	h.tb.Cleanup(func() { c.Close() })
	return c
}

// ---- Postgres ----

// mustDatabase creates a fresh database on the machine's Postgres and drops
// it in cleanup; it fails the test when Postgres is not there.
func mustDatabase(tb testing.TB) string {
	tb.Helper()
	if _, err := exec.LookPath("psql"); err != nil {
		tb.Fatal("the e2e test needs Postgres at 127.0.0.1:5432 (user postgres, trust auth) and psql; psql is not installed")
	}
	name := "sluice_e2e_" + randomHex(6)
	psql := func(sql string) ([]byte, error) {
		return exec.Command("psql", "-h", "127.0.0.1", "-p", "5432", "-U", "postgres", "-d", "postgres",
			"-v", "ON_ERROR_STOP=1", "-q", "-c", sql).CombinedOutput()
	}
	if out, err := psql("CREATE DATABASE " + name); err != nil {
		tb.Fatalf("the e2e test needs Postgres at 127.0.0.1:5432 (user postgres, trust auth): CREATE DATABASE: %v\n%s", err, out)
	}
	tb.Cleanup(func() {
		if out, err := psql("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			tb.Logf("dropping database %s: %v\n%s", name, err, out)
		}
	})
	return "postgres://postgres@127.0.0.1:5432/" + name + "?sslmode=disable"
}

// ---- processes ----

// proc is one child process whose stderr (and stdout) go to a log file kept
// across restarts.
type proc struct {
	name string
	bin  string
	args []string
	env  []string
	log  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *proc) start(tb testing.TB) {
	tb.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	fmt.Fprintf(f, "==== %s start %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		tb.Fatalf("starting %s: %v", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(done)
	}()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
}

// exited reports whether the process has exited, with its state.
func (p *proc) exited() (bool, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return true, "not started"
	}
	select {
	case <-p.done:
		return true, p.cmd.ProcessState.String()
	default:
		return false, ""
	}
}

// stop sends SIGTERM, waits up to grace, then kills; it reports whether the
// process exited on SIGTERM within grace.
func (p *proc) stop(grace time.Duration) bool {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return true
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return true
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
		return false
	}
}

// tail is the last n lines of the process's log.
func (p *proc) tail(n int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ---- the harness ----

// harness is a control plane, an etcd, an upstream and gateways. The
// control plane signs with signingKey (file signingFile); gateways trust
// trustFile, its public key.
type harness struct {
	tb          testing.TB
	dir         string
	bins        string
	signingKey  ed25519.PrivateKey
	signingFile string
	trustFile   string
	etcd        *testEtcd
	upstream    *httptest.Server
	admin       *proc
	adminURL    string
	password    string
	author      *apiClient // the bootstrap admin
	approver    *apiClient
	gateways    map[string]*gateway
	procs       []*proc
}

func newHarness(tb testing.TB) *harness {
	tb.Helper()
	h := &harness{tb: tb, dir: tb.TempDir(), bins: mustBinaries(tb), gateways: map[string]*gateway{}}
	dbURL := mustDatabase(tb)
	h.etcd = mustEtcd(tb)
	h.upstream = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok\n")
	}))
	tb.Cleanup(h.upstream.Close)
	tb.Cleanup(func() {
		for _, p := range h.procs {
			if !p.stop(10 * time.Second) {
				tb.Logf("%s did not exit within 10s of SIGTERM; killed", p.name)
			}
		}
		if tb.Failed() {
			for _, p := range h.procs {
				tb.Logf("---- %s: last lines of %s ----\n%s", p.name, p.log, p.tail(40))
			}
		}
	})

	h.password = randomHex(12)
	h.signingKey, h.signingFile, h.trustFile = mustKeyPair(tb, h.dir, "signing")
	listen := freeAddr(tb)
	h.adminURL = "http://" + listen
	h.admin = &proc{name: "sluice-admin", bin: filepath.Join(h.bins, "sluice-admin"), log: filepath.Join(h.dir, "sluice-admin.log"),
		args: []string{"--database-url", dbURL, "--database-wait", "10s", "--etcd-endpoints", h.etcd.Addr(),
			"--listen", listen, "--log-level", "info", "--web-dir", filepath.Join(h.dir, "no-web"),
			"--signing-key", h.signingFile},
		env: []string{"SLUICE_BOOTSTRAP_ADMIN_PASSWORD=" + h.password}}
	h.procs = append(h.procs, h.admin)
	h.admin.env = append(h.admin.env, "SLUICE_AUDIT_KEY="+randomHex(32))
	h.admin.start(tb)
	h.waitHTTP(h.admin, h.adminURL+"/healthz", 30*time.Second)
	h.author = h.login("admin", h.password)
	h.author.must(http.StatusCreated, "POST", "/api/v1/users", map[string]string{"username": "approver", "password": h.password, "role": "approver"})
	h.approver = h.login("approver", h.password)
	return h
}

// mustKeyPair writes a fresh Ed25519 key pair to dir/name.key (PKCS#8) and
// dir/name.pub (PKIX), as sluice-admin keygen does.
func mustKeyPair(tb testing.TB, dir, name string) (key ed25519.PrivateKey, private, public string) {
	tb.Helper()
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	kp, err := api.MarshalPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	pp, err := api.MarshalPublicKey(pub)
	if err != nil {
		tb.Fatal(err)
	}
	private, public = filepath.Join(dir, name+".key"), filepath.Join(dir, name+".pub")
	if err := os.WriteFile(private, kp, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(public, pp, 0o644); err != nil {
		tb.Fatal(err)
	}
	return key, private, public
}

// signer signs as the harness's control plane does.
func (h *harness) signer() *api.Signer {
	h.tb.Helper()
	s, err := api.NewSigner(h.signingKey)
	if err != nil {
		h.tb.Fatal(err)
	}
	return s
}

// waitHTTP waits until url answers 200, failing early when p exits.
func (h *harness) waitHTTP(p *proc, u string, within time.Duration) {
	h.tb.Helper()
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		if gone, st := p.exited(); gone {
			h.tb.Fatalf("%s exited (%s):\n%s", p.name, st, p.tail(30))
		}
		res, err := c.Get(u)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
			last = res.Status
		} else {
			last = err.Error()
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.tb.Fatalf("%s: %s not 200 within %s (last: %s)", p.name, u, within, last)
}

// ---- admin API ----

// apiClient is one user's session with sluice-admin. Its methods other than
// must are safe to call from any goroutine.
type apiClient struct {
	tb   testing.TB
	base string
	http *http.Client
	csrf string
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r *response) decode(v any) error {
	if err := json.Unmarshal(r.body, v); err != nil {
		return fmt.Errorf("decoding %s: %w", r.body, err)
	}
	return nil
}

func (h *harness) login(user, password string) *apiClient {
	h.tb.Helper()
	jar, _ := cookiejar.New(nil)
	c := &apiClient{tb: h.tb, base: h.adminURL, http: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
	var out struct {
		CSRFToken string `json:"csrfToken"`
	}
	if err := c.must(http.StatusOK, "POST", "/api/v1/auth/login", map[string]string{"username": user, "password": password}).decode(&out); err != nil || out.CSRFToken == "" {
		h.tb.Fatalf("login as %s: %v %+v", user, err, out)
	}
	c.csrf = out.CSRFToken
	return c
}

// call sends a request; body is JSON-encoded unless it is a string. hdr are
// "Name: value" pairs.
func (c *apiClient) call(method, path string, body any, hdr ...string) (*response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-CSRF-Token", c.csrf)
	for _, kv := range hdr {
		k, v, _ := strings.Cut(kv, ": ")
		req.Header.Set(k, v)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the body: %w", method, path, err)
	}
	return &response{status: res.StatusCode, header: res.Header, body: b}, nil
}

// expect is call that also fails unless the status is want.
func (c *apiClient) expect(want int, method, path string, body any, hdr ...string) (*response, error) {
	r, err := c.call(method, path, body, hdr...)
	if err != nil {
		return nil, err
	}
	if r.status != want {
		return r, fmt.Errorf("%s %s: status %d, want %d: %s", method, path, r.status, want, r.body)
	}
	return r, nil
}

// must is expect that fails the test; only from the test's goroutine.
func (c *apiClient) must(want int, method, path string, body any, hdr ...string) *response {
	c.tb.Helper()
	r, err := c.expect(want, method, path, body, hdr...)
	if err != nil {
		c.tb.Fatal(err)
	}
	return r
}

// rules is the namespace's rule set: one route to the upstream and one
// token bucket per X-User of burst requests per hour.
func (h *harness) rules(burst int64) string {
	return fmt.Sprintf(`{"namespace": %q,
  "routes": [{"id": "echo", "match": {"pathPrefix": "/"}, "upstream": {"targets": [{"url": %q}], "timeout": "5s"}}],
  "limits": [{"id": "per-user", "key": ["header:X-User"], "algorithm": "token_bucket", "rate": %d, "period": "1h", "burst": %d}]}`,
		ns, h.upstream.URL, burst, burst)
}

// unlimitedRules is like rules with a bucket that never empties at the
// benchmarks' rates; rate picks the content.
func (h *harness) unlimitedRules(rate int64) string {
	return fmt.Sprintf(`{"namespace": %q,
  "routes": [{"id": "echo", "match": {"pathPrefix": "/"}, "upstream": {"targets": [{"url": %q}], "timeout": "5s"}}],
  "limits": [{"id": "per-user", "key": ["header:X-User"], "algorithm": "token_bucket", "rate": %d, "period": "1s", "burst": %d}]}`,
		ns, h.upstream.URL, rate, rate)
}

func (h *harness) createNamespace() {
	h.tb.Helper()
	h.author.must(http.StatusCreated, "POST", "/api/v1/namespaces", map[string]string{"name": ns, "description": "end-to-end test"})
}

// publish puts doc as the draft (author), opens a change (author), approves
// it (approver) and publishes it (approver), and returns the version. Safe
// from any goroutine.
func (h *harness) publish(doc, title string) (int64, error) { return h.publishIn(ns, doc, title) }

// publishIn is publish in namespace space.
func (h *harness) publishIn(space, doc, title string) (int64, error) {
	base := "/api/v1/namespaces/" + space
	r, err := h.author.expect(http.StatusOK, "GET", base+"/draft", nil)
	if err != nil {
		return 0, err
	}
	if _, err := h.author.expect(http.StatusOK, "PUT", base+"/draft", doc, "If-Match: "+r.header.Get("ETag")); err != nil {
		return 0, err
	}
	var ch struct {
		ID int64 `json:"id"`
	}
	if r, err = h.author.expect(http.StatusCreated, "POST", base+"/changes", map[string]string{"title": title}); err != nil {
		return 0, err
	}
	if err := r.decode(&ch); err != nil {
		return 0, err
	}
	return h.approveAndPublishIn(space, ch.ID)
}

func (h *harness) approveAndPublish(change int64) (int64, error) {
	return h.approveAndPublishIn(ns, change)
}

// approveAndPublishIn has the approver approve and publish change of
// namespace space, and returns the version.
func (h *harness) approveAndPublishIn(space string, change int64) (int64, error) {
	base := fmt.Sprintf("/api/v1/namespaces/%s/changes/%d", space, change)
	if _, err := h.approver.expect(http.StatusOK, "POST", base+"/approve", map[string]string{"comment": "e2e"}); err != nil {
		return 0, err
	}
	r, err := h.approver.expect(http.StatusCreated, "POST", base+"/publish", nil)
	if err != nil {
		return 0, err
	}
	var v struct {
		Number int64 `json:"number"`
	}
	if err := r.decode(&v); err != nil {
		return 0, err
	}
	return v.Number, nil
}

func (h *harness) mustPublish(doc, title string) int64 {
	h.tb.Helper()
	v, err := h.publish(doc, title)
	if err != nil {
		h.tb.Fatalf("publishing %q: %v", title, err)
	}
	return v
}

// publication is a version's publication as the API shows it.
type publication struct {
	State     string `json:"state"`
	Attempts  int    `json:"attempts"`
	LastError string `json:"lastError"`
}

// publicationOf returns the publication of version n.
func (h *harness) publicationOf(n int64) publication {
	h.tb.Helper()
	var vs struct {
		Items []struct {
			Number      int64        `json:"number"`
			Publication *publication `json:"publication"`
		} `json:"items"`
	}
	if err := h.author.must(http.StatusOK, "GET", "/api/v1/namespaces/"+ns+"/versions", nil).decode(&vs); err != nil {
		h.tb.Fatal(err)
	}
	for _, v := range vs.Items {
		if v.Number == n {
			if v.Publication == nil {
				h.tb.Fatalf("version %d has no publication", n)
			}
			return *v.Publication
		}
	}
	h.tb.Fatalf("version %d not listed", n)
	return publication{}
}

// waitPublished waits until the publisher wrote version n to etcd.
func (h *harness) waitPublished(n int64, within time.Duration) {
	h.tb.Helper()
	waitFor(h.tb, within, fmt.Sprintf("version %d published to etcd", n), func() error {
		if p := h.publicationOf(n); p.State != "published" {
			return fmt.Errorf("publication %+v", p)
		}
		return nil
	})
}

// ---- gateways ----

// gateway is one sluice-gateway process following ns.
type gateway struct {
	id       string
	listen   string
	admin    string
	stateDir string
	p        *proc
}

// status is the part of a node's /status the test reads.
type status struct {
	Version        int64  `json:"version"`
	Checksum       string `json:"checksum"`
	Source         string `json:"source"`
	LastApplyError string `json:"lastApplyError"`
	Draining       bool   `json:"draining"`
	Components     struct {
		Etcd struct {
			State     string `json:"state"`
			LastError string `json:"lastError"`
		} `json:"etcd"`
	} `json:"components"`
}

var (
	// trafficClient sends the test's requests through the gateways.
	trafficClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}}
	// statusClient reads /status and /readyz.
	statusClient = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8, IdleConnTimeout: time.Minute}}
)

// startGateway starts (or, given an id it knows, restarts with the same
// addresses and state dir) a gateway and waits until it serves a rule set.
func (h *harness) startGateway(id string) *gateway {
	h.tb.Helper()
	g := h.gateways[id]
	if g == nil {
		g = &gateway{id: id, listen: freeAddr(h.tb), admin: freeAddr(h.tb), stateDir: filepath.Join(h.dir, "state-"+id)}
		g.p = &proc{name: "sluice-gateway " + id, bin: filepath.Join(h.bins, "sluice-gateway"), log: filepath.Join(h.dir, "gateway-"+id+".log"),
			args: []string{"--etcd", h.etcd.Addr(), "--namespace", ns, "--node-id", id, "--labels", "node=" + id,
				"--state-dir", g.stateDir, "--listen", g.listen, "--admin", g.admin, "--trust-keys", h.trustFile,
				"--shutdown-timeout", "5s", "--log-level", "info"}}
		h.gateways[id] = g
		h.procs = append(h.procs, g.p)
	}
	g.p.start(h.tb)
	h.waitHTTP(g.p, "http://"+g.admin+"/readyz", 30*time.Second)
	return g
}

func (g *gateway) status() (status, error) {
	var st status
	res, err := statusClient.Get("http://" + g.admin + "/status")
	if err != nil {
		return st, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return st, fmt.Errorf("/status: %s", res.Status)
	}
	return st, json.NewDecoder(res.Body).Decode(&st)
}

// readyz returns the status code of the node's /readyz.
func (g *gateway) readyz() (int, error) {
	res, err := statusClient.Get("http://" + g.admin + "/readyz")
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, nil
}

// get sends GET / through the gateway as user and returns the status.
func (g *gateway) get(user string) (int, error) {
	req, _ := http.NewRequest("GET", "http://"+g.listen+"/", nil)
	req.Header.Set("X-User", user)
	res, err := trafficClient.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, nil
}

// waitFor polls cond every 10ms until it returns nil, and fails the test
// with its last error after within.
func waitFor(tb testing.TB, within time.Duration, what string, cond func() error) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not within %s: %v", what, within, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitVersion waits until every gateway reports version v applied.
func (h *harness) waitVersion(v int64, within time.Duration, gws ...*gateway) {
	h.tb.Helper()
	for _, g := range gws {
		waitFor(h.tb, within, fmt.Sprintf("%s applies version %d", g.id, v), func() error {
			st, err := g.status()
			if err != nil {
				return err
			}
			if st.Version != v {
				return fmt.Errorf("version %d (source %s, last apply error %q, etcd %s %s)", st.Version, st.Source, st.LastApplyError, st.Components.Etcd.State, st.Components.Etcd.LastError)
			}
			return nil
		})
	}
}

var userSeq struct {
	sync.Mutex
	n int64
}

// freshUser is an X-User value no request has used.
func freshUser() string {
	userSeq.Lock()
	defer userSeq.Unlock()
	userSeq.n++
	n, _ := rand.Int(rand.Reader, big.NewInt(1<<40))
	return fmt.Sprintf("u%d-%s", userSeq.n, n)
}

// expectBurst checks that a fresh user gets exactly burst requests through g
// (200) and the next one refused (429).
func expectBurst(tb testing.TB, g *gateway, burst int) {
	tb.Helper()
	user := freshUser()
	for i := 1; i <= burst+1; i++ {
		want := http.StatusOK
		if i == burst+1 {
			want = http.StatusTooManyRequests
		}
		code, err := g.get(user)
		if err != nil {
			tb.Fatalf("%s: request %d of a fresh user: %v", g.id, i, err)
		}
		if code != want {
			tb.Fatalf("%s: request %d of a fresh user: status %d, want %d (limit burst %d)", g.id, i, code, want, burst)
		}
	}
}
