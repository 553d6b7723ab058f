package limit

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"
	"unsafe"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/dataplane/proxy"
	"github.com/sluicegw/sluice/dataplane/reqview"
)

// ProblemType is the type URI of the problem+json body of a rejection.
const ProblemType = "urn:sluice:problem:rate-limited"

// Canonical forms of the header names, as http.Header keys them.
var (
	hdrPolicy     = http.CanonicalHeaderKey(api.HeaderRateLimitPolicy)
	hdrRateLimit  = http.CanonicalHeaderKey(api.HeaderRateLimit)
	hdrXLimit     = http.CanonicalHeaderKey(api.HeaderXRateLimitLimit)
	hdrXRemaining = http.CanonicalHeaderKey(api.HeaderXRateLimitRemain)
	hdrXReset     = http.CanonicalHeaderKey(api.HeaderXRateLimitReset)
)

// ceilSeconds returns d in whole seconds, rounded up, at least lo.
func ceilSeconds(d time.Duration, lo int64) int64 {
	s := (int64(d) + sec - 1) / sec
	return max(s, lo)
}

// setHeaders writes the RateLimit headers of ru's decision d:
//
//	RateLimit-Policy: "<id>";q=<quota>;w=<window seconds>
//	RateLimit: "<id>";r=<remaining>;t=<seconds until reset>
//	X-RateLimit-Limit: <quota>  X-RateLimit-Remaining: <remaining>
//	X-RateLimit-Reset: <seconds until reset>
//
// following draft-ietf-httpapi-ratelimit-headers-10 (the syntax of -08 and
// later: a Structured Fields list of items with the policy id as a String).
// Concurrency limits have no window: no w, and no t in RateLimit.
func setHeaders(h http.Header, ru *rule, d Decision) {
	// One string holds the RateLimit value; remaining and reset are
	// substrings of it, so the five values cost two allocations (that
	// string and their one backing array), not five.
	var buf [96]byte
	b, r0, r1, t0 := appendRateLimit(buf[:0], ru, d)
	all := string(b)
	remaining, reset := all[r0:r1], all[t0:]
	rateLimit := all
	if ru.window == 0 {
		rateLimit = all[:r1] // no window: no t
	}
	vals := [5]string{ru.policy, rateLimit, ru.quotaStr, remaining, reset}
	vs := vals[:]
	h[hdrPolicy] = vs[0:1:1]
	h[hdrRateLimit] = vs[1:2:2]
	h[hdrXLimit] = vs[2:3:3]
	h[hdrXRemaining] = vs[3:4:4]
	h[hdrXReset] = vs[4:5:5]
}

// appendRateLimit appends the RateLimit value of ru's decision d with its t
// (`"<id>";r=<remaining>;t=<reset>`) to dst; remaining is b[r0:r1] and
// reset starts at t0.
func appendRateLimit(dst []byte, ru *rule, d Decision) (b []byte, r0, r1, t0 int) {
	b = append(dst, ru.quotedID...)
	b = append(b, ";r="...)
	r0 = len(b)
	b = strconv.AppendInt(b, max(d.Remaining, 0), 10)
	r1 = len(b)
	b = append(b, ";t="...)
	t0 = len(b)
	return strconv.AppendInt(b, ceilSeconds(d.Reset, 0), 10), r0, r1, t0
}

// headerAdder is a response writer that takes header fields as bytes,
// copied at once, beside its Header map (the fasthttp engine's exchange,
// whose fields go to the engine's response without a map in between).
type headerAdder interface {
	AddHeader(name string, value []byte)
}

// addHeaders is setHeaders for a headerAdder: the same fields, built on the
// stack, with no allocation.
func addHeaders(a headerAdder, ru *rule, d Decision) {
	var buf [96]byte
	b, r0, r1, t0 := appendRateLimit(buf[:0], ru, d)
	rateLimit := b
	if ru.window == 0 {
		rateLimit = b[:r1] // no window: no t
	}
	a.AddHeader(hdrPolicy, s2b(ru.policy))
	a.AddHeader(hdrRateLimit, rateLimit)
	a.AddHeader(hdrXLimit, s2b(ru.quotaStr))
	a.AddHeader(hdrXRemaining, b[r0:r1])
	a.AddHeader(hdrXReset, b[t0:])
}

