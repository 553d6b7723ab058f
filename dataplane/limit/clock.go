package limit

import "github.com/sluicegw/sluice/dataplane/internal/clock"

// Now returns the production clock of every limiter: nanoseconds on the
// runtime's monotonic scale (the same clock time.Now's monotonic reading
// uses, with an arbitrary origin). It never goes backwards and is unaffected
// by wall-clock changes. Integrators pass Now() as the now argument of
// Limiter.Take and Limiter.Refund, so that every limiter shares one scale.
func Now() int64 { return clock.Now() }
