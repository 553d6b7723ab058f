package tracing

import (
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TestSampledIsTheSDKsRule: the gateway's allocation-free decision on a
// trace it starts is the SDK's TraceIDRatioBased decision on the same id,
// so the span the SDK then starts is recorded, and services sampling at
// the same ratio keep the same traces; a caller's traceparent decides by
// its sampled flag.
func TestSampledIsTheSDKsRule(t *testing.T) {
	for _, ratio := range []float64{0, 0.01, 0.3, 0.999, 1} {
		p := &Provider{all: ratio >= 1, bound: uint64(ratio * (1 << 63))}
		sdk := sdktrace.TraceIDRatioBased(ratio)
		sampled := 0
		for range 20000 {
			var tid trace.TraceID
			for i := range tid {
				tid[i] = byte(rand.Uint32())
			}
			tp := "00-" + hex.EncodeToString(tid[:]) + "-00f067aa0ba902b7-01"
			want := sdk.ShouldSample(sdktrace.SamplingParameters{TraceID: tid}).Decision == sdktrace.RecordAndSample
			if got := p.Sampled(tp, true); got != want {
				t.Fatalf("ratio %v, %s: Sampled %v, the SDK %v", ratio, tp, got, want)
			}
			if want {
				sampled++
			}
			if !p.Sampled(tp, false) || p.Sampled(tp[:53]+"00", false) {
				t.Fatalf("%s: a caller's flags must decide", tp)
			}
		}
		t.Logf("ratio %v: %d of 20000 sampled", ratio, sampled)
	}
	var off *Provider
	if off.Sampled("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false) {
		t.Error("tracing off sampled a request")
	}
	p := &Provider{bound: 1 << 62}
	if n := testing.AllocsPerRun(100, func() { p.Sampled("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true) }); n != 0 {
		t.Errorf("Sampled allocates %v times", n)
	}
}

func TestConfigErrors(t *testing.T) {
	t.Setenv(EnvEndpoint, "")
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{Endpoint: "collector:4318"}, "want an http:// or https:// URL"},
		{Config{Endpoint: "ftp://collector"}, "want an http:// or https:// URL"},
		{Config{Endpoint: "http://collector:4318?x=1"}, "takes no query"},
		{Config{Endpoint: "http://u:p@collector:4318"}, "takes no query, fragment or user"},
		{Config{Endpoint: "http://collector:4318", SampleRatio: 1.5}, "--otlp-sample-ratio 1.5"},
		{Config{Endpoint: "http://collector:4318", QueueSize: -1}, "--otlp-queue-size -1"},
	} {
		_, err := New(tc.c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.c, err, tc.want)
		}
	}
	if p, err := New(Config{}); p != nil || err != nil {
		t.Errorf("no endpoint: %v, %v; want tracing off", p, err)
	}
	t.Setenv(EnvEndpoint, "http://collector:4318/base/")
	c := Config{}
	if ep, err := c.endpoint(); err != nil || ep != "http://collector:4318/base/v1/traces" {
		t.Errorf("from %s: %q, %v", EnvEndpoint, ep, err)
	}
	c.Endpoint = "https://flag:4318"
	if ep, _ := c.endpoint(); ep != "https://flag:4318/v1/traces" {
		t.Errorf("the flag must win over %s: %q", EnvEndpoint, ep)
	}
}
