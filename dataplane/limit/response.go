package limit

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/answer"
	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/dataplane/reqview"
	"github.com/sluicegw/sluice/dataplane/reqview/classify"
)

// ProblemType is the type URI of the problem+json body of a rejection.
const ProblemType = "urn:sluice:problem:rate-limited"

// QuotaProblemType is the type URI of a quota's rejection (algorithm
// quota): the IETF RateLimit headers draft's problem type.
const QuotaProblemType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// ceilSeconds returns d in whole seconds, rounded up, at least lo.
func ceilSeconds(d time.Duration, lo int64) int64 {
	s := (int64(d) + sec - 1) / sec
	return max(s, lo)
}

// setHeaders writes the RateLimit headers of ru's decision d into h (the
// values of Fields.Append).
func setHeaders(h http.Header, ru *rule, d Decision) {
	ru.rl.SetFields(h, max(d.Remaining, 0), ceilSeconds(d.Reset, 0))
}

// Fields is the RateLimit fields of one admitted request's decision, by
// value. An exchange that writes its answer's fields itself (the fasthttp
// engine's) takes a Fields (TakeRateLimit) and formats it as it writes its
// header (Append): nothing the exchange keeps points into the limit's
// stack, so the request allocates nothing for its fields.
type Fields struct {
	ru *rule
	d  Decision
}

// Taken reports whether f holds a decision's fields (the zero Fields holds
// none).
func (f Fields) Taken() bool { return f.ru != nil }

// Append appends the values of f's fields, back to back, to dst, in the
// order of answer.RateLimitNames (answer.RateLimitPolicy.AppendFields: the
// rule's policy, what remains and the seconds until reset).
func (f Fields) Append(dst []byte) (b []byte, ends [5]int) {
	return f.ru.rl.AppendFields(dst, max(f.d.Remaining, 0), ceilSeconds(f.d.Reset, 0))
}

// rateLimitTaker is a response writer that takes the RateLimit fields as a
// Fields value instead of through its Header map.
type rateLimitTaker interface {
	TakeRateLimit(Fields)
}

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
// A gRPC request (answer.IsGRPC on its header reqHeader) gets a gRPC answer
// instead, with the same headers: grpc-status 8 RESOURCE_EXHAUSTED and a
// grpc-message naming the rule (answer.WriteGRPCStatus).
func writeReject(w http.ResponseWriter, reqHeader http.Header, ru *rule, d Decision, requestID string) {
	if t, ok := w.(RefusalTaker); ok { // the SDK's Guard.Do: the refusal as data
		t.TakeRefusal("limit", ru.l.ID, rejectStatus(ru), time.Duration(ceilSeconds(d.RetryAfter, 1))*time.Second)
		return
	}
	h := w.Header()
	setHeaders(h, ru, d)
	retry := ceilSeconds(d.RetryAfter, 1)
	answer.SetRetryAfter(h, retry)
	if answer.IsGRPC(reqHeader) {
		answer.WriteGRPCStatus(w, reqHeader, api.DefaultLimitRejectStatus, answer.GRPCResourceExhausted,
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
	ptype := ProblemType
	if ru.l.Algorithm == api.Quota {
		ptype = QuotaProblemType
	}
	body, _ := json.Marshal(problem{
		Type:      ptype,
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
func (s *Set) logReject(v *reqview.View, ru *rule, ks *classify.Key, d Decision, now int64) {
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
		slog.String("tier", ru.tier),
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
