// Package accesslog writes the gateway's access log (--access-log PATH|-):
// one JSON line per request, in the format `sluicectl simulate` replays
// (package replay, FormatJSON):
//
//	{"ts":"2026-12-04T10:00:00.250000001Z","ip":"192.0.2.1","method":"GET","host":"shop.example.com","path":"/api/orders?page=2","headers":{"User-Agent":["curl/8.5"],"X-Api-Key":["k1"]}}
//
// ts is the wall time the request arrived (RFC 3339, nanoseconds, UTC); ip
// the client address the limits key on (the peer, or the X-Forwarded-For
// client of a trusted proxy); path the request target as sent (escaped path
// and query).
//
// # Which headers are logged
//
// Only what a replay of the rules needs, so that a log never becomes a store
// of credentials: User-Agent, and the headers that some limit's or degrade
// plan's key reads (header:NAME parts) in the rule set the request was
// served under. A Cookie header is logged only with the cookies some key
// reads (cookie:NAME parts; the other cookies of the line are left out), and
// not at all when no key reads a cookie. Authorization, like any other
// header, is logged only when a key reads it (header:Authorization); a key
// that reads a verified JWT's claims (jwt:CLAIM) does not log the token, so
// a replay keys such requests as anonymous. Values are logged as sent; bytes
// that are not UTF-8 become U+FFFD.
//
// # Cost
//
// Lines go through a bounded queue (package internal/logq) that one
// goroutine writes out: a slow or stuck destination drops and counts lines
// (sluice_access_log_dropped_total) instead of stalling requests. Rotation
// is the operator's: the file is opened for appending, so logrotate's
// copytruncate works. Once the destination has caught up after drops, the
// log gets one line saying how many were lost ({"time":…,"level":"WARN",
// "msg":"log lines dropped: …","dropped":N}): a replay counts it as
// unparseable and reports its line number, so the gap shows. A gateway without --access-log has no Log, and its
// request path pays one nil check.
package accesslog

import (
	"fmt"
	"io"
	"net/textproto"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/internal/logq"
	"github.com/sluicegw/sluice/dataplane/reqview"
)

// DefaultLines is the queue length of a Log: lines waiting for the
// destination beyond it are dropped and counted.
const DefaultLines = 16384

// Log is an access log. Safe for concurrent use. A nil *Log logs nothing.
type Log struct {
	w     *logq.Writer
	file  *os.File // closed by Close; nil for a writer the caller owns
	bufs  sync.Pool
	close sync.Once
	drops atomic.Uint64
}

// Open opens the access log at path ("-": standard output) for appending,
// creating it (mode 0640) when missing. onDrop, if not nil, is called once
// per dropped line and must not block.
func Open(path string, onDrop func()) (*Log, error) {
	if path == "-" {
		return New(os.Stdout, 0, onDrop), nil
	}
	if path == "" {
		return nil, fmt.Errorf("access log: empty path")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("access log: %w", err)
	}
	l := New(f, 0, onDrop)
	l.file = f
	return l, nil
}

// New returns a Log writing to out through a queue of lines lines
// (DefaultLines if lines <= 0). out is not closed by Close.
func New(out io.Writer, lines int, onDrop func()) *Log {
	if lines <= 0 {
		lines = DefaultLines
	}
	l := &Log{}
	l.w = logq.New(out, lines, func() {
		l.drops.Add(1)
		if onDrop != nil {
			onDrop()
		}
	})
	l.bufs.New = func() any { b := make([]byte, 0, 512); return &b }
	return l
}

// Dropped is the number of lines dropped so far because the queue was full.
func (l *Log) Dropped() uint64 { return l.drops.Load() }

// Close writes what is queued (waiting at most timeout for the destination)
// and closes the file Open opened. Lines logged after Close are written
// directly.
func (l *Log) Close(timeout time.Duration) error {
	if l == nil {
		return nil
	}
	var err error
	l.close.Do(func() {
		l.w.Close(timeout)
		if l.file != nil {
			err = l.file.Close()
		}
	})
	return err
}

