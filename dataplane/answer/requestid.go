package answer

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/sluicegw/sluice/api"
)

// MaxRequestIDLength bounds an X-Request-Id accepted from a client.
const MaxRequestIDLength = 128

// EnsureRequestID returns r's request id, setting r's X-Request-Id header
// when it has none: a client's id is kept when it is sane (ValidRequestID),
// and replaced by a generated one otherwise. Unless w is nil it also sets
// the id as w's X-Request-Id header (replacing any), so that every answer
// written to w afterwards (429, 503, 404, ...) carries it. It is
// idempotent: the integrator calls it first thing, and proxy's Forward and
// WriteProblem call it again. It modifies r.Header and is not safe for
// concurrent use on one request.
func EnsureRequestID(w http.ResponseWriter, r *http.Request) string {
	id := ""
	if v := r.Header[api.HeaderRequestID]; len(v) == 1 && ValidRequestID(v[0]) {
		id = v[0]
	} else {
		id = NewRequestID()
		r.Header[api.HeaderRequestID] = []string{id}
	}
	if w != nil {
		if h := w.Header(); len(h[api.HeaderRequestID]) != 1 || h[api.HeaderRequestID][0] != id {
			h[api.HeaderRequestID] = []string{id}
		}
	}
	return id
}

// ValidRequestID reports whether s may be kept as a request's X-Request-Id:
// 1 to MaxRequestIDLength characters from A-Z a-z 0-9 - _ . : + / = @.
// Serving stacks other than net/http call it themselves.
func ValidRequestID(s string) bool {
	if s == "" || len(s) > MaxRequestIDLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			continue
		}
		switch c {
		case '-', '_', '.', ':', '+', '/', '=', '@':
		default:
			return false
		}
	}
	return true
}

var (
	idPrefix  = newIDPrefix()
	idCounter atomic.Uint64
)

func newIDPrefix() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics rather)
	return hex.EncodeToString(b[:]) + "-"
}

// NewRequestID returns a new request id: a random per-process prefix and a
// counter, unique within the process and, with overwhelming probability,
// across processes. Safe for concurrent use.
func NewRequestID() string {
	var buf [RequestIDMax]byte
	return string(AppendRequestID(buf[:0]))
}

// RequestIDMax is the longest id NewRequestID makes, in bytes.
const RequestIDMax = 16 + 1 + 13

// AppendRequestID appends a new request id (NewRequestID's) to dst.
func AppendRequestID(dst []byte) []byte {
	dst = append(dst, idPrefix...)
	return strconv.AppendUint(dst, idCounter.Add(1), 36)
}
