// Package logq puts a process's log lines on a bounded queue that one
// goroutine writes out, so that a slow or stuck log destination (a full pipe
// to a collector that stalled, a terminal paused with ^S) never blocks the
// goroutine that logged. That matters most on an event loop, which answers
// thousands of connections from one goroutine: one blocked write to stderr
// there would stop all of them.
//
// A Writer never waits for its destination. When the queue is full the line
// is dropped and counted (the onDrop callback, for sluice_log_dropped_total);
// once the destination has caught up with the queue, the Writer writes one
// line saying how many were lost. Lines keep their order. Close writes what is queued and
// stops the goroutine; writes after Close go straight to the destination.
//
// The package needs only the standard library.
package logq

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultLines is the queue length New uses for lines <= 0: at the gateway's
// bound on decision lines (limit.DefaultLogBurst at once) it holds many
// bursts while the destination catches up.
const DefaultLines = 4096

// Writer is an io.Writer whose Write copies the line onto a queue and
// returns at once. Each Write is taken as one line (log/slog's handlers make
// one Write per record). Safe for concurrent use.
type Writer struct {
	out    io.Writer
	onDrop func()
	q      chan *[]byte
	pool   sync.Pool
	done   chan struct{}

	mu      sync.RWMutex // held for reading by Write, for writing by Close
	closed  bool
	outMu   sync.Mutex // serialises writes to out (the goroutine's, and direct ones after Close)
	dropped atomic.Uint64
}

// New starts a Writer in front of out with room for lines queued lines
// (DefaultLines if lines <= 0). onDrop, if not nil, is called once for each
// dropped line, from the goroutine that logged; it must not block.
func New(out io.Writer, lines int, onDrop func()) *Writer {
	if lines <= 0 {
		lines = DefaultLines
	}
	w := &Writer{out: out, onDrop: onDrop, q: make(chan *[]byte, lines), done: make(chan struct{})}
	w.pool.New = func() any { b := make([]byte, 0, 512); return &b }
	go w.run()
	return w
}

// Write queues a copy of p and returns len(p), nil. When the queue is full,
// p is dropped and counted instead: a Writer never makes its caller wait.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		w.outMu.Lock()
		defer w.outMu.Unlock()
		return w.out.Write(p)
	}
	b := w.pool.Get().(*[]byte)
	*b = append((*b)[:0], p...)
	select {
	case w.q <- b:
	default:
		w.pool.Put(b)
		w.dropped.Add(1)
		if w.onDrop != nil {
			w.onDrop()
		}
	}
	return len(p), nil
}

// Dropped returns how many lines were dropped and not yet reported by a
// line of their own.
func (w *Writer) Dropped() uint64 { return w.dropped.Load() }

func (w *Writer) run() {
	defer close(w.done)
	for b := range w.q {
		w.outMu.Lock()
		_, _ = w.out.Write(*b)
		w.outMu.Unlock()
		if cap(*b) <= 64<<10 { // do not keep a rare huge line's buffer
			w.pool.Put(b)
		}
		if len(w.q) > 0 {
			continue
		}
		if n := w.dropped.Swap(0); n > 0 { // caught up: say what was lost meanwhile
			w.note(n)
		}
	}
	if n := w.dropped.Swap(0); n > 0 {
		w.note(n)
	}
}

// note writes the line that reports n dropped lines, in the shape of
// log/slog's JSON handler (the gateway's log format).
func (w *Writer) note(n uint64) {
	w.outMu.Lock()
	defer w.outMu.Unlock()
	_, _ = fmt.Fprintf(w.out, `{"time":%q,"level":"WARN","msg":"log lines dropped: the log destination was too slow","dropped":%d}`+"\n",
		time.Now().Format(time.RFC3339Nano), n)
}

// Close stops taking lines onto the queue, waits until the queue is written
// out or timeout has passed (0: no limit), and returns. Later writes go to
// the destination directly. Close is idempotent.
func (w *Writer) Close(timeout time.Duration) {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.q)
	}
	w.mu.Unlock()
	if timeout <= 0 {
		<-w.done
		return
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-w.done:
	case <-t.C:
	}
}
