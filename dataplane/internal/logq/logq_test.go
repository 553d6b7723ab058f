package logq

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gate is a destination that blocks every write until released, and says
// when its first write has begun.
type gate struct {
	entered chan struct{}
	once    sync.Once
	release chan struct{}
	mu      sync.Mutex
	lines   []string
}

func (g *gate) Write(p []byte) (int, error) {
	g.once.Do(func() { close(g.entered) })
	<-g.release
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lines = append(g.lines, strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// TestStuckDestination: with the destination stuck, writes still return;
// lines beyond the queue are dropped and counted; once the destination
// takes lines again, the queued ones come out in order, then one line
// reports how many were dropped.
func TestStuckDestination(t *testing.T) {
	g := &gate{entered: make(chan struct{}), release: make(chan struct{})}
	var drops atomic.Int64
	w := New(g, 8, func() { drops.Add(1) })

	fmt.Fprintf(w, "line 0\n")
	<-g.entered // the goroutine is stuck writing line 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i < 100; i++ {
			fmt.Fprintf(w, "line %d\n", i)
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Write waited for a stuck destination")
	}
	if got := drops.Load(); got != 91 {
		t.Fatalf("dropped %d lines, want 91 (1 being written, 8 queued)", got)
	}
	if got := w.Dropped(); got != 91 {
		t.Fatalf("Dropped() = %d, want 91", got)
	}

	close(g.release)
	w.Close(0)
	lines := g.lines
	if len(lines) != 10 {
		t.Fatalf("got %d lines, want 9 and the note:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for i := range 9 {
		if want := fmt.Sprintf("line %d", i); lines[i] != want {
			t.Errorf("line %d = %q, want %q", i, lines[i], want)
		}
	}
	var note struct {
		Level   string `json:"level"`
		Msg     string `json:"msg"`
		Dropped uint64 `json:"dropped"`
	}
	if err := json.Unmarshal([]byte(lines[9]), &note); err != nil {
		t.Fatalf("note %q: %v", lines[9], err)
	}
	if note.Dropped != 91 || note.Level != "WARN" || !strings.Contains(note.Msg, "dropped") {
		t.Errorf("note = %+v, want 91 dropped at WARN", note)
	}
	if w.Dropped() != 0 {
		t.Errorf("Dropped() = %d after the note, want 0", w.Dropped())
	}
}

// TestOrderAndClose: concurrent writers lose nothing while the destination
// keeps up, each writer's lines stay in its order, and Close returns after
// the last queued line is out; writes after Close go straight through.
func TestOrderAndClose(t *testing.T) {
	var mu sync.Mutex
	var sb strings.Builder
	out := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return sb.Write(p)
	})
	w := New(out, 0, func() { t.Error("a line was dropped") })
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				fmt.Fprintf(w, "%d %d\n", g, i)
				if i%64 == 0 {
					time.Sleep(time.Millisecond) // let the queue drain: DefaultLines is no bound on 2000 lines
				}
			}
		})
	}
	wg.Wait()
	w.Close(0)
	fmt.Fprintf(w, "after close\n")
	w.Close(time.Second) // idempotent

	mu.Lock()
	lines := strings.Split(strings.TrimSuffix(sb.String(), "\n"), "\n")
	mu.Unlock()
	if len(lines) != 2001 || lines[2000] != "after close" {
		t.Fatalf("got %d lines (last %q), want 2000 and the one after Close", len(lines), lines[len(lines)-1])
	}
	next := map[int]int{}
	for _, l := range lines[:2000] {
		var g, i int
		if _, err := fmt.Sscanf(l, "%d %d", &g, &i); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if i != next[g] {
			t.Fatalf("writer %d: line %d after %d", g, i, next[g]-1)
		}
		next[g]++
	}
}

// TestCloseTimeout: Close on a stuck destination returns after its timeout.
func TestCloseTimeout(t *testing.T) {
	_, pw := io.Pipe()
	defer pw.Close()
	w := New(pw, 4, nil)
	fmt.Fprintln(w, "stuck")
	done := make(chan struct{})
	go func() { w.Close(50 * time.Millisecond); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close(50ms) did not return with the destination stuck")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func BenchmarkWrite(b *testing.B) {
	w := New(io.Discard, 0, nil)
	defer w.Close(0)
	line := []byte(`{"time":"2026-12-04T03:00:00Z","level":"WARN","msg":"RATE_LIMIT_DECISION","traceId":"4bf92f3577b34da6a3ce929d0e0e4736"}` + "\n")
	b.ReportAllocs()
	for b.Loop() {
		_, _ = w.Write(line)
	}
}
