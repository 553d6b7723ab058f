package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/controlplane/internal/testenv"
	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	testenv.Cleanup()
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// bins builds sluicectl, sluice-admin and sluice-gateway once per test binary.
func bins(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sluicectl-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..", "..")
		for _, b := range []struct{ name, pkg string }{
			{"sluicectl", "./controlplane/cmd/sluicectl"},
			{"sluice-admin", "./controlplane/cmd/sluice-admin"},
			{"sluice-gateway", "./dataplane/cmd/sluice-gateway"},
		} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b.name), b.pkg)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		tb.Fatalf("building the binaries: %v", buildErr)
	}
	return binDir
}

func freeAddr(tb testing.TB) string {
	tb.Helper()
	return etcdtest.FreeLoopbackURL(tb).Host
}

// startProc runs a binary until the test ends; its output goes to a log the
// test prints when it fails.
func startProc(t *testing.T, bin string, env []string, args ...string) {
	t.Helper()
	var log bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &syncWriter{w: &log}, &syncWriter{w: &log}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), log.String())
		}
	})
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func waitReady(t *testing.T, u string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(u)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s not ready within 60s", u)
}

const adminPassword = "correct horse battery"

// plane is one real sluice-admin (Postgres + embedded etcd) with the
// bootstrap admin's and a second approver's tokens, made by sluicectl login.
type plane struct {
	t          *testing.T
	url        string
	adminToken string
	bobToken   string
	bobID      int
	adminHome  string
}

func startPlane(t *testing.T) *plane {
	t.Helper()
	dir := bins(t)
	work := t.TempDir()
	priv, pub := filepath.Join(work, "signing.pem"), filepath.Join(work, "signing.pub")
	if out, err := exec.Command(filepath.Join(dir, "sluice-admin"), "keygen", "--private", priv, "--public", pub).CombinedOutput(); err != nil {
		t.Fatalf("keygen: %v\n%s", err, out)
	}
	listen := freeAddr(t)
	startProc(t, filepath.Join(dir, "sluice-admin"), []string{
		"SLUICE_AUDIT_KEY=" + strings.Repeat("k", 40),
		"SLUICE_BOOTSTRAP_ADMIN_PASSWORD=" + adminPassword,
	},
		"--database-url", testenv.MustDatabase(t),
		"--embedded-etcd", filepath.Join(work, "etcd"),
		"--etcd-endpoints", freeAddr(t),
		"--embedded-etcd-peer", freeAddr(t),
		"--listen", listen,
		"--signing-key", priv,
		"--log-level", "warn",
	)
	p := &plane{t: t, url: "http://" + listen, adminHome: filepath.Join(work, "admin-home")}
	waitReady(t, p.url+"/readyz")

	// login saves a token with mode 0600 and never prints it.
	r := p.ctl(t, []string{"XDG_CONFIG_HOME=" + p.adminHome}, adminPassword+"\n", "login", "--username", "admin", "--server", p.url)
	r.ok(t)
	file := filepath.Join(p.adminHome, "sluice", "token")
	st, err := os.Stat(file)
	if err != nil {
		t.Fatalf("login saved no token: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, want 0600", st.Mode().Perm())
	}
	tok, _ := os.ReadFile(file)
	p.adminToken = strings.TrimSpace(string(tok))
	if p.adminToken == "" || strings.Contains(r.stdout+r.stderr, p.adminToken) || strings.Contains(r.stdout+r.stderr, adminPassword) {
		t.Fatalf("login printed the token or password, or saved none: %+v", r)
	}

	var bob struct {
		ID int `json:"id"`
	}
	_ = json.Unmarshal(p.call(t, p.adminToken, "POST", "/api/v1/users", `{"username":"bob","password":"bobs password 1","role":"approver"}`, http.StatusCreated), &bob)
	p.bobID = bob.ID
	p.call(t, p.adminToken, "POST", "/api/v1/namespaces", `{"name":"shop"}`, http.StatusCreated)
	bobHome := filepath.Join(work, "bob-home")
	p.ctl(t, []string{"XDG_CONFIG_HOME=" + bobHome}, "bobs password 1\n", "login", "--username", "bob", "--server", p.url).ok(t)
	tok, _ = os.ReadFile(filepath.Join(bobHome, "sluice", "token"))
	p.bobToken = strings.TrimSpace(string(tok))
	return p
}

