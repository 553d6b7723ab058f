package reqview

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"unicode/utf8"
)

// Messages of decision log lines, one per kind of decision.
const (
	// MsgRateLimit is a limit's rejection (or a shadow limit's would-be
	// rejection).
	MsgRateLimit = "RATE_LIMIT_DECISION"
	// MsgDegrade is a request shed by a degrade plan.
	MsgDegrade = "DEGRADE_DECISION"
	// MsgBreaker is a request refused by an open (or fully probing) breaker.
	MsgBreaker = "BREAKER_DECISION"
	// MsgIdentity is a request refused by an identity (a token present
	// but invalid, or missing where one is required); its reason is
	// logged, never the token.
	MsgIdentity = "IDENTITY_DECISION"
)

// LogDecision writes one decision line about the request v to l: msg (one of
// the Msg constants), then traceId, requestId, method, path, ip, route, rule
// and decision, then attrs. It is the one writer of decision lines, so every
// rejection, shed and breaker refusal reads the same way and can be joined
// with the upstream's traces by traceId:
//
//	level=WARN msg=RATE_LIMIT_DECISION traceId=4bf92f3577b34da6a3ce929d0e0e4736 requestId=... path=/api ip=192.0.2.1 route=api rule=per-ip decision=reject ...
//
// v may be nil (a decision taken without a request view): the request
// fields are then empty. The caller bounds the rate of lines. A nil l logs
// nothing.
func LogDecision(l *slog.Logger, level slog.Level, v *View, msg, rule, decision string, attrs ...slog.Attr) {
	if l == nil {
		return
	}
	var tv View
	ctx := context.Background()
	if v != nil {
		tv = *v
		ctx = context.WithoutCancel(v.Context())
	}
	ip := ""
	if tv.ClientIP.IsValid() {
		ip = tv.ClientIP.String()
	}
	base := [...]slog.Attr{
		slog.String("traceId", tv.Trace.TraceID()),
		slog.String("requestId", tv.RequestID),
		slog.String("method", tv.Method),
		slog.String("path", tv.Path),
		slog.String("ip", ip),
		slog.String("route", tv.RouteID),
		slog.String("rule", rule),
		slog.String("decision", decision),
	}
	l.LogAttrs(ctx, level, msg, append(base[:], attrs...)...)
}

// RateLimitKey returns the rule and the key of a limit's decision line
// (MsgRateLimit), and false for any other line: what a reader of the
// decision log (a preview's or a replay's top rejected keys) counts.
func RateLimitKey(r slog.Record) (rule, key string, ok bool) {
	if r.Message != MsgRateLimit {
		return "", "", false
	}
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "rule":
			rule = a.Value.String()
		case "key":
			key = a.Value.String()
		}
		return true
	})
	return rule, key, true
}

// KeyText is a key's text cut to at most max bytes for display: a longer key
// keeps its first bytes (whole UTF-8 characters) and a hash of the whole, so
// two long keys stay apart.
func KeyText(k string, max int) string {
	if len(k) <= max {
		return k
	}
	h := fnv.New32a()
	_, _ = io.WriteString(h, k)
	suffix := "…#" + fmt.Sprintf("%08x", h.Sum32())
	i := max - len(suffix)
	for i > 0 && !utf8.RuneStart(k[i]) {
		i--
	}
	return k[:i] + suffix
}
