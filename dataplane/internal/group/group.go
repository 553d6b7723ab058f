// Package group owns a process's long-lived goroutines, in the shape of
// Traefik's safe.Pool: each member is started by Go with a context and a
// name; a panic in one is recovered, logged with its stack and reported as
// that member's error; the first error (or panic) cancels every other
// member; Stop cancels them all and waits, and Wait returns the first error.
//
// The policy for a failed member is the process's, not the member's: a
// member that returns an error or panics stops the whole group, so that its
// owner (a gateway node, which drains and exits 1) fails loudly instead of
// running on without a part. A supervisor (systemd, Kubernetes) restarts
// the process; restarting a component in place after a panic would run it
// on state the panic may have left half-updated.
//
// The package needs only the standard library.
package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
)

// Settings configure a Group. The zero value logs to slog.Default() and
// counts nothing.
type Settings struct {
	// Logger receives a line for every member that fails or panics; nil
	// means slog.Default().
	Logger *slog.Logger
	// OnPanic, when set, is called with the member's name after a panic is
	// recovered and logged (a metric counts them).
	OnPanic func(name string)
}

// Group is a set of goroutines with one owner. Create it with New; it is
// safe for concurrent use. Its zero value is not usable.
type Group struct {
	ctx     context.Context // cancelled by Stop or the first failure
	cancel  context.CancelFunc
	log     *slog.Logger
	onPanic func(string)
	wg      sync.WaitGroup

	mu  sync.Mutex
	err error
}

// New returns an empty group.
func New(s Settings) *Group {
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Group{ctx: ctx, cancel: cancel, log: s.Logger, onPanic: s.OnPanic}
}

// PanicError is the error of a member that panicked.
type PanicError struct {
	Name  string // the member's name
	Value any    // what it panicked with
	Stack []byte // its goroutine's stack at the panic
}

func (e *PanicError) Error() string { return fmt.Sprintf("%s panicked: %v", e.Name, e.Value) }

// Go runs fn in a new goroutine named name. fn's context ends when ctx
// ends, when Stop is called, or when another member fails; fn should return
// soon after. A nil return, or ctx's error after its context ended, is a
// normal end and stops nothing else; any other error, or a panic, is the
// group's error (the first one is kept, prefixed with name) and cancels
// every member. Go after Stop runs fn with an ended context.
func (g *Group) Go(ctx context.Context, name string, fn func(ctx context.Context) error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		mctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(g.ctx, cancel)
		defer stop()
		if err := g.run(mctx, name, fn); err != nil {
			g.fail(err)
		}
	}()
}

// run calls fn, turning a panic into a *PanicError.
func (g *Group) run(ctx context.Context, name string, fn func(context.Context) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			pe := &PanicError{Name: name, Value: v, Stack: debug.Stack()}
			g.log.Error("component panicked; stopping", "component", name, "panic", fmt.Sprint(v), "stack", string(pe.Stack))
			if g.onPanic != nil {
				g.onPanic(name)
			}
			err = pe
		}
	}()
	err = fn(ctx)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return nil // stopped, as asked
	}
	g.log.Error("component failed; stopping", "component", name, "err", err)
	return fmt.Errorf("%s: %w", name, err)
}

func (g *Group) fail(err error) {
	g.mu.Lock()
	if g.err == nil {
		g.err = err
	}
	g.mu.Unlock()
	g.cancel()
}

// Done is closed when the group stops: Stop was called or a member failed.
func (g *Group) Done() <-chan struct{} { return g.ctx.Done() }

// Err returns the first member's error (a *PanicError for a panic, wrapped
// with the member's name otherwise), nil while none has failed.
func (g *Group) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// Wait waits for every member to return and returns Err.
func (g *Group) Wait() error {
	g.wg.Wait()
	return g.Err()
}

// Stop cancels every member and waits for them to return; it returns Err.
// Safe to call more than once.
func (g *Group) Stop() error {
	g.cancel()
	return g.Wait()
}
