package reqview

import (
	"encoding/binary"
	"math/rand/v2"
	"net/http"
	"unsafe"
)

// W3C Trace Context header names (https://www.w3.org/TR/trace-context/), in
// canonical form.
const (
	HeaderTraceparent = "Traceparent"
	HeaderTracestate  = "Tracestate"
)

// traceparentLen is the length of a version-00 traceparent:
// "00-" 32 hex "-" 16 hex "-" 2 hex.
const traceparentLen = 55

// Trace is a request's W3C trace context. The zero value is no trace.
type Trace struct {
	// Parent is the traceparent header value the request is forwarded with:
	// the client's when it was valid, else one the gateway started, or,
	// once the gateway records a span of the client's trace (Child), that
	// span's.
	Parent string
	// Started is true when the gateway started the trace: no traceparent
	// came, or it was invalid (its tracestate is then dropped too, as the
	// specification requires).
	Started bool
	// Child is true when Parent is the traceparent of the span the gateway
	// records in the client's trace (SetParentID): it goes upstream in
	// place of the client's, with the client's tracestate, so that the
	// upstream's spans are children of the gateway's.
	Child bool
	// buf holds Parent when Started (startTrace) or Child (SetParentID):
	// Unsample writes there, Carry puts it in a header.
	buf *TraceBuf
}

// Replaces reports whether Parent goes upstream in place of the client's
// traceparent: a trace the gateway started, or its span's in the client's
// trace (Child). Otherwise the client's traceparent goes as it came.
func (t Trace) Replaces() bool { return t.Started || t.Child }

// SetParentID makes t the trace context of a span the gateway records in
// the client's trace, whose span id is id: Parent becomes a version-00
// traceparent with the client's trace id and flags and id as parent id,
// and Child is set (see Replaces, Carry). A trace the gateway started is
// left as it is: its span takes the started parent id as its own (package
// tracing), which is already what goes upstream. It allocates once; call it
// only for a recorded request.
func (t *Trace) SetParentID(id [8]byte) {
	if t.Started || len(t.Parent) < traceparentLen {
		return
	}
	buf := new(TraceBuf)
	b := &buf.b
	copy(b[:], "00-")
	copy(b[3:36], t.Parent[3:36]) // the trace id and its "-"
	putHex(b[36:52], binary.BigEndian.Uint64(id[:]))
	b[52], b[53], b[54] = '-', t.Parent[53], t.Parent[54]
	buf.v[0] = unsafe.String(&b[0], len(b))
	t.Parent, t.Child, t.buf = buf.v[0], true, buf
}

// Carry makes h carry the traceparent t forwards upstream when it Replaces
// the client's: h's traceparent is set to it, and for a trace the gateway
// started the client's tracestate is removed. A trace that replaces
// nothing leaves h as it is. It does not allocate.
func (t Trace) Carry(h http.Header) {
	if t.buf == nil || !t.Replaces() {
		return
	}
	h[HeaderTraceparent] = t.buf.v[:]
	if t.Started {
		delete(h, HeaderTracestate)
	}
}

// Unsample clears the sampled flag of a trace the gateway started, in
// place, before the request is forwarded: the traceparent the upstream gets
// then ends in -00, so that services that follow their caller's decision
// (parent-based sampling) do not record a trace whose root the gateway did
// not record (package tracing samples a share of the traces it starts). A
// caller's traceparent is passed on as it came: Unsample does nothing to it.
// It does not allocate.
func (t Trace) Unsample() {
	if t.Started && t.buf != nil {
		t.buf.b[53], t.buf.b[54] = '0', '0'
	}
}

// TraceID returns the trace id: 32 lower-case hex digits, "" for no trace.
func (t Trace) TraceID() string {
	if len(t.Parent) < traceparentLen {
		return ""
	}
	return t.Parent[3:35]
}

// ParentID returns the parent (span) id: 16 lower-case hex digits, "" for
// no trace.
func (t Trace) ParentID() string {
	if len(t.Parent) < traceparentLen {
		return ""
	}
	return t.Parent[36:52]
}

