// Package tracing exports OpenTelemetry traces over OTLP/HTTP for Sluice's
// binaries: the gateway's span per proxied request (package snapshot records
// it) and the control plane's spans per admin API call and per publish. It
// is the one place either binary sets tracing up: its flags (Flags), the
// exporter, the sampler, and the queue spans wait in for export.
//
// Tracing is off unless an endpoint is given (--otlp-endpoint, else
// OTEL_EXPORTER_OTLP_ENDPOINT): New then returns a nil *Provider, whose
// methods are no-ops, so the request path pays one nil check.
//
// # Sampling
//
// One rule decides for both binaries, the OpenTelemetry SDK's default
// (parent based, trace id ratio): a request that comes with a W3C
// traceparent follows its sampled flag; a trace that starts here (no
// traceparent, or an invalid one) is sampled when its trace id falls in the
// --otlp-sample-ratio share (TraceIDRatioBased's rule, so that every
// service sampling at one ratio keeps the same traces). The gateway decides
// before anything is allocated (Sampled): an unsampled request costs a few
// comparisons and no allocation.
//
// # Export
//
// Ended spans are queued for a goroutine that sends them in batches: the
// queue is bounded (QueueSize) and a span that finds it full is dropped and
// counted, as are the spans of a batch the endpoint did not take, so a slow
// or dead collector never slows or fails a request. The SDK's
// BatchSpanProcessor drops the same way but keeps its count to itself; this
// queue counts into Config.Dropped (sluice_trace_spans_dropped_total on the
// gateway, sluice_admin_trace_spans_dropped_total on the control plane).
package tracing

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/sluicegw/sluice/api/buildinfo"
)

// EnvEndpoint is the standard OpenTelemetry variable read when
// --otlp-endpoint is empty.
const EnvEndpoint = "OTEL_EXPORTER_OTLP_ENDPOINT"

// DefaultSampleRatio is --otlp-sample-ratio's default: one trace in a
// hundred of those that start at this binary. A gateway proxies tens of
// thousands of requests a second; a span each would cost more than the
// request and flood the collector. Requests whose caller sampled them are
// traced whatever the ratio.
const DefaultSampleRatio = 0.01

// DefaultQueueSize is how many ended spans wait for export before more are
// dropped.
const DefaultQueueSize = 2048

// Drop reasons, the reason label of the dropped-spans counter.
const (
	// DropQueueFull: the span ended while QueueSize spans waited.
	DropQueueFull = "queue_full"
	// DropExportFailed: the span's batch was refused or timed out.
	DropExportFailed = "export_failed"
)

// Config is one binary's tracing settings.
type Config struct {
	// Endpoint is the OTLP/HTTP base URL (http://collector:4318); spans
	// go to its path /v1/traces. Empty: EnvEndpoint's value; both empty:
	// tracing is off.
	Endpoint string
	// SampleRatio is the share of traces that start here which are
	// recorded, 0 to 1.
	SampleRatio float64
	// Service is the service.name of the binary's spans.
	Service string
	// Instance is the service.instance.id (a gateway's node id); may be empty.
	Instance string
	// QueueSize bounds the spans waiting for export (0: DefaultQueueSize).
	QueueSize int
	// Dropped counts dropped spans by reason (DropQueueFull,
	// DropExportFailed); see GatewayDropped and AdminDropped. Nil counts nothing.
	Dropped *prometheus.CounterVec
	// Logger receives export failures, at most one line a minute.
	Logger *slog.Logger
	// ExportTimeout bounds one batch's export, retries included (0: 5s).
	ExportTimeout time.Duration
	// BatchTimeout is the longest an ended span waits for its batch to
	// fill before it is sent anyway (0: 1s).
	BatchTimeout time.Duration
}

// Flags registers --otlp-endpoint, --otlp-sample-ratio and
// --otlp-queue-size on fs, into c.
func Flags(fs *flag.FlagSet, c *Config) {
	fs.StringVar(&c.Endpoint, "otlp-endpoint", "", "export OpenTelemetry traces over OTLP/HTTP to this base URL (http://collector:4318; spans go to /v1/traces); empty reads "+EnvEndpoint+", and tracing is off when both are empty")
	fs.Float64Var(&c.SampleRatio, "otlp-sample-ratio", DefaultSampleRatio, "share of the traces that start here (no traceparent from the caller) that are recorded, 0 to 1; a caller's traceparent decides for its own requests by its sampled flag")
	fs.IntVar(&c.QueueSize, "otlp-queue-size", DefaultQueueSize, "most ended spans waiting for export; more are dropped and counted (a slow or dead collector never slows requests)")
}

