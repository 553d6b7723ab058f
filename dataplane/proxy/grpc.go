package proxy

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicegw/sluice/api"
)

// gRPC status codes (google.golang.org/grpc/codes) the gateway answers with.
const (
	GRPCUnknown           = 2
	GRPCInvalidArgument   = 3
	GRPCDeadlineExceeded  = 4
	GRPCPermissionDenied  = 7
	GRPCResourceExhausted = 8
	GRPCUnimplemented     = 12
	GRPCInternal          = 13
	GRPCUnavailable       = 14
	GRPCUnauthenticated   = 16
)

// IsGRPC reports whether a request with header h is a gRPC request: its Content-Type is
// application/grpc, alone or with a subtype or parameters
// (application/grpc+proto, application/grpc-web+json; charset=...), in any
// case. The gateway's own answers to such requests are gRPC answers
// (WriteGRPCStatus), since a gRPC client cannot read problem+json.
func IsGRPC(h http.Header) bool {
	v := h["Content-Type"]
	if len(v) == 0 {
		return false
	}
	ct := v[0]
	const p = "application/grpc"
	if len(ct) < len(p) || !strings.EqualFold(ct[:len(p)], p) {
		return false
	}
	if len(ct) == len(p) {
		return true
	}
	switch ct[len(p)] {
	case '+', ';', '-', ' ':
		return true
	}
	return false
}

// GRPCCodeFor is the one table from the HTTP status of an answer the
// gateway writes itself to the gRPC status it stands for: 429 →
// RESOURCE_EXHAUSTED, 502 and 503 → UNAVAILABLE, 504 and 408 →
// DEADLINE_EXCEEDED, 404 → UNIMPLEMENTED (no route: no such method), 400 →
// INVALID_ARGUMENT, 401 → UNAUTHENTICATED, 403 → PERMISSION_DENIED; other
// 4xx UNKNOWN and other 5xx INTERNAL (after the gRPC project's
// http-grpc-status-mapping). Limits, breakers and degrade name their code
// themselves: a limit is RESOURCE_EXHAUSTED and a breaker or degrade
// UNAVAILABLE whatever status their rule sets.
func GRPCCodeFor(status int) int {
	switch status {
	case http.StatusTooManyRequests:
		return GRPCResourceExhausted
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		return GRPCUnavailable
	case http.StatusGatewayTimeout, http.StatusRequestTimeout:
		return GRPCDeadlineExceeded
	case http.StatusNotFound:
		return GRPCUnimplemented
	case http.StatusBadRequest:
		return GRPCInvalidArgument
	case http.StatusUnauthorized:
		return GRPCUnauthenticated
	case http.StatusForbidden:
		return GRPCPermissionDenied
	}
	if status >= 500 {
		return GRPCInternal
	}
	return GRPCUnknown
}

// StatusRecorder is a ResponseWriter that records the status of the answer
// for metrics and outcomes. A gRPC answer goes out as HTTP 200;
// WriteGRPCStatus then tells such a writer the HTTP status the answer
// stands for (429, 503, 504...), so that sluice_requests_total and the
// breakers see a rejection as one.
type StatusRecorder interface {
	RecordStatus(code int)
}

// WriteGRPCStatus answers the gRPC request r in the Trailers-Only form:
// HTTP 200, the request's gRPC content type, grpc-status code and
// grpc-message msg (percent-encoded as the gRPC spec asks), with no body;
// status is the HTTP status the answer stands for (see StatusRecorder).
// Headers already set on w (X-Request-Id, Retry-After, RateLimit) go along
// as response metadata; a Retry-After also becomes grpc-retry-pushback-ms,
// which a client with a retry policy honours. msg must be a short fixed
// phrase safe to show a client, such as one naming the rule.
func WriteGRPCStatus(w http.ResponseWriter, reqHeader http.Header, status, code int, msg string) {
	h := w.Header()
	ct := "application/grpc"
	if v := reqHeader["Content-Type"]; len(v) > 0 {
		ct, _, _ = strings.Cut(v[0], ";")
		ct = strings.TrimSpace(ct)
	}
	h["Content-Type"] = []string{ct}
	delete(h, "Content-Length")
	if ra := h.Get(api.HeaderRetryAfter); ra != "" {
		if s, err := strconv.ParseInt(ra, 10, 64); err == nil && s >= 0 {
			h["Grpc-Retry-Pushback-Ms"] = []string{strconv.FormatInt(s*1000, 10)}
		}
	}
	h["Grpc-Status"] = []string{strconv.Itoa(code)}
	if msg != "" {
		h["Grpc-Message"] = []string{encodeGRPCMessage(msg)}
	}
	w.WriteHeader(http.StatusOK)
	if sr, ok := w.(StatusRecorder); ok {
		sr.RecordStatus(status)
	}
}

