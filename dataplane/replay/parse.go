package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/netip"
	"net/textproto"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Format is the format of an access log.
type Format string

// Formats of access logs.
const (
	// FormatAuto reads the first line that is not blank: a line that starts
	// with "{" makes the log JSON lines, anything else combined.
	FormatAuto Format = ""
	// FormatCombined is the nginx/Apache combined log format (the common
	// format, without referer and user agent, is accepted too):
	//
	//	$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"
	//
	// The record takes the client address, the request line's method and
	// target (path and query; an absolute target gives the host too), the
	// time (second resolution) and, as headers, Referer and User-Agent when
	// they are not "-". Quoted fields may use nginx's \xHH escapes and
	// Apache's \" and \\. Whatever follows the user agent is ignored.
	FormatCombined Format = "combined"
	// FormatJSON is one JSON object per line:
	//
	//	{"ts": "2026-12-04T10:00:00.250Z", "ip": "192.0.2.1", "method": "GET",
	//	 "host": "shop.example.com", "path": "/api/orders?page=2",
	//	 "headers": {"Cookie": "sid=abc", "X-Api-Key": ["k1"]}}
	//
	// ts is an RFC 3339 time (fractional seconds allowed) or a number of
	// seconds since the Unix epoch (a decimal fraction is read exactly, to
	// the nanosecond). ip, method and path are required; path is the
	// request target as sent (escaped path and query). host and headers are
	// optional; a header's value is a string or an array of strings (one per
	// field line); names are canonicalized; cookies are read from the Cookie
	// header as the gateway reads them. Other fields are ignored, so a log
	// with more fields (status, duration) replays as it is.
	FormatJSON Format = "json"
)

// MaxLineBytes is the longest line a log may have; a longer one is
// unparseable (and skipped to its end).
const MaxLineBytes = 1 << 20

// Record is one request read from a log line.
type Record struct {
	// Line is the line's number in the log, from 1.
	Line int64
	// Time is when the request arrived, in Unix nanoseconds.
	Time int64
	// IP is the client address the limits key on.
	IP netip.Addr
	// Method is the request method as logged.
	Method string
	// Host is the request's host; Reader.Host when the line has none.
	Host string
	// RawPath is the escaped path, RawQuery the query without its "?".
	RawPath, RawQuery string
	// Header is the request's header (canonical names); nil for none.
	Header http.Header
}

// LineError is an unparseable line.
type LineError struct {
	Line int64  `json:"line"`
	Err  string `json:"error"`
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Err) }

// Reader reads the records of a log, one line at a time. It is not safe
// for concurrent use.
type Reader struct {
	// Host is the host of records whose line names none (combined lines
	// with an origin-form target, JSON lines without "host").
	Host string

	br     *bufio.Reader
	format Format
	line   int64
	long   []byte // a line longer than the reader's buffer, assembled

	lastTime  string // the last $time_local read, and its value
	lastNanos int64
}

// NewReader reads the log r in format f (FormatAuto: from its first line
// that is not blank).
func NewReader(r io.Reader, f Format) (*Reader, error) {
	switch f {
	case FormatAuto, FormatCombined, FormatJSON:
	default:
		return nil, fmt.Errorf("log format %q: must be combined or json", f)
	}
	return &Reader{br: bufio.NewReaderSize(r, 64<<10), format: f}, nil
}

// Format returns the log's format, once Next has read a line that is not
// blank (FormatAuto before).
func (r *Reader) Format() Format { return r.format }

// Next reads the next line into rec. It returns io.EOF at the end of the
// log, a *LineError for a line that does not parse (blank lines included;
// the caller goes on reading), and any other error for a failed read.
func (r *Reader) Next(rec *Record) error {
	line, err := r.readLine()
	if err != nil {
		return err
	}
	*rec = Record{Line: r.line}
	if line == nil {
		return &LineError{Line: r.line, Err: fmt.Sprintf("line longer than %d bytes", MaxLineBytes)}
	}
	line = bytes.TrimRight(line, "\r\n")
	if len(bytes.TrimSpace(line)) == 0 {
		return &LineError{Line: r.line, Err: "blank line"}
	}
	if r.format == FormatAuto {
		r.format = FormatCombined
		if bytes.TrimLeft(line, " \t")[0] == '{' {
			r.format = FormatJSON
		}
	}
	if r.format == FormatJSON {
		err = r.parseJSON(line, rec)
	} else {
		err = r.parseCombined(line, rec)
	}
	if err != nil {
		return &LineError{Line: r.line, Err: err.Error()}
	}
	if rec.Host == "" {
		rec.Host = r.Host
	}
	return nil
}

