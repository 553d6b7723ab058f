package snapshot

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// codeCounters caches one route's sluice_requests_total children by status
// code, so the request path increments a counter without hashing label values.
type codeCounters struct {
	vec    *prometheus.CounterVec
	route  string
	byCode *[500]atomic.Pointer[prometheus.Counter] // codes 100..599
}

func newCodeCounters(vec *prometheus.CounterVec, route string) codeCounters {
	return codeCounters{vec: vec, route: route, byCode: new([500]atomic.Pointer[prometheus.Counter])}
}

func (c codeCounters) inc(code int) {
	if code < 100 || code > 599 {
		c.vec.WithLabelValues(c.route, strconv.Itoa(code)).Inc()
		return
	}
	slot := &c.byCode[code-100]
	p := slot.Load()
	if p == nil {
		ctr := c.vec.WithLabelValues(c.route, strconv.Itoa(code))
		slot.CompareAndSwap(nil, &ctr)
		p = slot.Load()
	}
	(*p).Inc()
}
