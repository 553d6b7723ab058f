package main

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestFollowerErrorStopsNode: a follower that fails while the node serves
// (here the registrar, refusing a node id with a space) stops the node at
// once with its error and exit status 1, instead of the node serving on
// and the error showing only when it is next told to stop.
func TestFollowerErrorStopsNode(t *testing.T) {
	ep := startEtcd(t, nil)
	stderr := &syncBuffer{}
	cmd := exec.Command(binary, "--etcd", ep, "--namespace", "demo", "--insecure-accept-unsigned",
		"--node-id", "gw 1", "--listen", freePort(t), "--admin", freePort(t))
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("exit: %v, want status 1\n%s", err, stderr)
		}
		if !strings.Contains(stderr.String(), `node id \"gw 1\"`) && !strings.Contains(stderr.String(), `node id "gw 1"`) {
			t.Fatalf("stderr does not name the node id:\n%s", stderr)
		}
	case <-time.After(30 * time.Second):
		// Not a speed bound: without the fix the node never exits.
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the node kept running with a failed follower\n%s", stderr)
	}
}
