package proxy

import (
	"errors"
	"fmt"
)

// ErrClientStopped is how a response body streamed after ForwardFast
// returned ended when the client stopped taking it (gone, or too slow for
// the route's writeTimeout): see FastRequest.Release.
var ErrClientStopped = errors.New("the client stopped taking the response")

// EndFast is the Outcome of a ForwardFast whose body the engine streamed
// after it returned (o), once that body ended with end (FastRequest.Release):
// as Forward reports it on net/http, a body the client stopped taking makes
// the client gone (StatusClientClosed, no error: no fault of the
// upstream's), and one the upstream cut off, or whose deadline passed,
// makes the exchange Aborted with ErrAborted (and Timeout for a deadline),
// which the breaker and degrade count as a failure. The status stays the
// one the client got. A failure is logged at debug level as Forward does.
func (u *Upstream) EndFast(o Outcome, end error) Outcome {
	switch {
	case end == nil:
		return o
	case errors.Is(end, ErrClientStopped):
		o.ClientGone, o.Status, o.Err, o.Timeout = true, StatusClientClosed, nil, false
		u.log.Debug("client went away", "route", u.routeID)
		return o
	}
	o.Aborted, o.Timeout = true, o.Timeout || isTimeout(end)
	if errors.Is(end, ErrAborted) {
		o.Err = end
	} else {
		o.Err = fmt.Errorf("%w: %w", ErrAborted, end)
	}
	u.log.Debug("upstream exchange failed", "route", u.routeID, "status", o.Status,
		"timeout", o.Timeout, "aborted", true, "err", end)
	return o
}
