package limit

import (
	"time"

	"github.com/sluicegw/sluice/api"
)

// RefusalTaker is a ResponseWriter that takes a refusal as data instead of
// an HTTP answer: the in-service SDK's Guard.Do (package dataplane/sdk)
// returns it to its caller as an error. A Chain that rejects calls
// TakeRefusal in place of writing status, headers and body; kind is
// "limit", rule the limit's id, status the answer's status (429, or the
// rule's response.status) and retryAfter the Retry-After it would send,
// in whole seconds. Breakers ("breaker") and degrade plans ("degrade") are
// refused through the same method by package snapshot.
type RefusalTaker interface {
	TakeRefusal(kind, rule string, status int, retryAfter time.Duration)
}

// rejectStatus is the status a rejection by ru answers with.
func rejectStatus(ru *rule) int {
	if resp := ru.l.Response; resp != nil && resp.Status != 0 {
		return resp.Status
	}
	return api.DefaultLimitRejectStatus
}
