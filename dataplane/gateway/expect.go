package gateway

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http/httputil"
)

// continueLine is the interim answer that tells a client waiting on
// "Expect: 100-continue" to send its body.
const continueLine = "HTTP/1.1 100 Continue\r\n\r\n"

// continueBody is the body of a request that waits for 100 Continue: its
// first Read writes the 100 to the client, then it reads the body: what
// the engine read of it ahead, then the connection (n bytes in all, or
// chunked when n is -1).
type continueBody struct {
	c     net.Conn
	n     int64
	ahead []byte
	r     io.Reader
	ok    bool // the 100 is sent
}

func (b *continueBody) Read(p []byte) (int, error) {
	if !b.ok {
		b.ok = true
		if _, err := io.WriteString(b.c, continueLine); err != nil {
			return 0, err
		}
		src := io.MultiReader(bytes.NewReader(b.ahead), b.c)
		if b.n < 0 {
			b.r = httputil.NewChunkedReader(bufio.NewReader(src))
		} else {
			b.r = io.LimitReader(src, b.n)
		}
	}
	n, err := b.r.Read(p)
	if err == io.EOF && b.n > 0 {
		if lr := b.r.(*io.LimitedReader); lr.N > 0 {
			err = io.ErrUnexpectedEOF
		}
	}
	return n, err
}
