// Package delayproxy is a TCP proxy for tests that makes a real server
// slow: each chunk it reads from a client is held for a fixed delay before
// it is written to the server (chunks keep their order, and a chunk's delay
// runs from when it came, so pipelined calls are not serialized); the
// server's answers go back at once. In front of Redis, every call then
// takes the delay more, for tests of what waits on a store. The delay may
// be changed while the proxy runs (SetDelay). Nothing here is for
// production use.
package delayproxy

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Start listens on a loopback port and proxies each connection to target,
// delaying what goes toward it by delay. The proxy and its connections are
// closed when the test ends.
func Start(tb testing.TB, target string, delay time.Duration) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target}
	p.SetDelay(delay)
	tb.Cleanup(p.close)
	p.wg.Go(p.accept)
	return p
}

// Proxy is a running delaying proxy.
type Proxy struct {
	ln     net.Listener
	target string
	delay  atomic.Int64 // nanoseconds
	wg     sync.WaitGroup
	mu     sync.Mutex
	open   []net.Conn
}

// Addr is the address to dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetDelay changes the delay of what comes from now on.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

func (p *Proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.open {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.open = append(p.open, c, s)
		p.mu.Unlock()
		q := make(chan chunk, 1024)
		p.wg.Go(func() { p.read(c, q) })
		p.wg.Go(func() { p.write(s, q) })
		p.wg.Go(func() {
			defer c.Close()
			_, _ = io.Copy(c, s)
		})
	}
}

// chunk is what one read brought, and when it may go on.
type chunk struct {
	b  []byte
	at time.Time
}

// read queues what the client sends, stamped with when it may go on.
func (p *Proxy) read(c net.Conn, q chan<- chunk) {
	defer close(q)
	for {
		b := make([]byte, 32<<10)
		n, err := c.Read(b)
		if n > 0 {
			q <- chunk{b[:n], time.Now().Add(time.Duration(p.delay.Load()))}
		}
		if err != nil {
			return
		}
	}
}

// write sends the queued chunks to the server, each once its delay is over.
func (p *Proxy) write(s net.Conn, q <-chan chunk) {
	defer s.Close()
	for ch := range q {
		time.Sleep(time.Until(ch.at))
		if _, err := s.Write(ch.b); err != nil {
			for range q { // let read finish
			}
			return
		}
	}
}
