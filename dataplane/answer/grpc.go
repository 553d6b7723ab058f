package answer

import (
	"net/http"
	"strconv"
	"strings"

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
