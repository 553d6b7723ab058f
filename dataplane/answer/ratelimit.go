package answer

import (
	"net/http"
	"strconv"
	"unsafe"

	"github.com/sluicegw/sluice/api"
)

// RateLimitNames is the canonical names (as http.Header keys them) of the
// RateLimit fields an admitted or refused request carries, in the order of
// RateLimitPolicy.AppendFields' values.
var RateLimitNames = [5]string{
	http.CanonicalHeaderKey(api.HeaderRateLimitPolicy),
	http.CanonicalHeaderKey(api.HeaderRateLimit),
	http.CanonicalHeaderKey(api.HeaderXRateLimitLimit),
	http.CanonicalHeaderKey(api.HeaderXRateLimitRemain),
	http.CanonicalHeaderKey(api.HeaderXRateLimitReset),
}

// RateLimitPolicy is one limit's RateLimit policy, formatted once when its
// rule compiles (NewRateLimitPolicy), so that a request's fields are the
// policy and two numbers appended to it (AppendFields).
type RateLimitPolicy struct {
	item     string // the RateLimit-Policy item: "<id>";q=<quota>[;w=<window>]
	quotedID string // the id as a Structured Fields String (RateLimit's item)
	quota    string // q, for X-RateLimit-Limit
	windowed bool   // a window (w): RateLimit carries t
}

// NewRateLimitPolicy is the policy of limit id: quota requests (q) per
// window whole seconds (w); window 0 (a concurrency limit) has no w, and
// its RateLimit no t.
func NewRateLimitPolicy(id string, quota, window int64) RateLimitPolicy {
	p := RateLimitPolicy{quotedID: strconv.Quote(id), quota: strconv.FormatInt(quota, 10), windowed: window > 0}
	p.item = p.quotedID + ";q=" + p.quota
	if window > 0 {
		p.item += ";w=" + strconv.FormatInt(window, 10)
	}
	return p
}

// AppendFields appends the values of the RateLimit fields for a decision
// with remaining requests left and reset seconds until the window resets,
// back to back, to dst:
//
//	RateLimit-Policy: "<id>";q=<quota>;w=<window seconds>
//	RateLimit: "<id>";r=<remaining>;t=<seconds until reset>
//	X-RateLimit-Limit: <quota>  X-RateLimit-Remaining: <remaining>
//	X-RateLimit-Reset: <seconds until reset>
//
// following draft-ietf-httpapi-ratelimit-headers-10 (the syntax of -08 and
// later: a Structured Fields list of items with the policy id as a String).
// A policy without a window has no w, and no t in RateLimit. The value of
// RateLimitNames[i] ends at ends[i] and starts where the one before it ends
// (the first at len(dst)). It allocates nothing when dst has room.
func (p *RateLimitPolicy) AppendFields(dst []byte, remaining, reset int64) (b []byte, ends [5]int) {
	b = append(dst, p.item...)
	ends[0] = len(b)
	// Remaining and reset are formatted once each, for both of the
	// fields that hold them.
	var num [40]byte
	rem := strconv.AppendInt(num[:0], remaining, 10)
	rst := strconv.AppendInt(num[len(rem):len(rem)], reset, 10)
	b = append(b, p.quotedID...)
	b = append(b, ";r="...)
	b = append(b, rem...)
	if p.windowed {
		b = append(b, ";t="...)
		b = append(b, rst...)
	}
	ends[1] = len(b)
	b = append(b, p.quota...)
	ends[2] = len(b)
	b = append(b, rem...)
	ends[3] = len(b)
	b = append(b, rst...)
	ends[4] = len(b)
	return b, ends
}

// SetFields writes the RateLimit fields of AppendFields into h, replacing
// any. The five values and the bytes they are cut from share one
// allocation (a fieldsBlock), not one per value: an admitted request behind
// sluicehttp.Middleware pays this on every answer.
func (p *RateLimitPolicy) SetFields(h http.Header, remaining, reset int64) {
	blk := new(fieldsBlock)
	b, ends := p.AppendFields(blk.buf[:0], remaining, reset)
	// b is blk.buf or, for an id too long for it, a slice of its own;
	// either way nothing writes to it again, so the values may be cut
	// from it without a copy.
	all := unsafe.String(unsafe.SliceData(b), len(b))
	start := 0
	for i, end := range ends {
		blk.vals[i] = all[start:end]
		start = end
	}
	vs := blk.vals[:]
	for i, name := range RateLimitNames {
		h[name] = vs[i : i+1 : i+1]
	}
}

// fieldsBlock is one answer's RateLimit values and the bytes they are cut
// from (SetFields): 192 bytes, a size class of its own. buf holds the
// fields of a policy with an id of up to 20 bytes and ten-digit quota and
// remaining (a longer one's are appended to a slice of their own).
type fieldsBlock struct {
	vals [5]string
	buf  [112]byte
}

// SetRetryAfter sets h's Retry-After to secs whole seconds, replacing any.
// A gRPC answer written after it (WriteGRPCStatus) carries it on as
// grpc-retry-pushback-ms.
func SetRetryAfter(h http.Header, secs int64) {
	h.Set(api.HeaderRetryAfter, strconv.FormatInt(secs, 10))
}