// dropHelp is the help of the dropped-spans counters.
const dropHelp = "OpenTelemetry spans dropped before export: the export queue was full, or the collector did not take them."

// GatewayDropped is the gateway's counter of dropped spans,
// sluice_trace_spans_dropped_total, for Config.Dropped.
func GatewayDropped() *prometheus.CounterVec {
	return dropped(prometheus.CounterOpts{Name: "sluice_trace_spans_dropped_total", Help: dropHelp})
}

// AdminDropped is the control plane's counter of dropped spans,
// sluice_admin_trace_spans_dropped_total, for Config.Dropped.
func AdminDropped() *prometheus.CounterVec {
	return dropped(prometheus.CounterOpts{Name: "sluice_admin_trace_spans_dropped_total", Help: dropHelp})
}

// dropped is a counter of dropped spans by reason, both reasons present
// (at 0) from the start. The names are literals at the callers, so that
// deploy/check can read every metric the binaries define.
func dropped(opts prometheus.CounterOpts) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(opts, []string{"reason"})
	c.WithLabelValues(DropQueueFull)
	c.WithLabelValues(DropExportFailed)
	return c
}

// endpoint is c's traces URL, "" when tracing is off.
func (c *Config) endpoint() (string, error) {
	raw, from := c.Endpoint, "--otlp-endpoint"
	if raw == "" {
		raw, from = os.Getenv(EnvEndpoint), EnvEndpoint
	}
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", from, raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("%s %q: want an http:// or https:// URL with a host (http://collector:4318)", from, raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%s %q: a base URL takes no query, fragment or user (headers go in OTEL_EXPORTER_OTLP_HEADERS)", from, raw)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	u.RawPath = ""
	return u.String(), nil
}

// Provider is one binary's tracer provider. A nil *Provider is tracing
// off: Sampled reports false, Tracer returns a no-op tracer and Shutdown
// does nothing.
type Provider struct {
	tp    *sdktrace.TracerProvider
	reqs  trace.Tracer // StartRequest's
	q     *queue
	bound uint64 // the ratio's trace-id bound (TraceIDRatioBased's)
	all   bool   // ratio ≥ 1: every root trace
}

// New sets tracing up as c says: nil, nil when no endpoint is configured.
// It does not reach the endpoint: a collector that is down only drops
// spans (counted).
func New(c Config) (*Provider, error) {
	ep, err := c.endpoint()
	if err != nil || ep == "" {
		return nil, err
	}
	if math.IsNaN(c.SampleRatio) || c.SampleRatio < 0 || c.SampleRatio > 1 {
		return nil, fmt.Errorf("--otlp-sample-ratio %v: want a number from 0 to 1", c.SampleRatio)
	}
	if c.QueueSize < 0 {
		return nil, fmt.Errorf("--otlp-queue-size %d: want 0 (the default, %d) or more", c.QueueSize, DefaultQueueSize)
	}
	if c.QueueSize == 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.ExportTimeout <= 0 {
		c.ExportTimeout = 5 * time.Second
	}
	if c.BatchTimeout <= 0 {
		c.BatchTimeout = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(ep),
		otlptracehttp.WithTimeout(c.ExportTimeout),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: 250 * time.Millisecond,
			MaxInterval: time.Second, MaxElapsedTime: c.ExportTimeout}))
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", c.Service), attribute.String("service.version", buildinfo.Version)}
	if c.Instance != "" {
		attrs = append(attrs, attribute.String("service.instance.id", c.Instance))
	}
	q := newQueue(exp, c)
	p := &Provider{q: q, all: c.SampleRatio >= 1, bound: uint64(c.SampleRatio * (1 << 63))}
	p.tp = sdktrace.NewTracerProvider(
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.SampleRatio))),
		sdktrace.WithIDGenerator(idGenerator{}),
		sdktrace.WithSpanProcessor(q),
	)
	p.reqs = p.tp.Tracer(c.Service)
	return p, nil
}

// Tracer is the named tracer of p's provider (a no-op one when p is nil).
func (p *Provider) Tracer(name string) trace.Tracer {
	if p == nil {
		return noopTracer
	}
	return p.tp.Tracer(name)
}

