package gateway

import (
	"crypto/tls"
	"encoding/binary"
	"net"
	"time"

	"golang.org/x/net/http2"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/internal/batchwrite"
)

// Rapid reset (CVE-2023-44487): a client opens streams and resets each at
// once, so that every stream costs the gateway a handler and, unchecked,
// an upstream request, while the client never has more than a few open.
// x/net's server bounds the handlers it runs and queues (too many queued
// is ENHANCE_YOUR_CALM) but counts no resets, so the gateway counts them
// itself on the bytes the server reads (resetGuard): a client's RST_STREAM
// frames take tokens from a bucket of ResetBurst, refilled at ResetRate per
// second; one that finds the bucket empty ends the connection. The server
// offers no way to send a GOAWAY on one connection, so the guard makes the
// server send it: in place of the frames that follow, the server reads an
// RST_STREAM on stream 0, a protocol error, and answers it as every
// connection error, with a GOAWAY (PROTOCOL_ERROR, the last stream it
// processed), closing the connection a second later; what the client sends
// meanwhile is read and dropped. The GOAWAY is written by the server's own
// writer, between its frames.
const (
	// ResetBurst is how many streams a client may reset at once.
	ResetBurst = 200
	// ResetRate is how many resets per second a client may go on with.
	ResetRate = 100
)

// resetBucket counts a connection's stream resets against ResetBurst and
// ResetRate. Time is the caller's (take's now). Its zero value is full.
type resetBucket struct {
	used float64 // tokens taken, less what refilled
	last time.Time
}

// take takes one token at now; false when none is left.
func (b *resetBucket) take(now time.Time) bool {
	if !b.last.IsZero() {
		b.used = max(0, b.used-now.Sub(b.last).Seconds()*ResetRate)
	}
	b.last = now
	if b.used+1 > ResetBurst {
		return false
	}
	b.used++
	return true
}

// HTTP/2 frame types the guard reads (RFC 9113 §6).
const (
	frameRSTStream = 0x3
	frameHeader    = 9
)

// goAwayBait is an RST_STREAM frame on stream 0, which RFC 9113 §6.4 makes
// a connection error (PROTOCOL_ERROR): the server answers it with a GOAWAY.
var goAwayBait = []byte{0, 0, 4, frameRSTStream, 0, 0, 0, 0, 0, 0, 0, 0, byte(http2.ErrCodeEnhanceYourCalm)}

// resetGuard is the connection an HTTP/2 server session reads, from the
// start of the client's connection preface: it follows the frames the
// client sends (their 9-byte headers), counts the RST_STREAMs in a
// resetBucket, and, when the client resets too fast, hands the server
// goAwayBait at the next frame boundary instead of what follows, then
// drops what the client sends until the connection ends (see ResetBurst).
// Reads come from one goroutine (the server's frame reader). Writes are
// batched (batchwrite.Conn); the rest of net.Conn is the connection's own.
type resetGuard struct {
	net.Conn
	now     func() time.Time
	tripped func() // called once, when the guard trips

	skip   int // preface bytes still to pass
	hdr    [frameHeader]byte
	hn     int // header bytes read of the current frame
	rem    int // payload bytes left of the current frame
	bucket resetBucket
	bait   []byte // what the server reads next, instead of the client
	trip   bool   // the current frame ends the connection
	over   bool   // the guard tripped: the client's bytes are dropped
	drop   []byte
}

// newResetGuard wraps c, a connection whose client preface (RFC 9113
// §3.4) is still to be read, for an HTTP/2 session. A *tls.Conn stays one
// to the server (its ConnectionState).
func newResetGuard(c net.Conn, now func() time.Time, tripped func(), stall func() time.Duration) net.Conn {
	g := &resetGuard{Conn: batchwrite.New(c, stall), now: now, tripped: tripped, skip: len(http2.ClientPreface)}
	if tc, ok := c.(*tls.Conn); ok {
		return &tlsResetGuard{resetGuard: g, tc: tc}
	}
	return g
}

// tlsResetGuard is a resetGuard over a TLS connection.
type tlsResetGuard struct {
	*resetGuard
	tc *tls.Conn
}

// ConnectionState is the TLS connection's, for the HTTP/2 server.
func (g *tlsResetGuard) ConnectionState() tls.ConnectionState { return g.tc.ConnectionState() }

func (g *resetGuard) Read(b []byte) (int, error) {
	if len(g.bait) > 0 {
		n := copy(b, g.bait)
		g.bait = g.bait[n:]
		return n, nil
	}
	if g.over {
		// The server has read the bait and closes the connection soon;
		// the client's frames are read and dropped meanwhile, so that the
		// close is not a reset that could lose the GOAWAY.
		if g.drop == nil {
			g.drop = make([]byte, 16<<10)
		}
		for {
			if _, err := g.Conn.Read(g.drop); err != nil {
				return 0, err
			}
		}
	}
	n, err := g.Conn.Read(b)
	if end := g.scan(b[:n]); end >= 0 {
		g.over = true
		g.bait = goAwayBait
		if g.tripped != nil {
			g.tripped()
		}
		return end, nil
	}
	return n, err
}

// scan follows the frames in p, which the server reads next; it returns
// where p is to be cut (the end of the frame that emptied the bucket), or
// -1.
func (g *resetGuard) scan(p []byte) int {
	for i := 0; i < len(p); {
		switch {
		case g.skip > 0:
			k := min(g.skip, len(p)-i)
			g.skip -= k
			i += k
			continue
		case g.hn < frameHeader:
			k := copy(g.hdr[g.hn:], p[i:])
			g.hn += k
			i += k
			if g.hn < frameHeader {
				continue
			}
			g.rem = int(g.hdr[0])<<16 | int(g.hdr[1])<<8 | int(g.hdr[2])
			if g.hdr[3] == frameRSTStream && binary.BigEndian.Uint32(g.hdr[5:])&0x7fffffff != 0 {
				g.trip = !g.bucket.take(g.now())
			}
		default:
			k := min(g.rem, len(p)-i)
			g.rem -= k
			i += k
		}
		if g.hn == frameHeader && g.rem == 0 {
			g.hn = 0 // the frame is whole
			if g.trip {
				return i
			}
		}
	}
	return -1
}

// guardH2 is c guarded against rapid reset for an HTTP/2 session: every
// session the node serves (TLS h2, h2c with prior knowledge, an h2c
// upgrade, on every HTTP/1 engine) reads through one. Its writes are
// batched, and a session whose client takes nothing for h2Stall ends.
func (n *Node) guardH2(c net.Conn) net.Conn {
	return newResetGuard(c, time.Now, func() {
		n.log.Warn("HTTP/2 client resets streams too fast; ending its connection (GOAWAY)",
			"client", c.RemoteAddr().String(), "burst", ResetBurst, "perSecond", ResetRate)
	}, n.h2Stall)
}

// h2Stall is how long an HTTP/2 client may take nothing the session writes
// before the session ends: the longest writeTimeout of the current rules.
// A stream's own writeTimeout cannot end a stream whose connection takes
// nothing (x/net resets it with a frame that cannot be written either), so
// a client that stops reading would hold its streams, and the limit slots
// they took, for as long as it keeps the connection; ending the session
// frees them within a bound no route's answers are cut sooner than.
func (n *Node) h2Stall() time.Duration {
	if s := n.current.Load(); s != nil {
		return s.MaxWriteTimeout()
	}
	return api.DefaultWriteTimeout
}
