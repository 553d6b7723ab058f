//go:build linux

package evloop

import (
	"bytes"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// loopState is the scheduler's state of the goroutine running l.Run ("IO
// wait": parked on the runtime's poller; "syscall": in epoll_wait), from a
// dump of all goroutines.
func loopState(t *testing.T) string {
	t.Helper()
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, "evloop.(*Loop).Run(") {
			continue
		}
		head, _, _ := strings.Cut(g, "\n")
		_, st, ok := strings.Cut(head, "[")
		if !ok {
			t.Fatalf("goroutine header %q", head)
		}
		st, _, _ = strings.Cut(st, "]")
		st, _, _ = strings.Cut(st, ",")
		return st
	}
	return "" // not running yet
}

// waitState waits until the loop's goroutine is in state want.
func waitState(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := loopState(t)
		if st == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the loop's goroutine is in %q, want %q", st, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestAwayWaitsOnPoller: while a goroutine is away (Away), the loop waits
// parked on the runtime's poller rather than in epoll_wait, and still
// serves its connections, fires its deadlines and runs what is posted;
// after Back it waits in epoll_wait again, and pollQuiet later its epoll
// instance is off the runtime's poller (before the first Away it was not
// on it: each event would wake an idle thread of the runtime for nothing).
func TestAwayWaitsOnPoller(t *testing.T) {
	l, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Run() }()
	defer func() {
		l.Stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	waitState(t, "syscall")
	onPoller := func() bool {
		var on bool
		if err := l.Call(func() { on = l.epf != nil }); err != nil {
			t.Fatal(err)
		}
		return on
	}
	if onPoller() {
		t.Fatal("the loop's epoll instance is on the runtime's poller with no goroutine away")
	}

	l.Away()
	l.Post(func() {}) // the loop's next wait sees the goroutine away
	waitState(t, "IO wait")

	// A connection is served.
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	peer, err := net.FileConn(os.NewFile(uintptr(fds[1]), "peer"))
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	expired := make(chan struct{})
	if err := l.Call(func() {
		c, err := l.Add(fds[0], &echo{buf: make([]byte, 64), expired: expired})
		if err != nil {
			t.Error(err)
			return
		}
		c.SetDeadline(l.Now() + int64(300*time.Millisecond))
	}); err != nil {
		t.Fatal(err)
	}
	msg := []byte("while away")
	if _, err := peer.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(peer, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("echo: got %q", got)
	}
	waitState(t, "IO wait")

	// Its deadline fires: the poller's wait ends with it.
	select {
	case <-expired:
	case <-time.After(5 * time.Second):
		t.Fatal("the deadline did not fire while the loop waited on the poller")
	}

	// A goroutine away reports back.
	ran := make(chan struct{})
	go func() {
		time.Sleep(20 * time.Millisecond)
		l.Post(func() { close(ran) })
		l.Back()
	}()
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("a task posted while the loop waited on the poller did not run")
	}
	l.Post(func() {})
	waitState(t, "syscall")
	if !onPoller() {
		t.Fatal("the loop's epoll instance left the runtime's poller at once after Back")
	}
	deadline := time.Now().Add(time.Duration(pollQuiet) + 5*time.Second)
	for onPoller() {
		if time.Now().After(deadline) {
			t.Fatalf("the loop's epoll instance is still on the runtime's poller %v after Back", time.Duration(pollQuiet)+5*time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