// call is a direct admin-API request, for the test's own setup and checks.
func (p *plane) call(t *testing.T, token, method, path, body string, want int) []byte {
	t.Helper()
	req, _ := http.NewRequest(method, p.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if method == "PUT" {
		req.Header.Set("If-Match", "*")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	return b
}

type result struct {
	code           int
	stdout, stderr string
}

func (r result) ok(t *testing.T) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d, want 0\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	return r
}

// ctl runs the built sluicectl with env added and stdin given.
func (p *plane) ctl(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	return runCtl(t, env, stdin, args...)
}

func runCtl(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(filepath.Join(bins(t), "sluicectl"), args...)
	cmd.Env = append(os.Environ(), "SLUICE_TOKEN=", "SLUICE_SERVER=", "SLUICE_NAMESPACE=", "XDG_CONFIG_HOME="+t.TempDir())
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running sluicectl: %v", err)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// as runs sluicectl against the plane with a token.
func (p *plane) as(t *testing.T, token string, args ...string) result {
	t.Helper()
	return runCtl(t, []string{"SLUICE_SERVER=" + p.url, "SLUICE_TOKEN=" + token}, "", args...)
}

const shopRules = `namespace: shop
routes:
  - id: orders
    match: {pathPrefix: /api/orders}
    upstream:
      targets: [{url: "http://127.0.0.1:8081"}]
limits:
  - id: orders-per-ip
    routes: [orders]
    key: [ip]
    algorithm: token_bucket
    rate: 100
    period: 1s
    burst: 150
`

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func canonicalOf(t *testing.T, doc []byte) string {
	t.Helper()
	rs, err := api.Decode(doc)
	if err != nil {
		t.Fatalf("decoding %s: %v", doc, err)
	}
	return string(rs.Canonical())
}

var changeID = regexp.MustCompile(`change (\d+) opened`)

func opened(t *testing.T, r result) string {
	t.Helper()
	m := changeID.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no change id in %q", r.stdout)
	}
	return m[1]
}

// TestGitWorkflow is the rules-in-git loop through the built binary: validate,
// diff, apply, a second person's approval, publish, export, rollback.
func TestGitWorkflow(t *testing.T) {
	p := startPlane(t)
	file := writeFile(t, "shop.yaml", shopRules)
	bad := writeFile(t, "bad.yaml", strings.Replace(shopRules, "rate: 100", "rate: -1", 1))

	runCtl(t, nil, "", "validate", file).ok(t)
	r := runCtl(t, nil, "", "validate", bad)
	if r.code != 1 || !strings.Contains(r.stderr, "limits[0].rate: must be > 0") {
		t.Fatalf("validate of an invalid file: %+v, want exit 1 naming limits[0].rate", r)
	}

	r = p.as(t, p.adminToken, "diff", file)
	if r.code != 2 || !strings.Contains(r.stdout, "limit orders-per-ip added: token_bucket 100 per 1s, key [ip]") {
		t.Fatalf("diff before the first publish: %+v, want exit 2 and the added limit", r)
	}

	r = p.as(t, p.adminToken, "apply", file, "--title", "shop rules", "--description", "from git").ok(t)
	id := opened(t, r)

	// The author cannot approve; a second person can.
	if r := p.as(t, p.adminToken, "changes", "approve", id, "-n", "shop"); r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "403") {
		t.Fatalf("author's approval: %+v, want one line with 403, exit 1", r)
	}
	p.as(t, p.bobToken, "changes", "approve", id, "-n", "shop", "--comment", "lgtm").ok(t)
	r = p.as(t, p.bobToken, "changes", "publish", id, "-n", "shop").ok(t)
	if !strings.Contains(r.stdout, "as version 1 ") {
		t.Fatalf("publish: %q, want version 1", r.stdout)
	}

	r = p.as(t, p.bobToken, "export", "-n", "shop").ok(t)
	if got, want := canonicalOf(t, []byte(r.stdout)), canonicalOf(t, []byte(shopRules)); got != want {
		t.Fatalf("export:\n%s\nwant the file's canonical form\n%s", got, want)
	}

	if r := p.as(t, p.adminToken, "diff", file); r.code != 0 || !strings.Contains(r.stdout, "no differences") {
		t.Fatalf("diff after publishing the file: %+v, want exit 0", r)
	}
	if r := p.as(t, p.adminToken, "apply", file, "--title", "again").ok(t); !strings.Contains(r.stdout, "equals version 1 of shop: nothing to apply") {
		t.Fatalf("apply of the published file: %q", r.stdout)
	}
	file2 := writeFile(t, "shop.yaml", strings.Replace(shopRules, "rate: 100", "rate: 1000", 1))
	r = p.as(t, p.adminToken, "diff", file2)
	if r.code != 2 || !strings.Contains(r.stdout, "limit orders-per-ip: rate 100 → 1000 per 1s") || !strings.Contains(r.stdout, "warning limit-loosened") {
		t.Fatalf("diff of a loosened limit: %+v, want exit 2, the console's sentence and its warning", r)
	}
	r = p.as(t, p.adminToken, "diff", file2, "-o", "json")
	var dj diffOutput
	if r.code != 2 || json.Unmarshal([]byte(r.stdout), &dj) != nil || !dj.Differences || dj.Diff.Changed != 1 || dj.Version != 1 {
		t.Fatalf("diff -o json: %+v -> %+v", r, dj)
	}

	r = p.as(t, p.adminToken, "apply", file2, "--title", "raise orders limit").ok(t)
	if !strings.Contains(r.stdout, "limit-loosened") {
		t.Fatalf("apply did not print the server's warnings: %q", r.stdout)
	}
	id2 := opened(t, r)
	if r := p.as(t, p.adminToken, "diff", file2, "--against", "draft"); r.code != 0 {
		t.Fatalf("diff against the draft just applied: %+v, want exit 0", r)
	}
	if r := p.as(t, p.adminToken, "changes", "show", id2, "-n", "shop").ok(t); !strings.Contains(r.stdout, "state: open") || !strings.Contains(r.stdout, "limit orders-per-ip: rate 100 → 1000") {
		t.Fatalf("changes show: %q", r.stdout)
	}
	p.as(t, p.bobToken, "changes", "approve", id2, "-n", "shop").ok(t)
	p.as(t, p.bobToken, "changes", "publish", id2, "-n", "shop").ok(t)
	r = p.as(t, p.bobToken, "versions", "list", "-n", "shop", "-o", "json").ok(t)
	var vl struct {
		Items []struct {
			Number int `json:"number"`
		} `json:"items"`
	}
	if json.Unmarshal([]byte(r.stdout), &vl) != nil || len(vl.Items) != 2 || vl.Items[0].Number != 2 {
		t.Fatalf("versions list -o json: %s", r.stdout)
	}
	// versions diff exits as diff(1) does: 2 when the versions differ, 0 when they do not.
	if r := p.as(t, p.bobToken, "versions", "diff", "1", "2", "-n", "shop"); r.code != 2 || !strings.Contains(r.stdout, "limit orders-per-ip: rate 100 → 1000") {
		t.Fatalf("versions diff: exit %d, want 2: %q %q", r.code, r.stdout, r.stderr)
	}
	p.as(t, p.bobToken, "versions", "diff", "2", "2", "-n", "shop").ok(t)

	// Roll back to version 1: a change, approved by the second person, published.
	r = p.as(t, p.adminToken, "versions", "rollback", "1", "--reason", "p99 doubled", "-n", "shop").ok(t)
	m := regexp.MustCompile(`change (\d+) opened to roll back`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("rollback: %q", r.stdout)
	}
	p.as(t, p.bobToken, "changes", "approve", m[1], "-n", "shop").ok(t)
	p.as(t, p.bobToken, "changes", "publish", m[1], "-n", "shop").ok(t)
	r = p.as(t, p.bobToken, "export", "-n", "shop").ok(t)
	if got, want := canonicalOf(t, []byte(r.stdout)), canonicalOf(t, []byte(shopRules)); got != want {
		t.Fatalf("export after the rollback:\n%s\nwant version 1's\n%s", got, want)
	}
	if r := p.as(t, p.bobToken, "audit", "verify").ok(t); !strings.Contains(r.stdout, "audit chain ok") {
		t.Fatalf("audit verify: %q", r.stdout)
	}
}

