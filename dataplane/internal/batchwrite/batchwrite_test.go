package batchwrite

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingConn counts the writes that reach a connection.
type countingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// TestBatchWriterGathers: writes from many goroutines all arrive, each
// whole and in its goroutine's order, in fewer writes to the connection
// than were made; Close sends what is left before the connection ends.
func TestBatchWriterGathers(t *testing.T) {
	a, b := net.Pipe()
	cc := &countingConn{Conn: a}
	w := newConn(cc)
	got := make(chan []byte)
	go func() {
		all, _ := io.ReadAll(b)
		got <- all
	}()
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				if _, err := w.Write([]byte{byte('a' + g), byte(i)}); err != nil {
					t.Errorf("write: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	all := <-got
	if len(all) != writers*each*2 {
		t.Fatalf("read %d bytes, want %d", len(all), writers*each*2)
	}
	next := make([]int, writers)
	for i := 0; i < len(all); i += 2 {
		g := int(all[i] - 'a')
		if g < 0 || g >= writers || int(all[i+1]) != next[g]%256 {
			t.Fatalf("at %d: %q out of order (writer %d expects %d)", i, all[i:i+2], g, next[g])
		}
		next[g]++
	}
	if n := cc.writes.Load(); n >= writers*each {
		t.Errorf("%d writes to the connection for %d writes: none gathered", n, writers*each)
	}
}

// TestBatchWriterError: a write that fails on the connection is reported
// to the next Write, and Write takes nothing after it.
func TestBatchWriterError(t *testing.T) {
	a, b := net.Pipe()
	b.Close() // every write to a fails
	w := newConn(a)
	if _, err := w.Write([]byte("first")); err != nil {
		t.Fatalf("first write: %v (it is gathered, not written yet)", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	var err error
	for err == nil && time.Now().Before(deadline) {
		_, err = w.Write([]byte("more"))
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("write after the connection failed: %v, want its error", err)
	}
	_ = w.Close()
}

// TestBatchWriterBounded: past batchMax unwritten bytes (the batch being
// written counts), Write waits for the connection instead of holding more;
// Close of a connection whose reader never reads returns after
// batchCloseWait. The writes are spaced so that the first batch is taken
// and blocked on the pipe before the next gathers.
func TestBatchWriterBounded(t *testing.T) {
	a, b := net.Pipe()
	w := newConn(a)
	chunk := bytes.Repeat([]byte("x"), 16<<10)
	var taken atomic.Int64
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for range 2 * batchMax / len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			taken.Add(1)
			time.Sleep(time.Millisecond)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	if n := int(taken.Load()) * len(chunk); n >= batchMax+len(chunk) {
		t.Fatalf("%d bytes taken with nothing read, want under %d: Write does not wait", n, batchMax+len(chunk))
	}
	done := make(chan error)
	go func() { done <- w.Close() }()
	select {
	case <-done:
	case <-time.After(batchCloseWait + 5*time.Second):
		t.Fatal("Close waits for a reader that never reads")
	}
	<-wrote
	b.Close()
}

// TestBatchWriterStall: with a stall bound, a batch the peer takes nothing
// of fails the connection once the bound passes (the next Write reports
// it); without one, the write waits.
func TestBatchWriterStall(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	w := New(a, func() time.Duration { return 100 * time.Millisecond })
	start := time.Now()
	var err error
	for err == nil && time.Since(start) < 5*time.Second {
		_, err = w.Write([]byte("nobody reads this"))
		time.Sleep(10 * time.Millisecond)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write to a peer that takes nothing: %v, want the stall bound's deadline", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the stall bound of 100ms failed the connection after %v", d)
	}
	_ = w.Close()
}
