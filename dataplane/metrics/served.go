package metrics

import (
	"sort"
	"sync/atomic"
)

// durationBuckets are the upper bounds, in seconds, of
// sluice_request_duration_seconds and of Served's latency counts.
var durationBuckets = [...]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// Served counts the requests a node answers, where each one finishes (the
// snapshot's record step, and the node's own 508s), for the node's
// last-minute figures (rate, reject share, p99) in its registration: a
// sampler reads these totals instead of gathering the Prometheus registry.
// It counts what sluice_requests_total and sluice_request_duration_seconds
// count, in totals over every route. The zero value is ready; safe for
// concurrent use. A request costs one atomic add (two when rejected).
type Served struct {
	// byBucket[i] counts the requests with a duration observed in bucket i
	// (not cumulative; the last one is +Inf).
	byBucket [len(durationBuckets) + 1]atomic.Uint64
	_        [64]byte // keep the request path's lines apart
	// noDuration counts requests answered before a route (400, 404, 508),
	// which sluice_request_duration_seconds does not observe either.
	noDuration atomic.Uint64
	_          [56]byte
	rejected   atomic.Uint64 // answered 429 or 503
}

// Record counts one request answered with code after seconds.
func (s *Served) Record(code int, seconds float64) {
	// Prometheus's rule: the first bucket whose upper bound is >= seconds.
	i := sort.SearchFloat64s(durationBuckets[:], seconds)
	s.byBucket[i].Add(1)
	if code == 429 || code == 503 {
		s.rejected.Add(1)
	}
}

// Count counts one request answered with code and no duration observed.
func (s *Served) Count(code int) {
	s.noDuration.Add(1)
	if code == 429 || code == 503 {
		s.rejected.Add(1)
	}
}

// ServedTotals are Served's counts at one moment.
type ServedTotals struct {
	Total    uint64 // every request counted
	Rejected uint64 // those answered 429 or 503
	// Cumulative[i] counts the requests with a duration of at most
	// Bounds[i] seconds; Cumulative has one more element, +Inf, the
	// requests with a duration.
	Cumulative []uint64
	Bounds     []float64
}

// Totals returns the counts so far. Each count is read atomically, not all
// of them at one instant: a request finishing meanwhile may be in one count
// and not yet in another.
func (s *Served) Totals() ServedTotals {
	t := ServedTotals{Cumulative: make([]uint64, len(s.byBucket)), Bounds: durationBuckets[:]}
	var sum uint64
	for i := range s.byBucket {
		sum += s.byBucket[i].Load()
		t.Cumulative[i] = sum
	}
	t.Rejected = s.rejected.Load()
	t.Total = sum + s.noDuration.Load()
	return t
}
