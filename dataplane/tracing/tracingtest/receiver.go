// Package tracingtest is an in-process OTLP/HTTP trace receiver for tests:
// a real HTTP server that decodes each POST /v1/traces body as an
// ExportTraceServiceRequest with the official OTLP protobuf types, and
// hands the spans to the test.
package tracingtest

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span with its resource's attributes.
type Span struct {
	*tracepb.Span
	Resource map[string]string
}

// TraceID is the span's trace id in hex.
func (s Span) TraceID() string { return hex.EncodeToString(s.Span.TraceId) }

// SpanID is the span's id in hex.
func (s Span) SpanID() string { return hex.EncodeToString(s.Span.SpanId) }

// ParentID is the span's parent id in hex, "" for a root span.
func (s Span) ParentID() string { return hex.EncodeToString(s.Span.ParentSpanId) }

// Attr is the span attribute key's value as text ("" when absent); a list
// is its values joined by ",".
func (s Span) Attr(key string) string { return attrText(s.Span.Attributes, key) }

func attrText(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			return valueText(kv.Value)
		}
	}
	return ""
}

func valueText(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return itoa(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		if x.BoolValue {
			return "true"
		}
		return "false"
	case *commonpb.AnyValue_ArrayValue:
		out := ""
		for i, e := range x.ArrayValue.Values {
			if i > 0 {
				out += ","
			}
			out += valueText(e)
		}
		return out
	}
	return ""
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// Receiver is a running OTLP/HTTP receiver.
type Receiver struct {
	// URL is the base URL to give as --otlp-endpoint.
	URL string

	srv   *httptest.Server
	mu    sync.Mutex
	spans []Span
	more  chan struct{} // closed and replaced when spans arrive
	bad   []string
}

// Start starts a receiver, closed when t ends.
func Start(t testing.TB) *Receiver {
	r := &Receiver{more: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	r.URL = r.srv.URL
	t.Cleanup(r.srv.Close)
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		r.fail(req.Method + " " + req.URL.Path + " " + req.Header.Get("Content-Type"))
		http.Error(w, "want POST /v1/traces application/x-protobuf", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(req.Body)
	var msg coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &msg)
	}
	if err != nil {
		r.fail(err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range msg.ResourceSpans {
		res := map[string]string{}
		for _, kv := range rs.GetResource().GetAttributes() {
			res[kv.Key] = valueText(kv.Value)
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				got = append(got, Span{Span: s, Resource: res})
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	close(r.more)
	r.more = make(chan struct{})
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *Receiver) fail(what string) {
	r.mu.Lock()
	r.bad = append(r.bad, what)
	r.mu.Unlock()
}

// Spans is every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Wait returns the first span received for which match is true, waiting
// up to timeout; it fails t when none came, or when a request the receiver
// could not decode came.
func (r *Receiver) Wait(t testing.TB, timeout time.Duration, match func(Span) bool) Span {
	t.Helper()
	deadline := time.After(timeout)
	for {
		r.mu.Lock()
		bad := append([]string(nil), r.bad...)
		more := r.more
		for _, s := range r.spans {
			if match(s) {
				r.mu.Unlock()
				return s
			}
		}
		r.mu.Unlock()
		if len(bad) > 0 {
			t.Fatalf("the OTLP receiver got requests it could not decode: %v", bad)
		}
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("no matching span within %s; received %d spans", timeout, len(r.Spans()))
			return Span{}
		}
	}
}
