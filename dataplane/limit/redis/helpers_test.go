package redislimit

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/limit"
	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
)

const sharedRedis = "127.0.0.1:6379"

var prefixSeq atomic.Int64

// mustSharedRedis returns the URL of the machine's Redis, failing the test
// with what to do when it does not answer.
func mustSharedRedis(tb testing.TB) string {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: sharedRedis, DisableIdentity: true})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		tb.Fatalf("these tests need Redis at %s (start it with `make test`, which runs ensure_redis from scripts/lib.sh, or `redis-server --daemonize yes`): %v", sharedRedis, err)
	}
	return "redis://" + sharedRedis
}

// freshPrefix returns a key prefix no other test uses.
func freshPrefix(tb testing.TB) string {
	return fmt.Sprintf("sluicetest:%s:%d:%d:", strings.ReplaceAll(tb.Name(), "/", "."), time.Now().UnixNano(), prefixSeq.Add(1))
}

// mustStore builds a Store and closes it with the test.
func mustStore(tb testing.TB, s Settings) *Store {
	tb.Helper()
	st, err := New(context.Background(), s)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	return st
}

// mustLimiter compiles l through the Cluster factory.
func mustLimiter(tb testing.TB, st *Store, l api.Limit) limit.Limiter {
	tb.Helper()
	if l.ID == "" {
		l.ID = "lim"
	}
	l.Scope = api.ScopeCluster
	lim, err := st.Cluster("ns")(l)
	if err != nil {
		tb.Fatalf("Cluster factory: %v", err)
	}
	return lim
}

// freePort returns a loopback port nothing listens on right now.
func freePort(tb testing.TB) int {
	tb.Helper()
	u := etcdtest.FreeLoopbackURL(tb)
	port, _ := strconv.Atoi(u.Port())
	return port
}

// redisServer is a redis-server this test started and owns.
type redisServer struct {
	tb   testing.TB
	port int
	dir  string
	args []string
	cmd  *exec.Cmd
	done chan struct{}
}

// startRedis starts a private redis-server on port (0: a free one), stopped
// when the test ends.
func startRedis(tb testing.TB, port int, extra ...string) *redisServer {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		tb.Fatalf("this test starts its own redis-server, which is not installed (apt-get install redis-server): %v", err)
	}
	if port == 0 {
		port = freePort(tb)
	}
	dir := tb.TempDir()
	r := &redisServer{tb: tb, port: port, dir: dir}
	r.args = append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--daemonize", "no", "--dir", dir, "--protected-mode", "no"}, extra...)
	r.start()
	tb.Cleanup(r.kill)
	return r
}

func (r *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }
func (r *redisServer) url() string  { return "redis://" + r.addr() }

func (r *redisServer) start() {
	r.tb.Helper()
	r.cmd = exec.Command("redis-server", r.args...)
	r.cmd.Stdout, r.cmd.Stderr = nil, nil
	if err := r.cmd.Start(); err != nil {
		r.tb.Fatalf("starting redis-server: %v", err)
	}
	r.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(r.cmd, r.done)
	c := redis.NewClient(&redis.Options{Addr: r.addr(), DisableIdentity: true, MaxRetries: -1})
	defer c.Close()
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if i > 100 {
			r.tb.Fatalf("redis-server on %s did not answer: %v", r.addr(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill stops the server at once (SIGKILL) and waits for it.
func (r *redisServer) kill() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.done
	r.cmd = nil
}

// client returns a plain client of the server.
func (r *redisServer) client(tb testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: r.addr(), DisableIdentity: true})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// startCluster starts three cluster-enabled redis-servers and joins them.
func startCluster(tb testing.TB) []string {
	tb.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		tb.Fatalf("this test needs redis-cli to create a cluster: %v", err)
	}
	var addrs []string
	for range 3 {
		port := freePort(tb)
		dir := tb.TempDir()
		// The bus port is picked too: by default it is port+10000, which
		// may be taken or past 65535.
		startRedis(tb, port, "--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(freePort(tb)),
			"--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", port)))
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", port))
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.Command("redis-cli", args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, a := range addrs { // every node must see the cluster ok
		c := redis.NewClient(&redis.Options{Addr: a, DisableIdentity: true})
		for i := 0; ; i++ {
			info, err := c.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if i > 200 {
				_ = c.Close()
				tb.Fatalf("cluster node %s did not reach state ok: %v\n%s", a, err, info)
			}
			time.Sleep(25 * time.Millisecond)
		}
		_ = c.Close()
	}
	return addrs
}

func init() {
	// The go-redis client logs every failed dial; the outage tests cause many.
	RouteClientLogs(slog.New(slog.NewTextHandler(io.Discard, nil)))
}
