package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// emfileHelperEnv runs TestEMFILEHelper as a gateway process for
// TestAcceptBackoff: its value is the HTTP/1 engine.
const emfileHelperEnv = "SLUICE_TEST_EMFILE_GATEWAY"

// emfileLimit is the helper's RLIMIT_NOFILE: room for the process and a
// few dozen connections.
const emfileLimit = 64

// TestEMFILEHelper is not a test: run by TestAcceptBackoff with
// emfileHelperEnv set, it is a gateway whose RLIMIT_NOFILE is emfileLimit,
// serving until its standard input closes; it prints its traffic address.
func TestEMFILEHelper(t *testing.T) {
	if os.Getenv(emfileHelperEnv) == "" {
		t.Skip("a helper process of TestAcceptBackoff")
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: emfileLimit, Max: emfileLimit}); err != nil {
		t.Fatal(err)
	}
	_, base, _ := MustStartConfig(t, "namespace: emfile\nroutes: []\n", Config{})
	fmt.Printf("ADDR %s\n", strings.TrimPrefix(base, "http://"))
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// TestAcceptBackoff is issue 26's reproduction of an accept loop that
// spins once file descriptors run out (the event loop took 104 % of a
// core): a gateway process (TestEMFILEHelper) with RLIMIT_NOFILE 64 gets
// 300 connections, far more than it can accept; over the next second it
// uses under 20 % of a core (it backs off, as every engine's accept loop
// must), and once the connections close it accepts and answers again.
func TestAcceptBackoff(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs gateway processes")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestEMFILEHelper$", "-test.v")
	cmd.Env = append(os.Environ(), emfileHelperEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	addr := ""
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "ADDR "); ok {
			addr = a
			break
		}
	}
	if addr == "" {
		t.Fatal("the helper gateway did not start")
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	if status := getStatus(t, addr); status != http.StatusNotFound {
		t.Fatalf("before: status %d, want 404", status)
	}
	var conns []net.Conn
	for range 300 {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	time.Sleep(200 * time.Millisecond) // the helper accepts what it can
	before := cpuTicks(t, cmd.Process.Pid)
	start := time.Now()
	time.Sleep(time.Second)
	used := float64(cpuTicks(t, cmd.Process.Pid)-before) / 100 / time.Since(start).Seconds()
	t.Logf("%.0f %% of a core with its descriptors used up", used*100)
	if used > 0.2 {
		t.Errorf("the gateway used %.0f %% of a core while out of descriptors, want under 20 %%", used*100)
	}
	for _, c := range conns {
		c.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		status := getStatusErr(addr)
		if status == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the connections closed: no answer (%d)", status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cpuTicks is the user and system CPU time of process pid, in clock ticks
// (1/100 s: CLK_TCK on Linux).
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // after "pid (comm) "
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return utime + stime
}

func getStatus(t *testing.T, addr string) int {
	t.Helper()
	status := getStatusErr(addr)
	if status < 0 {
		t.Fatalf("GET on %s failed", addr)
	}
	return status
}

// getStatusErr sends a GET on a new connection and returns the answer's
// status, or -1.
func getStatusErr(addr string) int {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return -1
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: g.test\r\nConnection: close\r\n\r\n"); err != nil {
		return -1
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return -1
	}
	resp.Body.Close()
	return resp.StatusCode
}