// TestApplyRefusesMovedDraft: someone else writes the draft between
// sluicectl's read and its write; the write is refused and nothing of the
// file is stored, and no change is opened.
func TestApplyRefusesMovedDraft(t *testing.T) {
	p := startPlane(t)
	other := strings.Replace(shopRules, "rate: 100", "rate: 7", 1)
	target, _ := url.Parse(p.url)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var once sync.Once
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/draft") {
			once.Do(func() {
				p.call(t, p.bobToken, "GET", "/api/v1/me", "", http.StatusOK)
				req, _ := http.NewRequest("PUT", p.url+"/api/v1/namespaces/shop/draft", strings.NewReader(other))
				req.Header.Set("Authorization", "Bearer "+p.adminToken)
				req.Header.Set("Content-Type", "application/yaml")
				req.Header.Set("If-Match", "*")
				resp, err := http.DefaultClient.Do(req)
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Errorf("the other writer's PUT: %v %v", err, resp)
				}
				if resp != nil {
					resp.Body.Close()
				}
			})
		}
		proxy.ServeHTTP(w, r)
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	file := writeFile(t, "shop.yaml", shopRules)
	r := runCtl(t, []string{"SLUICE_SERVER=http://" + l.Addr().String(), "SLUICE_TOKEN=" + p.adminToken}, "", "apply", file, "--title", "mine")
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "changed since sluicectl read it") || !strings.Contains(r.stderr, "nothing was written") {
		t.Fatalf("apply over a moved draft: %+v, want one line saying the draft changed, exit 1", r)
	}
	draft := p.call(t, p.adminToken, "GET", "/api/v1/namespaces/shop/draft", "", http.StatusOK)
	if got, want := canonicalOf(t, draft), canonicalOf(t, []byte(other)); got != want {
		t.Fatalf("draft after the refused apply:\n%s\nwant the other writer's\n%s", got, want)
	}
	var changes struct {
		Items []json.RawMessage `json:"items"`
	}
	_ = json.Unmarshal(p.call(t, p.adminToken, "GET", "/api/v1/namespaces/shop/changes", "", http.StatusOK), &changes)
	if len(changes.Items) != 0 {
		t.Fatalf("a change was opened: %d", len(changes.Items))
	}
}

