package group

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestMemberEnds: how each way a member ends affects the group.
func TestMemberEnds(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		desc      string
		fn        func(ctx context.Context) error
		wantErr   string // "" means the other member keeps running
		wantPanic bool
	}{
		{desc: "returns nil", fn: func(context.Context) error { return nil }},
		{desc: "returns an error", fn: func(context.Context) error { return boom }, wantErr: "failing: boom"},
		{desc: "panics", fn: func(context.Context) error { panic("kaput") }, wantErr: "failing panicked: kaput", wantPanic: true},
		{desc: "panics with an error", fn: func(context.Context) error { panic(boom) }, wantErr: "failing panicked: boom", wantPanic: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var logs bytes.Buffer
			var panics []string
			g := New(Settings{Logger: slog.New(slog.NewTextHandler(&logs, nil)), OnPanic: func(name string) { panics = append(panics, name) }})
			finished := make(chan struct{})
			g.Go(t.Context(), "failing", func(ctx context.Context) error { defer close(finished); return tc.fn(ctx) })
			other := make(chan error, 1)
			g.Go(t.Context(), "other", func(ctx context.Context) error { <-ctx.Done(); other <- ctx.Err(); return nil })
			<-finished
			if tc.wantErr == "" {
				select {
				case <-g.Done():
					t.Fatal("a member that returned nil stopped the group")
				case <-time.After(20 * time.Millisecond):
				}
				if err := g.Stop(); err != nil {
					t.Fatalf("Stop: %v", err)
				}
				return
			}
			err := g.Wait() // returns: the failure cancelled "other"
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("Wait: %v, want %q", err, tc.wantErr)
			}
			if <-other == nil {
				t.Fatal("the other member's context did not end")
			}
			var pe *PanicError
			if errors.As(err, &pe) != tc.wantPanic {
				t.Fatalf("error %T, panic %v", err, tc.wantPanic)
			}
			if tc.wantPanic {
				if len(panics) != 1 || panics[0] != "failing" {
					t.Fatalf("OnPanic calls %v", panics)
				}
				if !strings.Contains(string(pe.Stack), "group_test.go") || !strings.Contains(logs.String(), "component=failing") {
					t.Fatalf("stack or log missing:\n%s\n%s", pe.Stack, logs.String())
				}
			} else if !errors.Is(err, boom) {
				t.Fatalf("%v does not wrap the member's error", err)
			}
		})
	}
}

// TestStopWaits: Stop cancels every member and returns once all of them
// have; the goroutine count is back where it was.
func TestStopWaits(t *testing.T) {
	base := runtime.NumGoroutine()
	g := New(Settings{})
	var stopped atomic.Int32
	for range 20 {
		g.Go(context.Background(), "sleeper", func(ctx context.Context) error {
			<-ctx.Done()
			time.Sleep(time.Millisecond) // still running when ctx ends
			stopped.Add(1)
			return ctx.Err() // the context's own error is a normal end
		})
	}
	if err := g.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if n := stopped.Load(); n != 20 {
		t.Fatalf("Stop returned with %d of 20 members done", n)
	}
	if err := g.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	waitGoroutines(t, base)
}

// TestParentContext: a member's context ends with the one it was started
// with, and that ends nothing else.
func TestParentContext(t *testing.T) {
	g := New(Settings{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	g.Go(ctx, "child", func(ctx context.Context) error { <-ctx.Done(); close(done); return ctx.Err() })
	cancel()
	<-done
	select {
	case <-g.Done():
		t.Fatal("a member's own context stopped the group")
	default:
	}
	if err := g.Stop(); err != nil {
		t.Fatal(err)
	}
}

// waitGoroutines waits (bounded) for the goroutine count to fall to base:
// goroutines that returned may take a moment to be reaped.
func waitGoroutines(tb testing.TB, base int) {
	tb.Helper()
	for range 200 {
		if runtime.NumGoroutine() <= base {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	buf := make([]byte, 1<<16)
	tb.Fatalf("%d goroutines, want %d:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
}
