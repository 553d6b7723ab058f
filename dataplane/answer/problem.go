package answer

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/sluicegw/sluice/api"
)

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
