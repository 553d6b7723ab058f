// Package batchwrite gathers the writes of an HTTP/2 connection's frames
// into fewer system calls (and, over TLS, fewer records).
//
// x/net's HTTP/2 server writes each frame a handler sends as soon as
// nothing else is queued, and a handler sends its answer's HEADERS and then
// its DATA, waiting for each; its client writes a request's HEADERS and
// then its body's DATA, each flushed. So every answer, and every request to
// an HTTP/2 target, cost two writes to the connection, and the streams of a
// busy connection, each on its own goroutine, were not written together. A
// Conn takes the writes without waiting and writes what gathered from a
// goroutine that first lets the runnable goroutines run (the handler
// sending its DATA, the server framing it, the other streams' frames): one
// write carries what they sent meanwhile. When nothing else is runnable (an
// idle gateway) the write goes at once, so a lone frame waits for no timer.
//
// A write that failed is reported to the next Write and to Close. Writes
// are bounded: past batchMax bytes held unwritten (the batch being written
// and the one gathering) a Write waits for the connection
// (HTTP/2's flow control and the writer's own buffer bound what is sent;
// this bounds what is held for it). A connection may also be given a stall
// bound: a batch of which the peer takes nothing for that long fails the
// connection, as x/net's own WriteByteTimeout would (whose deadline, set
// around each Write, would not reach the batch written later).
package batchwrite

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"runtime"
	"sync"
	"time"
)

// batchMax is the most a connection's writes may hold unwritten: past it,
// Write waits for the connection.
const batchMax = 64 << 10

// batchCloseWait bounds how long Close waits for the last batch to go out
// (a GOAWAY, say) before it closes the connection under it.
const batchCloseWait = time.Second

// Conn is a connection whose writes are batched (see the package doc).
// Write and Close may be called from any goroutine; the connection is
// written by one goroutine at a time (flush). The rest of net.Conn is the
// connection's own.
type Conn struct {
	net.Conn

	stall func() time.Duration // the stall bound (nil, or 0 returned: none)

	mu      sync.Mutex
	room    sync.Cond // signalled when a batch has gone out (or failed)
	buf     *[]byte   // gathered, not written yet (nil for none)
	out     int       // bytes of the batch being written
	writing bool      // a flush goroutine is running
	closing bool      // Close set its own deadline: the stall bound stands aside
	err     error     // the first write's error, reported from then on
}

// New wraps c. A *tls.Conn stays one to its user (ConnectionState).
// stall, when not nil, is asked before each batch for how long the peer may
// take nothing of it before the connection fails (0: no bound). Over TLS a
// write that timed out leaves the connection unusable, so there the bound
// is how long one batch (at most batchMax and a write) may take whole.
func New(c net.Conn, stall func() time.Duration) net.Conn {
	w := newConn(c)
	w.stall = stall
	if tc, ok := c.(*tls.Conn); ok {
		return &tlsConn{Conn: w, tc: tc}
	}
	return w
}

func newConn(c net.Conn) *Conn {
	w := &Conn{Conn: c}
	w.room.L = &w.mu
	return w
}

// tlsConn is a Conn over a TLS connection.
type tlsConn struct {
	*Conn
	tc *tls.Conn
}

// ConnectionState is the TLS connection's.
func (c *tlsConn) ConnectionState() tls.ConnectionState { return c.tc.ConnectionState() }

// held is what the connection holds unwritten: the batch being written
// and the one gathering. w.mu is held.
func (w *Conn) held() int {
	n := w.out
	if w.buf != nil {
		n += len(*w.buf)
	}
	return n
}

// Write takes b for the next batch and returns at once, unless batchMax
// bytes are held unwritten already (gathered, or in a write the connection
// has not taken yet); it reports the error of a write that failed before.
func (w *Conn) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.err == nil && w.held() >= batchMax {
		w.room.Wait()
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.buf == nil {
		w.buf = batchBufs.Get().(*[]byte)
	}
	*w.buf = append(*w.buf, b...)
	if !w.writing {
		w.writing = true
		go w.flush()
	}
	return len(b), nil
}

// flush writes the batches until none is left. Each batch's buffer goes
// back to batchBufs once written, so that an idle session holds none.
func (w *Conn) flush() {
	// Let what is runnable run first: the frames it sends join this batch.
	runtime.Gosched()
	w.mu.Lock()
	for w.buf != nil && w.err == nil {
		out := w.buf
		w.buf = nil
		w.out = len(*out)
		w.mu.Unlock()
		err := w.write(*out)
		putBatchBuf(out)
		w.mu.Lock()
		w.out = 0
		if err != nil {
			w.err = err
			if w.buf != nil {
				putBatchBuf(w.buf)
				w.buf = nil
			}
		}
		w.room.Broadcast()
	}
	w.writing = false
	w.room.Broadcast()
	w.mu.Unlock()
}

// write writes b, failing once the peer took nothing of it for the stall
// bound (the deadline moves on with every part taken).
func (w *Conn) write(b []byte) error {
	var stall time.Duration
	if w.stall != nil {
		stall = w.stall()
	}
	for {
		if stall > 0 {
			w.mu.Lock()
			if !w.closing {
				_ = w.Conn.SetWriteDeadline(time.Now().Add(stall))
			}
			w.mu.Unlock()
		}
		n, err := w.Conn.Write(b)
		b = b[n:]
		if err == nil || stall <= 0 || n == 0 || len(b) == 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
	}
}

// batchBufs are the batches' buffers.
var batchBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// putBatchBuf returns b to batchBufs, unless it grew past what a batch
// holds (batchMax, and the write that passed it).
func putBatchBuf(b *[]byte) {
	if cap(*b) > 2*batchMax {
		return
	}
	*b = (*b)[:0]
	batchBufs.Put(b)
}

// Close writes what is gathered, waiting for it at most batchCloseWait,
// and closes the connection.
func (w *Conn) Close() error {
	w.mu.Lock()
	w.closing = true
	if w.writing {
		_ = w.Conn.SetWriteDeadline(time.Now().Add(batchCloseWait))
		for w.writing {
			w.room.Wait()
		}
	}
	if w.err == nil {
		w.err = net.ErrClosed
	}
	w.mu.Unlock()
	return w.Conn.Close()
}