// s2b is the bytes of s without a copy, for AddHeader, which copies them.
func s2b(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// problem is the application/problem+json body (RFC 9457) of a rejection.
type problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail"`
	Rule      string `json:"rule"`
	RequestID string `json:"requestId,omitempty"`
}

// writeReject writes the rejection of ru: its status (429 unless the rule's
// response overrides it), Retry-After in whole seconds rounded up (at least
// 1), the RateLimit headers, and either the rule's body with its content type
// (text/plain when unset) or a problem+json body naming the rule and the
// request id.
//
// A gRPC request (proxy.IsGRPC on its header reqHeader) gets a gRPC answer
// instead, with the same headers: grpc-status 8 RESOURCE_EXHAUSTED and a
// grpc-message naming the rule (proxy.WriteGRPCStatus).
func writeReject(w http.ResponseWriter, reqHeader http.Header, ru *rule, d Decision, requestID string) {
	h := w.Header()
	setHeaders(h, ru, d)
	retry := ceilSeconds(d.RetryAfter, 1)
	h.Set(api.HeaderRetryAfter, strconv.FormatInt(retry, 10))
	if proxy.IsGRPC(reqHeader) {
		proxy.WriteGRPCStatus(w, reqHeader, api.DefaultLimitRejectStatus, proxy.GRPCResourceExhausted,
			fmt.Sprintf("limit %q rejected the request; retry after %d s", ru.l.ID, retry))
		return
	}
	status := api.DefaultLimitRejectStatus
	if resp := ru.l.Response; resp != nil {
		if resp.Status != 0 {
			status = resp.Status
		}
		if resp.Body != "" {
			ct := resp.ContentType
			if ct == "" {
				ct = "text/plain; charset=utf-8"
			}
			h.Set("Content-Type", ct)
			h.Set("Content-Length", strconv.Itoa(len(resp.Body)))
			w.WriteHeader(status)
			_, _ = w.Write([]byte(resp.Body))
			return
		}
	}
	body, _ := json.Marshal(problem{
		Type:      ProblemType,
		Title:     http.StatusText(status),
		Status:    status,
		Detail:    fmt.Sprintf("limit %q rejected the request; retry after %d s", ru.l.ID, retry),
		Rule:      ru.l.ID,
		RequestID: requestID,
	})
	h.Set("Content-Type", api.ContentTypeProblemJSON)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// logReject logs one rejection (or shadow rejection) as a decision line
// (reqview.LogDecision: trace id, request id, path, client, rule, then the
// key as text, the limit and what remains) if the log bucket has a token,
// else counts a dropped line. An attack cannot flood the log: at most
// LogBurst lines at once and LogsPerSecond after that, across every limit
// and every breaker refusal (LogDecision).
func (s *Set) logReject(v *reqview.View, ru *rule, ks *Key, d Decision, now int64) {
	if s.logger == nil {
		return
	}
	if !s.logs.TakeHash(0, 1, now).Allowed {
		inc(s.drops)
		return
	}
	level, decision := slog.LevelWarn, metrics.DecisionReject
	if ru.l.Shadow {
		level, decision = slog.LevelInfo, metrics.DecisionShadowDeny
	}
	reqview.LogDecision(s.logger, level, v, reqview.MsgRateLimit, ru.l.ID, decision,
		slog.String("key", ks.Text(v)),
		slog.Int64("limit", d.Limit),
		slog.Int64("remaining", max(d.Remaining, 0)),
		slog.Duration("retry_after", d.RetryAfter),
		slog.Bool("shadow", ru.l.Shadow),
		slog.String("class", s.cls.ID(v.Class)),
		slog.String("variant", ru.variant),
	)
}

// LogDecision writes a decision line that is not a limit's (a breaker
// refusal: reqview.MsgBreaker) through the same log bucket as the limits'
// rejections, so that together they stay within LogsPerSecond. A nil Set
// or a Set without a logger logs nothing.
func (s *Set) LogDecision(v *reqview.View, level slog.Level, msg, rule, decision string, attrs ...slog.Attr) {
	if s == nil || s.logger == nil {
		return
	}
	if !s.logs.TakeHash(0, 1, s.now()).Allowed {
		inc(s.drops)
		return
	}
	reqview.LogDecision(s.logger, level, v, msg, rule, decision, attrs...)
}
