package main

import (
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// procsRules is a rule set with one route, enough for the gateway to serve.
const procsRules = `namespace: procs
routes:
  - id: all
    match: {pathPrefix: /}
    upstream: {targets: [{url: "http://127.0.0.1:9"}]}
`

// servingProcs is what the "gateway serving" line says about processors.
type servingProcs struct {
	Msg        string `json:"msg"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	EventLoops int    `json:"eventLoops"`
}

func servingProcsLine(log string) (servingProcs, bool) {
	for line := range strings.SplitSeq(log, "\n") {
		var p servingProcs
		if json.Unmarshal([]byte(line), &p) == nil && p.Msg == "gateway serving" {
			return p, true
		}
	}
	return servingProcs{}, false
}

// TestEventLoopsFollowGOMAXPROCS: the event-loop engine runs one loop per
// processor by default (workers = cores, as nginx's worker_processes auto),
// and --event-loops lowers it.
func TestEventLoopsFollowGOMAXPROCS(t *testing.T) {
	// The child inherits the variable; t.Setenv rules out t.Parallel.
	t.Setenv("GOMAXPROCS", "3")
	for _, tc := range []struct {
		desc  string
		args  []string
		loops int
	}{
		{desc: "default: one loop per processor", loops: 3},
		{desc: "--event-loops lowers it", args: []string{"--event-loops", "1"}, loops: 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			g := startGateway(t, procsRules, tc.args...)
			p, ok := servingProcsLine(g.stderr.String())
			if !ok {
				t.Fatalf("no serving line:\n%s", g.stderr.String())
			}
			if p.GOMAXPROCS != 3 || p.EventLoops != tc.loops {
				t.Fatalf("gomaxprocs %d, event loops %d; want 3 and %d", p.GOMAXPROCS, p.EventLoops, tc.loops)
			}
		})
	}
}

// TestGatewayBuildKeepsContainerGOMAXPROCS: the gateway binary is built with
// Go's cgroup-aware GOMAXPROCS (Go 1.25+, by the module's go directive) and
// its periodic update on; a go directive below 1.25 or a godebug line
// turning either off puts containermaxprocs=0 or updatemaxprocs=0 in the
// binary's DefaultGODEBUG.
func TestGatewayBuildKeepsContainerGOMAXPROCS(t *testing.T) {
	t.Parallel()
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range info.Settings {
		if s.Key != "DefaultGODEBUG" {
			continue
		}
		for kv := range strings.SplitSeq(s.Value, ",") {
			if kv == "containermaxprocs=0" || kv == "updatemaxprocs=0" {
				t.Fatalf("the gateway is built with %s (DefaultGODEBUG %q): GOMAXPROCS would not follow the cgroup CPU quota", kv, s.Value)
			}
		}
	}
}

// TestGOMAXPROCSFollowsCPUQuota runs the gateway in a new cgroup with a CPU
// quota of 2 CPUs and checks that it runs GOMAXPROCS 2 and two event loops.
// It needs 3 or more CPUs (Go rounds a quota below 2 up to 2, so on a
// 2-CPU machine no quota can lower GOMAXPROCS) and a cgroup it may create.
func TestGOMAXPROCSFollowsCPUQuota(t *testing.T) {
	if runtime.NumCPU() < 3 {
		t.Skipf("%d CPUs: Go raises a CPU quota under 2 to 2, so a quota cannot lower GOMAXPROCS here; needs 3 or more", runtime.NumCPU())
	}
	dir := quotaCgroup(t, 2)
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte(procsRules), 0o644); err != nil {
		t.Fatal(err)
	}
	// The shell moves itself into the cgroup, then becomes the gateway.
	cmd := exec.Command("/bin/sh", "-c", `echo $$ >"$0/cgroup.procs" && exec "$@"`, dir,
		binary, "--rules", rules, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOMAXPROCS=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.After(10 * time.Second)
	for {
		if p, ok := servingProcsLine(stderr.String()); ok {
			if p.GOMAXPROCS != 2 || p.EventLoops != 2 {
				t.Fatalf("under a 2-CPU quota on %d CPUs: gomaxprocs %d, event loops %d; want 2 and 2", runtime.NumCPU(), p.GOMAXPROCS, p.EventLoops)
			}
			return
		}
		select {
		case err := <-done:
			t.Fatalf("gateway exited: %v\n%s", err, stderr.String())
		case <-deadline:
			t.Fatalf("no serving line within 10s\n%s", stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// quotaCgroup makes a cgroup limited to cpus CPUs (cgroup v2 cpu.max, or
// v1 cpu.cfs_quota_us), removed when the test ends, and returns its
// directory; it skips the test where none can be made.
func quotaCgroup(t *testing.T, cpus int) string {
	t.Helper()
	name := fmt.Sprintf("sluice-test-%d", os.Getpid())
	var dir string
	var files [][2]string
	if c, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil && strings.Contains(" "+string(c)+" ", " cpu ") {
		dir = filepath.Join("/sys/fs/cgroup", name)
		files = [][2]string{{"cpu.max", fmt.Sprintf("%d 100000", cpus*100000)}}
	} else if _, err := os.Stat("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"); err == nil {
		dir = filepath.Join("/sys/fs/cgroup/cpu", name)
		files = [][2]string{{"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", fmt.Sprint(cpus * 100000)}}
	} else {
		t.Skip("no cgroup CPU controller found (v2 /sys/fs/cgroup with cpu, or v1 /sys/fs/cgroup/cpu)")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EROFS) {
			t.Skipf("cannot create a cgroup here: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The gateway has exited by now (cleanups run last-in first-out).
		if err := os.Remove(dir); err != nil {
			t.Logf("removing %s: %v", dir, err)
		}
	})
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f[0]), []byte(f[1]), 0o644); err != nil {
			t.Skipf("cannot set %s in %s: %v", f[0], dir, err)
		}
	}
	return dir
}
