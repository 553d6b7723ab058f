package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicegw/sluice/dataplane/limit"
)

// fSetPipeSz is fcntl's F_SETPIPE_SZ (linux/fcntl.h).
const fSetPipeSz = 1031

// TestStuckStderr: a gateway whose stderr nobody reads (a log collector that
// stopped) keeps answering. Every 429 logs a decision line, from the event
// loop that answers it; with the pipe full, a loop writing to it directly
// would stop, and every connection on it. Lines wait on a queue instead
// (dropped, counted and reported when it is full), and come out once the
// pipe is read again.
func TestStuckStderr(t *testing.T) {
	up := upstream(t)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	// The smallest pipe (a page): a few decision lines fill it.
	if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, pw.Fd(), fSetPipeSz, 4096); errno != 0 {
		t.Fatalf("F_SETPIPE_SZ: %v", errno)
	}
	rules := t.TempDir() + "/rules.yaml"
	if err := os.WriteFile(rules, fmt.Appendf(nil, rulesTemplate, up.URL, 1, 1), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "--rules", rules, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0")
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close() // the child holds its own copy
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-done
	}()

	// Read up to the "gateway serving" line, then stop reading.
	br := bufio.NewReader(pr)
	var addrs servingAddrs
	var head strings.Builder
	for {
		line, err := br.ReadString('\n')
		head.WriteString(line)
		if err != nil {
			t.Fatalf("gateway log ended before it served: %v\n%s", err, head.String())
		}
		if a, ok := servingLine(line); ok {
			addrs = a
			break
		}
	}

	client := &http.Client{Timeout: 10 * time.Second}
	const n = 2000
	codes := map[int]int{}
	for i := range n {
		resp, err := client.Get("http://" + addrs.Listen + "/api/x")
		if err != nil {
			t.Fatalf("request %d of %d with stderr stuck: %v (%v)", i+1, n, err, codes)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes[resp.StatusCode]++
	}
	if codes[429] < n-10 || codes[200]+codes[429] != n {
		t.Fatalf("answers %v, want %d 429s (rate 1/s, burst 1) and a 200 or two", codes, n-2)
	}

	// Read the pipe again: the queued decision lines come out (the log's
	// own bucket passes limit.DefaultLogBurst at once, and the queue holds
	// far more than that, so none was dropped here; internal/logq's tests
	// drop and report).
	lines := make(chan int, 1)
	go func() {
		decisions := 0
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if strings.Contains(line, "RATE_LIMIT_DECISION") {
				decisions++
				if decisions == limit.DefaultLogBurst {
					lines <- decisions
				}
			}
		}
	}()
	select {
	case <-lines:
	case <-time.After(20 * time.Second):
		t.Fatalf("fewer than %d decision lines within 20s of reading the pipe again", limit.DefaultLogBurst)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("gateway exit after SIGTERM: %v", err)
		}
		done <- nil // for the deferred wait
	case <-time.After(20 * time.Second):
		t.Error("gateway did not exit within 20s of SIGTERM")
	}
}