// TestBadInput: each mistake is one line naming it, exit 1, nothing written.
func TestBadInput(t *testing.T) {
	p := startPlane(t)
	before := p.call(t, p.adminToken, "GET", "/api/v1/namespaces/shop/draft", "", http.StatusOK)
	// A new password revokes every token of bob's.
	p.call(t, p.adminToken, "PATCH", fmt.Sprintf("/api/v1/users/%d", p.bobID), `{"password":"bobs password 2"}`, http.StatusOK)
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(50 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	file := writeFile(t, "shop.yaml", shopRules)
	notYAML := writeFile(t, "notes.txt", "this: is: not\n  - yaml [\n")
	space := writeFile(t, "space.yaml", strings.Replace(shopRules, "id: orders-per-ip", "id: orders per-ip", 1))
	nope := writeFile(t, "nope.yaml", strings.Replace(shopRules, "namespace: shop", "namespace: nope", 1))
	for _, tc := range []struct {
		desc string
		env  []string
		args []string
		want string
	}{
		{"wrong server URL", []string{"SLUICE_SERVER=http://127.0.0.1:1"}, []string{"apply", file, "--title", "t"}, "cannot reach the admin API at http://127.0.0.1:1"},
		{"not a URL", []string{"SLUICE_SERVER=127.0.0.1:8080"}, []string{"diff", file}, "must be an http:// or https:// URL"},
		{"invalid token", []string{"SLUICE_TOKEN=sluice_nonsense"}, []string{"apply", file, "--title", "t"}, "401"},
		{"revoked token", []string{"SLUICE_TOKEN=" + p.bobToken}, []string{"changes", "list", "-n", "shop"}, "run sluicectl login"},
		{"not YAML", nil, []string{"apply", notYAML, "--title", "t"}, notYAML + ": "},
		{"50 MB file", nil, []string{"apply", big, "--title", "t"}, "52428800 bytes"},
		{"unknown namespace", nil, []string{"apply", nope, "--title", "t"}, "404"},
		{"rule id with a space", nil, []string{"apply", space, "--title", "t"}, `limits[0].id: "orders per-ip" must match`},
		{"missing title", nil, []string{"apply", file}, "--title is required"},
		{"bad output", nil, []string{"diff", file, "-o", "xml"}, "-o \"xml\""},
		{"no token", []string{"SLUICE_TOKEN="}, []string{"diff", file}, "no API token"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			env := append([]string{"SLUICE_SERVER=" + p.url, "SLUICE_TOKEN=" + p.adminToken}, tc.env...)
			r := runCtl(t, env, "", tc.args...)
			lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
			if r.code != 1 || len(lines) != 1 || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
				t.Fatalf("got exit %d, stdout %q, stderr %q; want exit 1 and one line containing %q", r.code, r.stdout, r.stderr, tc.want)
			}
		})
	}
	if after := p.call(t, p.adminToken, "GET", "/api/v1/namespaces/shop/draft", "", http.StatusOK); !bytes.Equal(before, after) {
		t.Fatalf("the draft changed:\n%s\n->\n%s", before, after)
	}
}