// encodeGRPCMessage percent-encodes what the gRPC spec does not allow raw
// in grpc-message: bytes outside printable ASCII, and '%'.
func encodeGRPCMessage(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '%' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+16)
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '%' {
			b = append(b, '%', hex[c>>4], hex[c&15])
		} else {
			b = append(b, c)
		}
	}
	return string(b)
}

// maxGRPCTimeoutDigits is the most digits a grpc-timeout value may have
// (the gRPC spec's); longer values are read as no deadline of the client's.
const maxGRPCTimeoutDigits = 8

// parseGRPCTimeout reads a grpc-timeout header value: 1 to 8 ASCII digits
// and a unit (H, M, S, m, u, n). ok is false for anything else.
func parseGRPCTimeout(v string) (d time.Duration, ok bool) {
	if len(v) < 2 || len(v) > maxGRPCTimeoutDigits+1 {
		return 0, false
	}
	n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
	if err != nil || n < 0 || v[0] == '+' || v[0] == '-' {
		return 0, false
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, false
	}
	if n > int64(time.Duration(1<<63-1)/unit) {
		return 0, false
	}
	return time.Duration(n) * unit, true
}

// formatGRPCTimeout writes d as a grpc-timeout value, in milliseconds
// (rounded up, at least 1m) so that it fits in 8 digits for any route
// timeout (at most 1h).
func formatGRPCTimeout(d time.Duration) string {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return strconv.FormatInt(max(int64(ms), 1), 10) + "m"
}

// grpcTimeout bounds a gRPC exchange: the shorter of the route's timeout
// and the client's grpc-timeout. It writes that bound into r's
// grpc-timeout, so that the upstream learns the deadline, shortened by the
// route's when that is shorter; an unreadable grpc-timeout is replaced by
// the route's. It reports whether the client's deadline is the bound.
func grpcTimeout(r *http.Request, route time.Duration) (time.Duration, bool) {
	if v := r.Header["Grpc-Timeout"]; len(v) == 1 {
		if d, ok := parseGRPCTimeout(v[0]); ok && d < route {
			return d, true
		}
	}
	r.Header["Grpc-Timeout"] = []string{formatGRPCTimeout(route)}
	return route, false
}

// clientDeadlineDetail is the grpc-message detail of a call that ran out of
// the client's own deadline before the upstream answered.
const clientDeadlineDetail = "the upstream did not answer within the client's deadline (grpc-timeout)"

// endGRPC ends a gRPC response that was cut off after its header went out
// (the route's timeout fired mid-stream, or the upstream's stream broke)
// with trailers, as a gRPC server would, instead of a reset: grpc-status
// DEADLINE_EXCEEDED for a timeout, UNAVAILABLE otherwise. The upstream's own
// trailers never came (ReverseProxy copies them after the body).
func endGRPC(w http.ResponseWriter, timedOut bool) {
	code, msg := GRPCUnavailable, "the upstream's stream broke off"
	if timedOut {
		code, msg = GRPCDeadlineExceeded, "the upstream did not finish within the deadline"
	}
	h := w.Header()
	h[http.TrailerPrefix+"Grpc-Status"] = []string{strconv.Itoa(code)}
	h[http.TrailerPrefix+"Grpc-Message"] = []string{msg}
}

// RecordStatus makes the outcome's status the HTTP status a gRPC answer of
// the gateway's stands for (see StatusRecorder).
func (rec *recorder) RecordStatus(code int) { rec.status = code }

// pastDue reports whether the exchange's deadline (the route's timeout, or
// the gRPC deadline the upstream was given) has passed: an exchange that
// fails at that moment fails because of the deadline, as a timeout, even
// when the gateway's own timer has not fired yet — a gRPC server resets the
// stream when its deadline expires, and on the fasthttp engine's bridge the
// client's body read stops at the route's deadline (fastReqBody). It marks
// the exchange timed out when so.
func (rec *recorder) pastDue() bool {
	if rec.due.IsZero() || time.Now().Before(rec.due) {
		return false
	}
	rec.timedOut.Store(true)
	return true
}
