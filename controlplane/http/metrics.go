package http

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	sluice "github.com/sluicegw/sluice/controlplane"
)

// publishResults are the results the publisher observes (its Observe
// setting, see controlplane/etcd.Publisher): the label values of
// sluice_admin_publish_attempts_total.
var publishResults = []string{"published", "retry", "failed"}

// metrics are the control plane's Prometheus metrics, in their own registry.
type metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	lag       prometheus.Histogram
	attempts  *prometheus.CounterVec
	outbox    sluice.Outbox
	mu        sync.Mutex
	statsAt   time.Time
	pending   float64
	oldestSec float64
}

func newMetrics(outbox sluice.Outbox) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), outbox: outbox}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_admin_http_requests_total",
		Help: "Admin API requests by method, route and status code."}, []string{"method", "route", "code"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_admin_http_request_duration_seconds",
		Help: "Admin API request duration.", Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}},
		[]string{"method", "route"})
	m.lag = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_admin_publish_lag_seconds",
		Help: "Time from a version's creation to its write to etcd.", Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}})
	m.attempts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_admin_publish_attempts_total",
		Help: "Attempts to write a version to etcd, by result (published, retry, failed)."}, []string{"result"})
	// Every result is exposed from start, at 0, so that an alert on
	// increase(...{result="failed"}) sees the first failure: a series that
	// appears already at 1 has no increase.
	for _, result := range publishResults {
		m.attempts.WithLabelValues(result)
	}
	m.reg.MustRegister(m.requests, m.duration, m.lag, m.attempts,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if outbox != nil {
		m.reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_admin_outbox_depth", Help: "Publications waiting to be written to etcd."},
				func() float64 { p, _ := m.stats(); return p }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_admin_outbox_oldest_pending_seconds", Help: "Age of the oldest publication waiting to be written to etcd."},
				func() float64 { _, o := m.stats(); return o }),
		)
	}
	return m
}

// stats reads the outbox at most once a second.
func (m *metrics) stats() (float64, float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if time.Since(m.statsAt) > time.Second {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if n, oldest, err := m.outbox.OutboxStats(ctx); err == nil {
			m.pending, m.oldestSec = float64(n), oldest.Seconds()
		}
		m.statsAt = time.Now()
	}
	return m.pending, m.oldestSec
}

func (m *metrics) middleware(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	method := methodLabel(c.Request.Method)
	m.requests.WithLabelValues(method, route, strconv.Itoa(c.Writer.Status())).Inc()
	m.duration.WithLabelValues(method, route).Observe(time.Since(start).Seconds())
}

// methodLabel bounds the method label: a client may send any token as a
// method, and each would be a new time series.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "OTHER"
}

func (m *metrics) handler() gin.HandlerFunc {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
	return gin.WrapH(h)
}

// Register adds collectors (other components' metrics) to the admin's
// /metrics registry.
func (s *Server) Register(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := s.metrics.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// ObservePublish records one publisher attempt; pass it as the publisher's
// Observe setting.
func (s *Server) ObservePublish(ns, result string, lag time.Duration) {
	s.metrics.attempts.WithLabelValues(result).Inc()
	if result == "published" {
		s.metrics.lag.Observe(lag.Seconds())
	}
}
