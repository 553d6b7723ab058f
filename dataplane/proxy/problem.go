package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/sluicegw/sluice/api"
)

// MaxHeaderBytes is the recommended http.Server.MaxHeaderBytes for the
// gateway's traffic listener (and the HTTP/2 limit H2CHandler sets). The
// proxy cannot enforce it itself: the server reads the header before any
// handler runs, and answers 431 Request Header Fields Too Large to a larger
// one (net/http allows 4 KiB of slack above the figure).
const MaxHeaderBytes = 64 << 10

// MaxRequestIDLength bounds an X-Request-Id accepted from a client.
const MaxRequestIDLength = 128

// ProblemTypePrefix starts the type URI of the gateway's problem+json bodies;
// the rest is the status text in lower case with hyphens
// ("urn:sluice:problem:bad-gateway").
const ProblemTypePrefix = "urn:sluice:problem:"

// problem is an application/problem+json body (RFC 9457).
type problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail,omitempty"`
	Instance  string `json:"instance,omitempty"`
	RequestID string `json:"requestId,omitempty"`
}

// WriteProblem answers r with status and an application/problem+json body
// {type, title, status, detail, instance, requestId}. title and detail must
// be short fixed phrases safe to show a client, never an internal error's
// text. The request id (see EnsureRequestID) is set on the response as
// X-Request-Id and named in the body; instance is "urn:sluice:request:<id>".
// A gRPC request (IsGRPC) is answered with the gRPC status GRPCCodeFor(status)
// and grpc-message "title: detail" instead (WriteGRPCStatus).
// It is the data plane's one problem writer: for the traffic port and for the
// node admin endpoint (package admin's guard, the breaker and degrade
// handlers) alike. Only rejections whose body a rule shapes are written
// elsewhere: a limit's 429 names its rule (package limit), and breaker and
// degrade fallbacks are bodies compiled with their rule.
func WriteProblem(w http.ResponseWriter, r *http.Request, status int, title, detail string) {
	WriteProblemID(w, r.Header, EnsureRequestID(nil, r), status, title, detail)
}

// WriteProblemID is WriteProblem for the request whose header is reqHeader
// and whose id is id (its reqview.View's Header() and RequestID): the writer
// for any serving stack.
func WriteProblemID(w http.ResponseWriter, reqHeader http.Header, id string, status int, title, detail string) {
	if IsGRPC(reqHeader) {
		w.Header()[api.HeaderRequestID] = []string{id}
		WriteGRPCStatus(w, reqHeader, status, GRPCCodeFor(status), title+": "+detail)
		return
	}
	slug := strings.ReplaceAll(strings.ToLower(http.StatusText(status)), " ", "-")
	if slug == "" {
		slug = strconv.Itoa(status)
	}
	body, _ := json.Marshal(problem{
		Type: ProblemTypePrefix + slug, Title: title, Status: status, Detail: detail,
		Instance: "urn:sluice:request:" + id, RequestID: id,
	})
	h := w.Header()
	h.Set("Content-Type", api.ContentTypeProblemJSON)
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h[api.HeaderRequestID] = []string{id}
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// WriteNoRoute answers a request that no route matches: 404 problem+json.
func WriteNoRoute(w http.ResponseWriter, r *http.Request) {
	WriteNoRouteID(w, r.Header, EnsureRequestID(nil, r))
}

// WriteNoRouteID is WriteNoRoute for the request whose header is reqHeader
// and whose id is id.
func WriteNoRouteID(w http.ResponseWriter, reqHeader http.Header, id string) {
	WriteProblemID(w, reqHeader, id, http.StatusNotFound, "No route", "no route matches this request")
}

// EnsureRequestID returns r's request id, setting r's X-Request-Id header
// when it has none: a client's id is kept when it is sane (one value, 1 to
// MaxRequestIDLength characters from A-Z a-z 0-9 - _ . : + / = @), and
// replaced by a generated one otherwise. Unless w is nil it also sets the
// id as w's X-Request-Id header (replacing any), so that every answer
// written to w afterwards (429, 503, 404, ...) carries it. It is
// idempotent: the integrator calls it first thing, and Forward and
// WriteProblem call it again. It modifies r.Header and is not safe for
// concurrent use on one request.
func EnsureRequestID(w http.ResponseWriter, r *http.Request) string {
	id := ""
	if v := r.Header[api.HeaderRequestID]; len(v) == 1 && validRequestID(v[0]) {
		id = v[0]
	} else {
		id = NewRequestID()
		r.Header[api.HeaderRequestID] = []string{id}
	}
	if w != nil {
		if h := w.Header(); len(h[api.HeaderRequestID]) != 1 || h[api.HeaderRequestID][0] != id {
			h[api.HeaderRequestID] = []string{id}
		}
	}
	return id
}

func validRequestID(s string) bool {
	if s == "" || len(s) > MaxRequestIDLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isUnreserved(c) || c == '~' {
			switch c {
			case '-', '_', '.', ':', '+', '/', '=', '@':
			default:
				return false
			}
		}
	}
	return true
}

var (
	idPrefix  = newIDPrefix()
	idCounter atomic.Uint64
)

func newIDPrefix() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics rather)
	return hex.EncodeToString(b[:]) + "-"
}

// NewRequestID returns a new request id: a random per-process prefix and a
// counter, unique within the process and, with overwhelming probability,
// across processes. Safe for concurrent use.
func NewRequestID() string {
	var buf [RequestIDMax]byte
	return string(AppendRequestID(buf[:0]))
}

// RequestIDMax is the longest id NewRequestID makes, in bytes.
const RequestIDMax = 16 + 1 + 13

// AppendRequestID appends a new request id (NewRequestID's) to dst.
func AppendRequestID(dst []byte) []byte {
	dst = append(dst, idPrefix...)
	return strconv.AppendUint(dst, idCounter.Add(1), 36)
}