// ValidTraceparent reports whether s is a traceparent the gateway passes on
// as it is: version 00 of exactly 55 characters, or a later version (not
// ff) whose first 55 characters have version 00's shape and which goes on,
// if at all, with "-"; lower-case hex, a trace id and parent id not all
// zeros.
func ValidTraceparent(s string) bool {
	if len(s) < traceparentLen {
		return false
	}
	if !lowerHex(s[0:2]) || s[2] != '-' || !lowerHex(s[3:35]) || s[35] != '-' ||
		!lowerHex(s[36:52]) || s[52] != '-' || !lowerHex(s[53:55]) {
		return false
	}
	switch {
	case s[0:2] == "ff":
		return false
	case s[0:2] == "00":
		if len(s) != traceparentLen {
			return false
		}
	case len(s) > traceparentLen && s[traceparentLen] != '-':
		return false
	}
	return !allZero(s[3:35]) && !allZero(s[36:52])
}

// isLowerHex marks the bytes 0-9 and a-f.
var isLowerHex = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = true
	}
	return t
}()

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isLowerHex[s[i]] {
			return false
		}
	}
	return true
}

func allZero(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}

// EnsureTrace returns the trace context of a request whose header is h and
// makes h carry it upstream: a single valid traceparent is kept as it is,
// with its tracestate; otherwise (none, several, or an invalid one) a new
// trace is started — a random trace id and parent id, flags 01 (sampled:
// the gateway's decision lines record it; see Unsample for when it is not)
// — h's traceparent is set to it and
// its tracestate removed. It allocates only to start a trace.
func EnsureTrace(h http.Header) Trace {
	if vs := h[HeaderTraceparent]; len(vs) == 1 && ValidTraceparent(vs[0]) {
		return Trace{Parent: vs[0]}
	}
	// One allocation holds the new value and the header's slice of it.
	t := startTrace(new(TraceBuf))
	t.Carry(h)
	return t
}

// TraceOf is EnsureTrace's decision for a request whose header holds n
// traceparent lines, the first being first: a single valid one is the
// trace; otherwise a new trace is started in buf, whose strings the trace
// points into (buf must not be used for another request until this one has
// ended: a serving stack's pooled per-request state), and which Trace.Carry
// puts in the request's header when it is built. It does not allocate.
func TraceOf(first string, n int, buf *TraceBuf) Trace {
	if n == 1 && ValidTraceparent(first) {
		return Trace{Parent: first}
	}
	return startTrace(buf)
}

func startTrace(st *TraceBuf) Trace {
	putTraceparent(&st.b)
	st.v[0] = unsafe.String(&st.b[0], len(st.b)) // st.b is not written again for this request
	return Trace{Parent: st.v[0], Started: true, buf: st}
}

// TraceBuf is the storage of a traceparent a request's trace starts with
// (TraceOf), or of the gateway span's (Trace.SetParentID).
type TraceBuf struct {
	v [1]string
	b [traceparentLen]byte
}

// NewTraceparent returns a new version-00 traceparent with a random trace id
// and parent id and the sampled flag.
func NewTraceparent() string {
	var b [traceparentLen]byte
	putTraceparent(&b)
	return string(b[:])
}

// putTraceparent writes a new version-00 traceparent into b.
func putTraceparent(b *[traceparentLen]byte) {
	b[0], b[1], b[2] = '0', '0', '-'
	for {
		hi, lo := rand.Uint64(), rand.Uint64()
		if hi|lo != 0 {
			putHex(b[3:19], hi)
			putHex(b[19:35], lo)
			break
		}
	}
	b[35] = '-'
	span := rand.Uint64()
	for span == 0 {
		span = rand.Uint64()
	}
	putHex(b[36:52], span)
	b[52], b[53], b[54] = '-', '0', '1'
}

// putHex writes x as 16 lower-case hex digits into dst[:16].
func putHex(dst []byte, x uint64) {
	binary.BigEndian.PutUint64(dst[:8], hex8(uint32(x>>32)))
	binary.BigEndian.PutUint64(dst[8:16], hex8(uint32(x)))
}

// hex8 is x's 8 hex digits, most significant first in the most significant
// byte: each nibble spread to a byte of its own, then turned into its digit,
// all eight at once.
func hex8(x uint32) uint64 {
	v := uint64(x)
	v = (v<<16 | v) & 0x0000ffff0000ffff
	v = (v<<8 | v) & 0x00ff00ff00ff00ff
	v = (v<<4 | v) & 0x0f0f0f0f0f0f0f0f
	letters := (v + 0x0606060606060606) >> 4 & 0x0101010101010101 // nibbles of 10 and more
	return v + 0x3030303030303030 + letters*('a'-'0'-10)
}
