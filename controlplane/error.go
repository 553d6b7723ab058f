package sluice

import (
	"errors"
	"fmt"

	"github.com/sluicegw/sluice/api"
)

// Error codes. Every service returns errors carrying one of these; the HTTP
// layer maps each to a status in one table.
const (
	ECONFLICT             = "ECONFLICT"             // the state does not allow it (duplicate, stale, wrong state)
	EFORBIDDEN            = "EFORBIDDEN"            // authenticated, but not allowed
	EINTERNAL             = "EINTERNAL"             // a bug or an unexpected failure; details are logged, never shown
	EINVALID              = "EINVALID"              // the input is wrong; Fields names every problem
	ENOTFOUND             = "ENOTFOUND"             // no such object
	EPRECONDITION         = "EPRECONDITION"         // If-Match did not match
	EPRECONDITIONREQUIRED = "EPRECONDITIONREQUIRED" // If-Match is required and missing
	ERATELIMITED          = "ERATELIMITED"          // too many attempts; try later
	ETOOLARGE             = "ETOOLARGE"             // the body is over the limit
	EUNAUTHORIZED         = "EUNAUTHORIZED"         // no valid credentials
	EUNAVAILABLE          = "EUNAVAILABLE"          // a dependency (Postgres, etcd) cannot be reached
	EUNSUPPORTED          = "EUNSUPPORTED"          // unsupported media type
)

// Error is a domain error: a code from the list above, a message safe to show
// to the caller, and for EINVALID every field that is wrong.
type Error struct {
	Code    string
	Message string
	Fields  api.Errors
}

// Error implements error.
func (e *Error) Error() string {
	if len(e.Fields) > 0 {
		return fmt.Sprintf("sluice error: code=%s message=%s fields=%v", e.Code, e.Message, e.Fields.Error())
	}
	return fmt.Sprintf("sluice error: code=%s message=%s", e.Code, e.Message)
}

// Errorf returns an *Error with the code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid returns an EINVALID *Error listing every field error found in err
// (see api.AsErrors), with message as its summary.
func Invalid(message string, err error) *Error {
	return &Error{Code: EINVALID, Message: message, Fields: api.AsErrors(err)}
}

// ErrorCode returns the code of the *Error inside err, "" for nil, and
// EINTERNAL for any other error.
func ErrorCode(err error) string {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the message of the *Error inside err, or a generic
// message for any other error: internal details are never shown.
func ErrorMessage(err error) string {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Message
	}
	return "internal error"
}

// ErrorFields returns the field errors of the *Error inside err, if any.
func ErrorFields(err error) api.Errors {
	var e *Error
	if errors.As(err, &e) {
		return e.Fields
	}
	return nil
}
