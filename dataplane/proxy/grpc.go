package proxy

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sluicegw/sluice/dataplane/answer"
)

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
	code, msg := answer.GRPCUnavailable, "the upstream's stream broke off"
	if timedOut {
		code, msg = answer.GRPCDeadlineExceeded, "the upstream did not finish within the deadline"
	}
	h := w.Header()
	h[http.TrailerPrefix+"Grpc-Status"] = []string{strconv.Itoa(code)}
	h[http.TrailerPrefix+"Grpc-Message"] = []string{msg}
}

// RecordStatus makes the outcome's status the HTTP status a gRPC answer of
// the gateway's stands for (see answer.StatusRecorder).
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
