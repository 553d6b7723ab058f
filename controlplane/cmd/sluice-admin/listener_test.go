package main

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// acceptFunc is a net.Listener whose Accept is a function (a fake for the
// errors a real one meets when descriptors run out).
type acceptFunc struct {
	net.Listener
	accept func() (net.Conn, error)
}

func (a acceptFunc) Accept() (net.Conn, error) { return a.accept() }
func (a acceptFunc) Close() error              { return nil }

// TestLimitListenerBacksOff: an accept failing with EMFILE or ENFILE is
// retried after a doubling wait (5ms up to 1s), never returned to the
// server and never spun on; another error is returned.
func TestLimitListenerBacksOff(t *testing.T) {
	fails := []error{syscall.EMFILE, syscall.EMFILE, syscall.ENFILE, syscall.EMFILE, syscall.EMFILE, syscall.EMFILE, syscall.EMFILE, syscall.EMFILE, syscall.EMFILE}
	calls := 0
	server, client := net.Pipe()
	defer client.Close()
	l := newLimitListener(acceptFunc{accept: func() (net.Conn, error) {
		calls++
		if calls <= len(fails) {
			return nil, fails[calls-1]
		}
		if calls == len(fails)+1 {
			return server, nil
		}
		return nil, errors.New("closed for good")
	}}, 4, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var waits []time.Duration
	l.sleep = func(d time.Duration) { waits = append(waits, d) }
	c, err := l.Accept()
	if err != nil || calls != len(fails)+1 {
		t.Fatalf("Accept: %v after %d calls", err, calls)
	}
	want := []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 1000}
	if len(waits) != len(want) {
		t.Fatalf("waits %v, want %v ms", waits, want)
	}
	for i, w := range want {
		if waits[i] != w*time.Millisecond {
			t.Fatalf("waits %v, want %v ms", waits, want)
		}
	}
	if _, err := l.Accept(); err == nil || err.Error() != "closed for good" {
		t.Fatalf("another error: %v", err)
	}
	if l.open() != 1 {
		t.Fatalf("%d connections held, want 1", l.open())
	}
	c.Close()
	if l.open() != 0 {
		t.Fatalf("%d connections held after Close, want 0", l.open())
	}
}

// TestLimitListenerCaps: past max open connections Accept waits until one
// closes; Close ends a waiting Accept.
func TestLimitListenerCaps(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newLimitListener(inner, 2, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer l.Close()
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	a, b := <-accepted, <-accepted
	select {
	case <-accepted:
		t.Fatal("a third connection accepted past the cap of 2")
	case <-time.After(100 * time.Millisecond):
	}
	a.Close()
	c := <-accepted
	if c == nil {
		t.Fatal("no third connection once one closed")
	}
	c.Close()
	b.Close()
	l.Close()
	for range accepted {
	}
}

// TestMaxConnsFor: half the open-file limit, between 16 and 4096.
func TestMaxConnsFor(t *testing.T) {
	for _, tc := range []struct {
		nofile uint64
		want   int
	}{{0, 1024}, {20, 16}, {256, 128}, {1024, 512}, {1 << 20, 4096}} {
		if got := maxConnsFor(tc.nofile); got != tc.want {
			t.Errorf("maxConnsFor(%d) = %d, want %d", tc.nofile, got, tc.want)
		}
	}
}

// TestStreamFlags: the stream and connection bounds are flags (and
// variables), and a bound that is not positive is refused naming it.
func TestStreamFlags(t *testing.T) {
	t.Setenv("SLUICE_STREAM_PER_USER", "3")
	cfg, err := parseFlags("serve", []string{"--stream-total", "40", "--stream-idle", "1m", "--stream-lifetime", "2h", "--stream-replay-max", "99", "--max-connections", "300"})
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Streams; s.PerUser != 3 || s.Total != 40 || s.Idle != time.Minute || s.Lifetime != 2*time.Hour || s.ReplayMax != 99 || cfg.MaxConnections != 300 {
		t.Fatalf("config %+v", cfg)
	}
	for _, bad := range []string{"--stream-per-user", "--stream-total", "--stream-replay-max"} {
		if _, err := parseFlags("serve", []string{bad, "0"}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%s 0: %v", bad, err)
		}
	}
}