// Recorder logs the requests of one rule set: it knows which headers and
// cookies the set's keys read. It is immutable and safe for concurrent use;
// a nil *Recorder logs nothing.
type Recorder struct {
	l       *Log
	headers []string // canonical names, User-Agent first; never "Cookie"
	cookies []string // cookie names some key reads
}

// For returns the Recorder of the normalized rule set rs (nil when l is
// nil).
func (l *Log) For(rs *api.RuleSet) *Recorder {
	if l == nil {
		return nil
	}
	r := &Recorder{l: l, headers: []string{"User-Agent"}}
	add := func(parts []string) {
		for _, p := range parts {
			kind, name, _ := strings.Cut(p, ":")
			switch {
			case name == "":
			case kind == "header":
				c := textproto.CanonicalMIMEHeaderKey(name)
				if c != "Cookie" && !slices.Contains(r.headers, c) {
					r.headers = append(r.headers, c)
				}
			case kind == "cookie":
				if !slices.Contains(r.cookies, name) {
					r.cookies = append(r.cookies, name)
				}
			}
		}
	}
	if rs != nil {
		for _, lim := range rs.Limits {
			add(lim.Key)
		}
		for _, d := range rs.Degrades {
			add(d.Key)
		}
	}
	return r
}

// Record logs the request v, which arrived at wall (Unix nanoseconds).
// v must carry ClientIP; its header is read only for the names the rule set
// keys on. It never blocks.
func (r *Recorder) Record(v *reqview.View, wall int64) {
	if r == nil {
		return
	}
	bp := r.l.bufs.Get().(*[]byte)
	b := r.Append((*bp)[:0], v, wall)
	r.l.w.Write(b)
	*bp = b[:0]
	if cap(b) <= 64<<10 {
		r.l.bufs.Put(bp)
	}
}

// Append appends v's line (with its newline) to b.
func (r *Recorder) Append(b []byte, v *reqview.View, wall int64) []byte {
	b = append(b, `{"ts":"`...)
	b = time.Unix(0, wall).UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","ip":"`...)
	if v.ClientIP.IsValid() {
		b = v.ClientIP.AppendTo(b)
	}
	b = append(b, `","method":`...)
	b = appendString(b, v.Method)
	b = append(b, `,"host":`...)
	b = appendString(b, v.Host)
	b = append(b, `,"path":`...)
	if v.RawQuery != "" {
		b = appendString(b, v.RawPath+"?"+v.RawQuery)
	} else {
		b = appendString(b, v.RawPath)
	}
	h := v.Header()
	first := true
	field := func(name string) {
		if first {
			b = append(b, `,"headers":{`...)
			first = false
		} else {
			b = append(b, ',')
		}
		b = appendString(b, name)
		b = append(b, ":["...)
	}
	for _, name := range r.headers {
		vals := h[name]
		if len(vals) == 0 {
			continue
		}
		field(name)
		for i, val := range vals {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, val)
		}
		b = append(b, ']')
	}
	if len(r.cookies) > 0 {
		wrote := false
		for _, line := range h["Cookie"] {
			kept := r.keptCookies(line)
			if kept == "" {
				continue
			}
			if !wrote {
				field("Cookie")
				wrote = true
			} else {
				b = append(b, ',')
			}
			b = appendString(b, kept)
		}
		if wrote {
			b = append(b, ']')
		}
	}
	if !first {
		b = append(b, '}')
	}
	return append(b, "}\n"...)
}

// keptCookies returns the pairs of the Cookie line whose name (trimmed, and
// compared case-insensitively and percent-decoded, so that a respelling a
// key check would refuse is kept for the replay to refuse too) is one the
// keys read, joined by "; ".
func (r *Recorder) keptCookies(line string) string {
	var out []string
	for pair := range strings.SplitSeq(line, ";") {
		pair = strings.TrimSpace(pair)
		name, _, _ := strings.Cut(pair, "=")
		name = strings.TrimSpace(name)
		if dec, err := url.PathUnescape(name); err == nil {
			name = dec
		}
		if slices.ContainsFunc(r.cookies, func(c string) bool { return strings.EqualFold(c, name) }) {
			out = append(out, pair)
		}
	}
	return strings.Join(out, "; ")
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		rn, size := utf8.DecodeRuneInString(s[i:])
		if rn == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