// TestNodeDegrade sets a degrade override on a real gateway that runs from a
// rules file, with no control plane at all.
func TestNodeDegrade(t *testing.T) {
	dir := bins(t)
	rules := writeFile(t, "rules.yaml", `namespace: shop
routes:
  - id: checkout
    match: {pathPrefix: /checkout}
    upstream:
      targets: [{url: "http://127.0.0.1:1"}]
degrades:
  - id: checkout
    routes: [checkout]
    mode: manual
`)
	admin := freeAddr(t)
	startProc(t, filepath.Join(dir, "sluice-gateway"), nil, "--rules", rules, "--listen", freeAddr(t), "--admin", admin)
	waitReady(t, "http://"+admin+"/readyz")

	r := runCtl(t, nil, "", "node", "degrade", "checkout", "1", "--ttl", "10m", "--admin", admin).ok(t)
	if !strings.Contains(r.stdout, "level 1") {
		t.Fatalf("node degrade: %q", r.stdout)
	}
	r = runCtl(t, nil, "", "node", "degrades", "--admin", admin, "-o", "json").ok(t)
	var st struct {
		Degrades []map[string]any `json:"degrades"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || len(st.Degrades) != 1 || fmt.Sprint(st.Degrades[0]["level"]) != "1" {
		t.Fatalf("node degrades: %s (%v)", r.stdout, err)
	}
	runCtl(t, nil, "", "node", "status", "--admin", admin).ok(t)
	runCtl(t, nil, "", "node", "breakers", "--admin", admin).ok(t)
	for _, tc := range []struct {
		desc string
		args []string
		want string
	}{
		{"unknown rule", []string{"node", "degrade", "nope", "1", "--ttl", "1m", "--admin", admin}, "answered 400"},
		{"bad level", []string{"node", "degrade", "checkout", "3", "--ttl", "1m", "--admin", admin}, `level "3"`},
		{"no ttl", []string{"node", "degrade", "checkout", "1", "--admin", admin}, "--ttl is required"},
		{"node down", []string{"node", "status", "--admin", "127.0.0.1:1"}, "cannot reach the node admin endpoint"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := runCtl(t, nil, "", tc.args...)
			if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("got %+v, want exit 1 and one line containing %q", r, tc.want)
			}
		})
	}
}