// TracerProvider is p's provider, for instrumentation that takes one (a
// no-op one when p is nil).
func (p *Provider) TracerProvider() trace.TracerProvider {
	if p == nil {
		return noopProvider
	}
	return p.tp
}

// Shutdown exports what is queued, within ctx, and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.tp.Shutdown(ctx)
}

// ForceFlush exports what is queued, within ctx.
func (p *Provider) ForceFlush(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.tp.ForceFlush(ctx)
}

// traceparentLen is the length of a version-00 W3C traceparent
// ("00-" 32 hex "-" 16 hex "-" 2 hex); later versions start the same way.
const traceparentLen = 55

// Sampled reports whether the request whose W3C traceparent is tp is
// recorded: root (a trace the gateway started, whatever its flags) by the
// ratio on its trace id, else by tp's sampled flag. It does not allocate.
// tp must be well formed (the gateway's reqview.Trace.Parent is); false
// otherwise.
func (p *Provider) Sampled(tp string, root bool) bool {
	if p == nil || len(tp) < traceparentLen {
		return false
	}
	if !root {
		f, ok := hexByte(tp[53], tp[54])
		return ok && f&1 == 1
	}
	if p.all {
		return true
	}
	lo, ok := hex64(tp[19:35]) // the trace id's last 8 bytes
	return ok && lo>>1 < p.bound
}

// StartRequest starts the span of a request the gateway serves, at start,
// in the trace of its traceparent tp: as a child of tp's parent (the
// caller's span; the request then goes upstream with this span's id as its
// parent id: reqview.Trace.SetParentID), or for a trace the gateway started
// (root), as the trace's root with tp's parent id as its own span id, so
// that the upstream, which is sent tp, is its child. Call it only when Sampled(tp, root); it returns nil if tp is not
// well formed.
func (p *Provider) StartRequest(tp string, root bool, name string, start time.Time, attrs ...attribute.KeyValue) trace.Span {
	if p == nil || len(tp) < traceparentLen {
		return nil
	}
	var tid trace.TraceID
	var sid trace.SpanID
	hi, ok1 := hex64(tp[3:19])
	lo, ok2 := hex64(tp[19:35])
	ps, ok3 := hex64(tp[36:52])
	flags, ok4 := hexByte(tp[53], tp[54])
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return nil
	}
	binary.BigEndian.PutUint64(tid[:8], hi)
	binary.BigEndian.PutUint64(tid[8:], lo)
	binary.BigEndian.PutUint64(sid[:], ps)
	ctx := context.Background()
	if root {
		ctx = context.WithValue(ctx, rootIDsKey{}, rootIDs{tid, sid})
	} else {
		ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags), Remote: true}))
	}
	_, span := p.reqs.Start(ctx, name, trace.WithTimestamp(start),
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	return span
}

// rootIDs are the ids a root span takes (StartRequest), passed to the id
// generator in the context.
type rootIDs struct {
	trace trace.TraceID
	span  trace.SpanID
}

type rootIDsKey struct{}

// idGenerator is the SDK's random one, but a root span started with
// rootIDs in its context takes them.
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if ids, ok := ctx.Value(rootIDsKey{}).(rootIDs); ok {
		return ids.trace, ids.span
	}
	var t trace.TraceID
	for !t.IsValid() {
		binary.BigEndian.PutUint64(t[:8], rand.Uint64())
		binary.BigEndian.PutUint64(t[8:], rand.Uint64())
	}
	return t, newSpanID()
}

func (idGenerator) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

func newSpanID() trace.SpanID {
	var s trace.SpanID
	for !s.IsValid() {
		binary.BigEndian.PutUint64(s[:], rand.Uint64())
	}
	return s
}

// hex64 reads 16 lower-case hex digits.
func hex64(s string) (uint64, bool) {
	if len(s) != 16 {
		return 0, false
	}
	var x uint64
	for i := 0; i < 16; i++ {
		d, ok := hexDigit(s[i])
		if !ok {
			return 0, false
		}
		x = x<<4 | uint64(d)
	}
	return x, true
}

func hexByte(a, b byte) (byte, bool) {
	h, ok1 := hexDigit(a)
	l, ok2 := hexDigit(b)
	return h<<4 | l, ok1 && ok2
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

var (
	noopProvider = noop.NewTracerProvider()
	noopTracer   = noopProvider.Tracer("")
	errShutdown  = errors.New("tracing: the span queue is shut down")
)
