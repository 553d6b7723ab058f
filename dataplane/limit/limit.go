package limit

import (
	"context"
	"time"
)

// Decision is the outcome of one Take.
type Decision struct {
	// Allowed reports whether the units were taken.
	Allowed bool
	// Limit is the rule's capacity as advertised in RateLimit headers (the
	// rate per period, or the concurrency limit).
	Limit int64
	// Remaining is the number of units left for the key after this decision.
	Remaining int64
	// Reset is how long until the key's quota is fully available again (or the
	// current window ends).
	Reset time.Duration
	// RetryAfter is, when not Allowed, how long until the requested units could
	// be available; zero when Allowed.
	RetryAfter time.Duration
	// Delay is, for leaky_bucket, how long the admitted request must wait for
	// its turn before going on; zero for every other algorithm.
	Delay time.Duration
	// pool is, for a limit with reserved pools, where the units went (see
	// Decision.Pool).
	pool int8
}

// Limiter is one compiled limit rule over many keys. Implementations are safe
// for concurrent use. now is the caller's clock reading in nanoseconds on a
// monotonic scale (see Now); it is a parameter so that tests never sleep.
type Limiter interface {
	// Take tries to take cost units for key. A non-nil error means the
	// limiter's store failed (only stores outside the process fail) and the
	// Decision is the one its failure policy chose.
	Take(ctx context.Context, key string, cost int64, now int64) (Decision, error)
	// Refund returns units taken by an admitted Take: when a later limit
	// rejected the same request (so that a rejected request consumes nothing),
	// or, for concurrency limiters, when the request finished.
	Refund(ctx context.Context, key string, cost int64, now int64)
}
