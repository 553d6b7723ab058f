package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/controlplane/internal/testenv"
	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// adminBinary builds sluice-admin once per test binary.
func adminBinary(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sluice-admin-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "sluice-admin")
		_, file, _, _ := runtime.Caller(0)
		cmd := exec.Command("go", "build", "-o", binPath, ".")
		cmd.Dir = filepath.Dir(file)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return binPath
}

func freeAddr(tb testing.TB) string {
	tb.Helper()
	return etcdtest.FreeLoopbackURL(tb).Host
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// session is a logged-in console session against a real sluice-admin.
type session struct {
	t    *testing.T
	base string
	http *http.Client
	csrf string
}

func login(t *testing.T, base, user, password string) *session {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	s := &session{t: t, base: base, http: &http.Client{Jar: jar, Timeout: 10 * time.Second}}
	var out struct {
		CSRFToken string `json:"csrfToken"`
	}
	s.do(http.StatusOK, "POST", "/api/v1/auth/login", map[string]string{"username": user, "password": password}, &out)
	s.csrf = out.CSRFToken
	return s
}

func (s *session) do(want int, method, path string, body, out any) {
	s.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, s.base+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", s.csrf)
	res, err := s.http.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	rb, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		s.t.Fatalf("%s %s: %d, want %d: %s", method, path, res.StatusCode, want, rb)
	}
	if out != nil {
		if err := json.Unmarshal(rb, out); err != nil {
			s.t.Fatal(err)
		}
	}
}

func (s *session) token() string {
	s.t.Helper()
	var out struct {
		Token string `json:"token"`
	}
	s.do(http.StatusCreated, "POST", "/api/v1/tokens", map[string]string{"name": "streams", "role": "viewer"}, &out)
	return out.Token
}

// TestStreamFloodKeepsEtcdUp is issue 26's reproduction against a real
// sluice-admin with its embedded etcd, run with 256 file descriptors (soft
// and hard, so raising the soft limit gains nothing): two users open 30
// event streams each, and 400 more connections are opened and left idle.
// The streams past each user's cap are answered 429 with Retry-After; the
// admin API holds at most half the descriptors (the rest wait in the
// kernel's backlog), so the embedded etcd still accepts a new client and
// serves it, and the process stays up. (Before: descriptors ran out, etcd
// failed and sluice-admin exited.)
func TestStreamFloodKeepsEtcdUp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs sluice-admin")
	}
	bin := adminBinary(t)
	const pw = "correct horse battery"
	listen, etcdAddr := freeAddr(t), freeAddr(t)
	var log lockedBuffer
	cmd := exec.Command("sh", "-c", `ulimit -n 256 && exec "$0" "$@"`, bin, "serve",
		"--database-url", testenv.MustDatabase(t), "--embedded-etcd", filepath.Join(t.TempDir(), "etcd"),
		"--etcd-endpoints", etcdAddr, "--embedded-etcd-peer", freeAddr(t), "--listen", listen,
		"--insecure-no-audit-key", "--insecure-publish-unsigned", "--log-level", "info")
	cmd.Env = append(os.Environ(), "SLUICE_BOOTSTRAP_ADMIN_PASSWORD="+pw)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("sluice-admin output:\n%s", log.String())
		}
	})
	base := "http://" + listen
	ready := func(within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			c := &http.Client{Timeout: 2 * time.Second}
			if res, err := c.Get(base + "/readyz"); err == nil {
				res.Body.Close()
				if res.StatusCode == http.StatusOK {
					return
				}
			}
			select {
			case err := <-exited:
				t.Fatalf("sluice-admin exited: %v", err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz not 200 within %s", within)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	ready(60 * time.Second)
	if out := log.String(); !strings.Contains(out, "open-file limit (RLIMIT_NOFILE)") || !strings.Contains(out, "maxConnections=128") {
		t.Fatalf("no RLIMIT_NOFILE or connection cap in the log:\n%s", out)
	}

	admin := login(t, base, "admin", pw)
	admin.do(http.StatusCreated, "POST", "/api/v1/namespaces", map[string]string{"name": "shop"}, nil)
	admin.do(http.StatusCreated, "POST", "/api/v1/users", map[string]string{"username": "vw", "password": "tapir orbit kettle", "role": "viewer"}, nil)
	tokens := []string{admin.token(), login(t, base, "vw", "tapir orbit kettle").token()}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := &http.Transport{MaxConnsPerHost: 0, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	status := map[int]int{}
	for i := range 60 {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/v1/namespaces/shop/stream", nil)
		req.Header.Set("Authorization", "Bearer "+tokens[i%2])
		res, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		status[res.StatusCode]++
		if res.StatusCode == http.StatusTooManyRequests {
			if res.Header.Get("Retry-After") == "" || res.Header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("429 without Retry-After or problem+json: %v", res.Header)
			}
			res.Body.Close()
		} else {
			defer res.Body.Close()
		}
	}
	if status[http.StatusOK] != 16 || status[http.StatusTooManyRequests] != 44 {
		t.Fatalf("statuses %v, want 16 streams (8 per user) and 44 refused", status)
	}

	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range 400 {
		c, err := net.DialTimeout("tcp", listen, 2*time.Second)
		if err != nil {
			break // the backlog is full: that is the kernel's business
		}
		idle = append(idle, c)
	}
	t.Logf("%d idle connections opened", len(idle))

	// The embedded etcd still accepts a new client and serves it, at once:
	// not once the server's header timeout (10s) closes the idle
	// connections and gives their descriptors back.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdAddr}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	octx, ocancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer ocancel()
	if _, err := cli.Put(octx, "/flood-test", "still here"); err != nil {
		t.Fatalf("embedded etcd put during the flood: %v", err)
	}
	if res, err := cli.Get(octx, "/flood-test"); err != nil || len(res.Kvs) != 1 {
		t.Fatalf("embedded etcd get during the flood: %v %v", res, err)
	}
	select {
	case err := <-exited:
		t.Fatalf("sluice-admin exited during the flood: %v", err)
	default:
	}
	for _, c := range idle {
		c.Close()
	}
	idle = nil
	ready(30 * time.Second)
}
