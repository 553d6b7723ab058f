package tracing

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// maxBatch is the most spans one export sends.
const maxBatch = 512

// queue is the span processor: ended, sampled spans go into a bounded
// channel (OnEnd never blocks: a full queue drops the span and counts it),
// and one goroutine exports them in batches of up to maxBatch, or what has
// waited BatchTimeout.
type queue struct {
	exp     sdktrace.SpanExporter
	ch      chan sdktrace.ReadOnlySpan
	full    prometheus.Counter // nil: not counted
	failed  prometheus.Counter
	timeout time.Duration
	every   time.Duration
	log     func(error)

	flush chan chan struct{} // a ForceFlush's request, answered once sent
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

func newQueue(exp sdktrace.SpanExporter, c Config) *queue {
	q := &queue{exp: exp, ch: make(chan sdktrace.ReadOnlySpan, c.QueueSize), timeout: c.ExportTimeout, every: c.BatchTimeout,
		flush: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	if c.Dropped != nil {
		q.full, q.failed = c.Dropped.WithLabelValues(DropQueueFull), c.Dropped.WithLabelValues(DropExportFailed)
	}
	var last time.Time
	q.log = func(err error) { // on the export goroutine only
		if now := time.Now(); now.Sub(last) >= time.Minute {
			last = now
			c.Logger.Warn("OTLP export failed; spans dropped", "error", err)
		}
	}
	go q.run()
	return q
}

func (q *queue) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues s for export, or drops it (counted) when the queue is full.
func (q *queue) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	select {
	case q.ch <- s:
	default:
		if q.full != nil {
			q.full.Inc()
		}
	}
}

func (q *queue) run() {
	defer close(q.done)
	batch := make([]sdktrace.ReadOnlySpan, 0, maxBatch)
	t := time.NewTicker(q.every)
	defer t.Stop()
	send := func() {
		if len(batch) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
		err := q.exp.ExportSpans(ctx, batch)
		cancel()
		if err != nil {
			if q.failed != nil {
				q.failed.Add(float64(len(batch)))
			}
			q.log(err)
		}
		clear(batch)
		batch = batch[:0]
	}
	drain := func() {
		for {
			select {
			case s := <-q.ch:
				if batch = append(batch, s); len(batch) == maxBatch {
					send()
				}
			default:
				send()
				return
			}
		}
	}
	for {
		select {
		case s := <-q.ch:
			if batch = append(batch, s); len(batch) == maxBatch {
				send()
			}
		case <-t.C:
			send()
		case ack := <-q.flush:
			drain()
			close(ack)
		case <-q.stop:
			drain()
			return
		}
	}
}

// ForceFlush exports every queued span, within ctx.
func (q *queue) ForceFlush(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case q.flush <- ack:
	case <-q.done:
		return errShutdown
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown exports what is queued and stops the exporter, within ctx.
func (q *queue) Shutdown(ctx context.Context) error {
	q.once.Do(func() { close(q.stop) })
	select {
	case <-q.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return q.exp.Shutdown(ctx)
}
