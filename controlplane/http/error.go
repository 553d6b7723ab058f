package http

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

// statusOf is the one table from domain error codes to HTTP statuses.
var statusOf = map[string]int{
	sluice.EINVALID:              http.StatusBadRequest,
	sluice.EUNAUTHORIZED:         http.StatusUnauthorized,
	sluice.EFORBIDDEN:            http.StatusForbidden,
	sluice.ENOTFOUND:             http.StatusNotFound,
	sluice.ECONFLICT:             http.StatusConflict,
	sluice.EPRECONDITION:         http.StatusPreconditionFailed,
	sluice.ETOOLARGE:             http.StatusRequestEntityTooLarge,
	sluice.EUNSUPPORTED:          http.StatusUnsupportedMediaType,
	sluice.EPRECONDITIONREQUIRED: http.StatusPreconditionRequired,
	sluice.ERATELIMITED:          http.StatusTooManyRequests,
	sluice.EINTERNAL:             http.StatusInternalServerError,
	sluice.EUNAVAILABLE:          http.StatusServiceUnavailable,
}

// StatusOf returns the HTTP status of a domain error code (500 for an
// unknown one).
func StatusOf(code string) int {
	if s, ok := statusOf[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Problem is an RFC 9457 problem document, with the domain error code and,
// for EINVALID, every field that is wrong.
type Problem struct {
	Type      string           `json:"type"`
	Title     string           `json:"title"`
	Status    int              `json:"status"`
	Detail    string           `json:"detail,omitempty"`
	Code      string           `json:"code"`
	Errors    []api.FieldError `json:"errors,omitempty"`
	RequestID string           `json:"requestId,omitempty"`
}

// ProblemContentType is the media type of every error response.
const ProblemContentType = "application/problem+json"

// fail writes err as a problem document and aborts the request. Internal
// errors are logged with the request id and shown only as "internal error".
func (s *Server) fail(c *gin.Context, err error) {
	s.failStatus(c, StatusOf(sluice.ErrorCode(err)), err)
}

func (s *Server) failStatus(c *gin.Context, status int, err error) {
	code := sluice.ErrorCode(err)
	rid := c.GetString(ctxRequestID)
	if code == sluice.EINTERNAL {
		s.s.Logger.Error("internal error", "requestId", rid, "method", c.Request.Method, "path", c.Request.URL.Path, "err", err)
	}
	p := Problem{Type: "https://sluice.dev/problems/" + code, Title: http.StatusText(status), Status: status,
		Detail: sluice.ErrorMessage(err), Code: code, Errors: sluice.ErrorFields(err), RequestID: rid}
	switch status {
	case http.StatusServiceUnavailable:
		c.Header("Retry-After", "1")
	case http.StatusTooManyRequests:
		if ra := c.GetInt(ctxRetryAfter); ra > 0 {
			c.Header("Retry-After", strconv.Itoa(ra))
		}
	}
	b, _ := json.Marshal(p)
	c.Data(status, ProblemContentType, b)
	c.Abort()
}