// readLine returns the next line; nil (with no error) for a line over
// MaxLineBytes, which it skips.
func (r *Reader) readLine() ([]byte, error) {
	r.long = r.long[:0]
	tooLong := false
	for {
		b, err := r.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if !tooLong {
				if len(r.long)+len(b) > MaxLineBytes {
					tooLong, r.long = true, r.long[:0]
				} else {
					r.long = append(r.long, b...)
				}
			}
			continue
		}
		if err == io.EOF && len(b) == 0 && len(r.long) == 0 && !tooLong {
			return nil, io.EOF
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("reading the log: %w", err)
		}
		r.line++
		if tooLong || len(r.long)+len(b) > MaxLineBytes {
			return nil, nil
		}
		if len(r.long) > 0 {
			r.long = append(r.long, b...)
			return r.long, nil
		}
		return b, nil
	}
}

// parseCombined reads one combined (or common) log line.
func (r *Reader) parseCombined(line []byte, rec *Record) error {
	s := string(line) // one copy; the record's strings point into it
	ip, rest, ok := strings.Cut(s, " ")
	if !ok {
		return errors.New("not a combined log line: no fields after the client address")
	}
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return fmt.Errorf("client address %q: not an IP address", clip(ip))
	}
	rec.IP = addr.Unmap()
	open := strings.IndexByte(rest, '[')
	if open < 0 {
		return errors.New("no [time] field")
	}
	end := strings.IndexByte(rest[open:], ']')
	if end < 0 {
		return errors.New("the [time] field is not closed")
	}
	ts := rest[open+1 : open+end]
	if ts != r.lastTime || r.lastTime == "" {
		t, err := time.Parse("02/Jan/2006:15:04:05 -0700", ts)
		if err != nil {
			return fmt.Errorf("time %q: want 02/Jan/2006:15:04:05 -0700", clip(ts))
		}
		r.lastTime, r.lastNanos = ts, t.UnixNano()
	}
	rec.Time = r.lastNanos
	rest = strings.TrimLeft(rest[open+end+1:], " ")
	request, rest, err := quoted(rest)
	if err != nil {
		return fmt.Errorf("request: %w", err)
	}
	method, target, ok := strings.Cut(request, " ")
	if !ok || !token(method) {
		return fmt.Errorf("request %q: want \"METHOD TARGET PROTOCOL\"", clip(request))
	}
	target, _, _ = strings.Cut(target, " ") // the protocol
	rec.Method = method
	if err := setTarget(rec, target); err != nil {
		return err
	}
	// $status $body_bytes_sent, then the optional "$http_referer" "$http_user_agent".
	f := strings.Fields(rest)
	if len(f) < 2 {
		return errors.New("no status and size after the request")
	}
	if _, err := strconv.Atoi(f[0]); err != nil {
		return fmt.Errorf("status %q: not a number", clip(f[0]))
	}
	_, rest, _ = strings.Cut(strings.TrimLeft(rest, " "), " ")
	_, rest, _ = strings.Cut(strings.TrimLeft(rest, " "), " ")
	rest = strings.TrimLeft(rest, " ")
	if rest == "" {
		return nil // common log format
	}
	referer, rest, err := quoted(rest)
	if err != nil {
		return fmt.Errorf("referer: %w", err)
	}
	ua, _, err := quoted(strings.TrimLeft(rest, " "))
	if err != nil {
		return fmt.Errorf("user agent: %w", err)
	}
	if referer != "-" && referer != "" {
		rec.Header = http.Header{"Referer": {referer}}
	}
	if ua != "-" && ua != "" {
		if rec.Header == nil {
			rec.Header = http.Header{}
		}
		rec.Header["User-Agent"] = []string{ua}
	}
	return nil
}

// quoted reads a double-quoted field at the start of s, undoing nginx's
// \xHH and Apache's \" and \\ escapes, and returns it and what follows.
func quoted(s string) (string, string, error) {
	if s == "" || s[0] != '"' {
		return "", "", errors.New("want a double-quoted field")
	}
	escaped := false
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			if !escaped {
				return s[1:i], s[i+1:], nil
			}
			return unescape(s[1:i]), s[i+1:], nil
		}
	}
	return "", "", errors.New("the double-quoted field is not closed")
}

