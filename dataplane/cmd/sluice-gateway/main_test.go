package main

// End-to-end tests: the real binary, built once, started as a process with a
// rules file and an httptest upstream, driven over loopback.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-gateway-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "sluice-gateway")
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building sluice-gateway: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func freePort(t *testing.T) string {
	t.Helper()
	return etcdtest.FreeLoopbackURL(t).Host
}

type gw struct {
	cmd    *exec.Cmd
	addr   string
	admin  string
	tls    string // the --listen-tls address, when asked for
	rules  string
	stderr *syncBuffer
	done   chan error
}

// servingAddrs are the addresses of a gateway's "gateway serving" line.
type servingAddrs struct {
	Msg       string `json:"msg"`
	Listen    string `json:"listen"`
	Admin     string `json:"admin"`
	ListenTLS string `json:"listenTLS"`
}

// servingLine finds the "gateway serving" line in a gateway's log.
func servingLine(log string) (servingAddrs, bool) {
	for _, line := range strings.Split(log, "\n") {
		var a servingAddrs
		if json.Unmarshal([]byte(line), &a) == nil && a.Msg == "gateway serving" {
			return a, true
		}
	}
	return servingAddrs{}, false
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startGateway writes rules to a file and starts the binary on ports the
// system picks (":0": no port reserved first and released, which another
// test could take meanwhile), reads them from its "gateway serving" line
// and waits until /readyz answers.
func startGateway(t *testing.T, rules string, extra ...string) *gw {
	t.Helper()
	g := &gw{addr: "127.0.0.1:0", admin: "127.0.0.1:0", rules: filepath.Join(t.TempDir(), "rules.yaml"), stderr: &syncBuffer{}, done: make(chan error, 1)}
	if err := os.WriteFile(g.rules, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--rules", g.rules, "--listen", g.addr, "--admin", g.admin}, extra...)
	g.cmd = exec.Command(binary, args...)
	g.cmd.Stderr = g.stderr
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { g.done <- g.cmd.Wait() }()
	t.Cleanup(func() {
		_ = g.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-g.done:
		case <-time.After(10 * time.Second):
			_ = g.cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("gateway stderr:\n%s", g.stderr.String())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for g.addr == "127.0.0.1:0" {
		if a, ok := servingLine(g.stderr.String()); ok {
			g.addr, g.admin, g.tls = a.Listen, a.Admin, a.ListenTLS
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway did not log its addresses within 10s\n%s", g.stderr.String())
		}
		select {
		case err := <-g.done:
			t.Fatalf("gateway exited: %v\n%s", err, g.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + g.admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return g
			}
		}
		select {
		case err := <-g.done:
			t.Fatalf("gateway exited: %v\n%s", err, g.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("gateway not ready within 10s\n%s", g.stderr.String())
	return nil
}

func (g *gw) status(t *testing.T) map[string]any {
	t.Helper()
	resp, err := http.Get("http://" + g.admin + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func upstream(t *testing.T) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d, err := time.ParseDuration(r.URL.Query().Get("sleep")); err == nil {
			time.Sleep(d)
		}
		w.Header().Set("X-Upstream-Path", r.URL.Path)
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(s.Close)
	return s
}

const rulesTemplate = `namespace: e2e
routes:
  - id: api
    match: {pathPrefix: /api}
    upstream: {targets: [{url: "%s"}], timeout: 5s}
limits:
  - id: api-global
    routes: [api]
    key: [global]
    algorithm: token_bucket
    rate: %d
    period: 1s
    burst: %d
`

// TestAccuracy drives the gateway at 5× a limit for 3 s: the admitted count is
// within 1% of rate × duration + burst, and every 429 carries the headers and
// problem+json body the design names.
func TestAccuracy(t *testing.T) {
	up := upstream(t)
	const rate, burst = 200, 50
	g := startGateway(t, fmt.Sprintf(rulesTemplate, up.URL, rate, burst))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	const offered = 5 * rate
	const duration = 3 * time.Second
	var sample atomic.Pointer[http.Response]
	var sampleBody atomic.Pointer[string]
	ty := tally{onLimited: func(resp *http.Response, body []byte) {
		if sample.Load() == nil {
			s := string(body)
			sampleBody.Store(&s)
			sample.Store(resp)
		}
	}}
	pace(client, "http://"+g.addr+"/api/orders", offered, duration, &ty)
	admitted, rejected, other := &ty.ok, &ty.limited, &ty.failed
	elapsed := ty.span()
	want := float64(burst) + float64(rate)*elapsed.Seconds()
	got := float64(admitted.Load())
	t.Logf("offered %d over %v: admitted %d, rejected %d, other %d; want %.1f ±1%%", admitted.Load()+rejected.Load()+other.Load(), elapsed, admitted.Load(), rejected.Load(), other.Load(), want)
	if other.Load() != 0 {
		t.Errorf("%d requests failed or got an unexpected status", other.Load())
	}
	if d := (got - want) / want; d > 0.01 || d < -0.01 {
		t.Errorf("admitted %v, want %.1f ±1%% (off by %.2f%%)", got, want, d*100)
	}

	resp := sample.Load()
	if resp == nil {
		t.Fatal("no 429 seen")
	}
	h := resp.Header
	ra, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || ra < 1 {
		t.Errorf("Retry-After = %q, want whole seconds >= 1", h.Get("Retry-After"))
	}
	for _, name := range []string{"RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "X-Request-Id"} {
		if h.Get(name) == "" {
			t.Errorf("429 lacks %s; headers: %v", name, h)
		}
	}
	if !strings.Contains(h.Get("RateLimit-Policy"), "api-global") || !strings.Contains(h.Get("RateLimit"), "api-global") {
		t.Errorf("RateLimit headers do not name the rule: %q / %q", h.Get("RateLimit-Policy"), h.Get("RateLimit"))
	}
	if h.Get("X-RateLimit-Limit") != strconv.Itoa(burst) && h.Get("X-RateLimit-Limit") != strconv.Itoa(rate) {
		t.Errorf("X-RateLimit-Limit = %q", h.Get("X-RateLimit-Limit"))
	}
	if h.Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("X-RateLimit-Remaining = %q, want 0", h.Get("X-RateLimit-Remaining"))
	}
	if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Errorf("Content-Type = %q", ct)
	}
	var problem map[string]any
	if err := json.Unmarshal([]byte(*sampleBody.Load()), &problem); err != nil {
		t.Fatalf("429 body is not JSON: %v: %s", err, *sampleBody.Load())
	}
	if problem["status"] != float64(429) || !strings.Contains(fmt.Sprint(problem), "api-global") {
		t.Errorf("problem body = %v", problem)
	}
}

// TestInvalidRulesAtStart: the binary exits non-zero with the field path.
func TestInvalidRulesAtStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	bad := "namespace: x\nroutes:\n  - id: a\n    match: {pathRegex: \"(\"}\n    upstream: {targets: [{url: \"http://127.0.0.1:1\"}]}\nlimits:\n  - {id: l, algorithm: token_bucket, rate: 0}\n"
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary, "--rules", path, "--listen", freePort(t), "--admin", freePort(t)).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Fatalf("exit = %v, want non-zero; output:\n%s", err, out)
	}
	for _, want := range []string{"routes[0].match.pathRegex", "limits[0].rate: must be > 0"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// runBinary runs the gateway to completion (it is expected to exit at once)
// on free ports and returns its combined output.
func runBinary(rules string, extra ...string) (string, error) {
	args := append([]string{"--rules", rules, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"}, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, args...).CombinedOutput()
	return string(out), err
}

// TestReloadAndRefuse: a changed file is applied; an invalid one is refused,
// shown in /status and counted, and the last good rules keep serving; SIGHUP
// reloads.
func TestReloadAndRefuse(t *testing.T) {
	up := upstream(t)
	g := startGateway(t, fmt.Sprintf(rulesTemplate, up.URL, 1000, 1000))
	v1 := g.status(t)["checksum"]

	write := func(s string) {
		tmp := g.rules + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, g.rules); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(desc string, ok func(map[string]any) bool) map[string]any {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if st := g.status(t); ok(st) {
				return st
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("timed out waiting for %s; status %v", desc, g.status(t))
		return nil
	}
	write(fmt.Sprintf(rulesTemplate, up.URL, 1, 1))
	st := waitFor("the new rules", func(st map[string]any) bool { return st["checksum"] != v1 })
	v2 := st["checksum"]
	get := func() int {
		resp, err := http.Get("http://" + g.addr + "/api/x")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if a, b := get(), get(); a != 200 || b != 429 {
		t.Fatalf("with rate 1 burst 1: got %d then %d, want 200 then 429", a, b)
	}

	write("namespace: e2e\nroutes: [{id: BAD}]\n")
	st = waitFor("the refusal", func(st map[string]any) bool { return st["lastApplyError"] != nil })
	if st["checksum"] != v2 || !strings.Contains(fmt.Sprint(st["lastApplyError"]), "routes[0].id") {
		t.Fatalf("after an invalid file: %v", st)
	}
	if get() != 429 {
		t.Fatal("the last good rules should still limit")
	}
	resp, err := http.Get("http://" + g.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	found := false
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "sluice_ruleset_apply_errors_total ") && !strings.HasSuffix(sc.Text(), " 0") {
			found = true
		}
	}
	resp.Body.Close()
	if !found {
		t.Error("sluice_ruleset_apply_errors_total was not counted")
	}

	// Fix the file behind the watcher's back (a write it will see), then a
	// SIGHUP must also reload cleanly.
	write(fmt.Sprintf(rulesTemplate, up.URL, 1000, 1000))
	waitFor("the fixed rules", func(st map[string]any) bool { return st["checksum"] == v1 && st["lastApplyError"] == nil })
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if st := g.status(t); st["checksum"] != v1 || st["lastApplyError"] != nil {
		t.Fatalf("after SIGHUP: %v", st)
	}
}

// TestGracefulShutdown: SIGTERM lets an in-flight request finish, then the
// process exits 0.
func TestGracefulShutdown(t *testing.T) {
	up := upstream(t)
	g := startGateway(t, fmt.Sprintf(rulesTemplate, up.URL, 1000, 1000))
	result := make(chan int, 1)
	go func() {
		resp, err := http.Get("http://" + g.addr + "/api/slow?sleep=700ms")
		if err != nil {
			result <- -1
			return
		}
		resp.Body.Close()
		result <- resp.StatusCode
	}()
	time.Sleep(200 * time.Millisecond)
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := <-result; code != 200 {
		t.Fatalf("in-flight request got %d during shutdown, want 200", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	select {
	case err := <-g.done:
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, g.stderr.String())
		}
		g.done <- nil // for the cleanup
	case <-ctx.Done():
		t.Fatal("gateway did not exit after SIGTERM")
	}
}