func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		switch n := s[i+1]; {
		case n == 'x' && i+3 < len(s) && unhex(s[i+2]) >= 0 && unhex(s[i+3]) >= 0:
			b.WriteByte(byte(unhex(s[i+2])<<4 | unhex(s[i+3])))
			i += 3
		case n == '"' || n == '\\':
			b.WriteByte(n)
			i++
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// token reports whether s is an HTTP token (a method).
func token(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// setTarget sets rec's path, query and (for an absolute target) host from
// the request target as logged.
func setTarget(rec *Record, target string) error {
	if target == "*" { // OPTIONS *
		rec.RawPath = target
		return nil
	}
	if rest, ok := strings.CutPrefix(target, "http://"); ok {
		target = rest
	} else if rest, ok := strings.CutPrefix(target, "https://"); ok {
		target = rest
	} else if !strings.HasPrefix(target, "/") {
		return fmt.Errorf("request target %q: want a path starting with /", clip(target))
	}
	if target[0] != '/' {
		host, path, _ := strings.Cut(target, "/")
		if host == "" {
			return fmt.Errorf("request target %q: no host", clip(target))
		}
		rec.Host, target = host, "/"+path
	}
	rec.RawPath, rec.RawQuery, _ = strings.Cut(target, "?")
	return nil
}

// jsonLine is one line of FormatJSON.
type jsonLine struct {
	TS      json.RawMessage         `json:"ts"`
	IP      string                  `json:"ip"`
	Method  string                  `json:"method"`
	Host    string                  `json:"host"`
	Path    string                  `json:"path"`
	Headers map[string]headerValues `json:"headers"`
}

// headerValues is a header's value in a JSON line: a string or an array of
// strings.
type headerValues []string

func (h *headerValues) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*h = headerValues{s}
		return nil
	}
	var a []string
	if err := json.Unmarshal(b, &a); err != nil {
		return errors.New("a header's value must be a string or an array of strings")
	}
	*h = a
	return nil
}

func (r *Reader) parseJSON(line []byte, rec *Record) error {
	var j jsonLine
	if !fastJSON(line, &j) {
		j = jsonLine{}
		if err := json.Unmarshal(line, &j); err != nil {
			return fmt.Errorf("not a JSON object: %v", err)
		}
	}
	if len(j.TS) == 0 {
		return errors.New(`no "ts"`)
	}
	t, err := parseTS(j.TS)
	if err != nil {
		return err
	}
	rec.Time = t
	if j.IP == "" {
		return errors.New(`no "ip"`)
	}
	addr, err := netip.ParseAddr(j.IP)
	if err != nil {
		return fmt.Errorf("ip %q: not an IP address", clip(j.IP))
	}
	rec.IP = addr.Unmap()
	if !token(j.Method) {
		return fmt.Errorf("method %q: want an HTTP method", clip(j.Method))
	}
	rec.Method = j.Method
	if j.Path == "" {
		return errors.New(`no "path"`)
	}
	if err := setTarget(rec, j.Path); err != nil {
		return err
	}
	if j.Host != "" {
		rec.Host = j.Host
	}
	if len(j.Headers) > 0 {
		rec.Header = make(http.Header, len(j.Headers))
		for k, v := range j.Headers {
			name := textproto.CanonicalMIMEHeaderKey(k)
			rec.Header[name] = append(rec.Header[name], v...)
		}
	}
	return nil
}

// parseTS reads a JSON line's ts: an RFC 3339 string, or Unix seconds (a
// decimal fraction read exactly).
func parseTS(raw json.RawMessage) (int64, error) {
	if raw[0] == '"' {
		var s string
		if bytes.IndexByte(raw, '\\') < 0 && len(raw) >= 2 {
			s = string(raw[1 : len(raw)-1])
		} else if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("ts: %v", err)
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return 0, fmt.Errorf("ts %q: want an RFC 3339 time or Unix seconds", clip(s))
		}
		return t.UnixNano(), nil
	}
	s := string(raw)
	bad := fmt.Errorf("ts %s: want an RFC 3339 time or Unix seconds", clip(s))
	whole, frac, _ := strings.Cut(s, ".")
	if strings.ContainsAny(s, "eE") {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f < 0 || f > math.MaxInt64/1e9 {
			return 0, bad
		}
		return int64(f * 1e9), nil
	}
	sec, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || sec < 0 || sec > math.MaxInt64/int64(time.Second)-1 {
		return 0, bad
	}
	var ns int64
	for i := 0; i < len(frac); i++ {
		c := frac[i]
		if c < '0' || c > '9' {
			return 0, bad
		}
		if i < 9 {
			ns = ns*10 + int64(c-'0')
		}
	}
	for i := len(frac); i < 9; i++ {
		ns *= 10
	}
	return sec*1e9 + ns, nil
}

// clip shortens s for an error message.
func clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
