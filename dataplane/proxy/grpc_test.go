package proxy

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
)

func TestIsGRPC(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ct   string
		want bool
	}{
		{"application/grpc", true},
		{"application/grpc+proto", true},
		{"Application/GRPC+json", true},
		{"application/grpc; charset=utf-8", true},
		{"application/grpc-web+proto", true},
		{"application/grpcx", false},
		{"application/json", false},
		{"", false},
		{"application/grp", false},
	}
	for _, tt := range tests {
		t.Run(tt.ct, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("POST", "/s/M", nil)
			if tt.ct != "" {
				r.Header.Set("Content-Type", tt.ct)
			}
			if got := IsGRPC(r.Header); got != tt.want {
				t.Fatalf("IsGRPC(%q) = %v", tt.ct, got)
			}
		})
	}
}

func TestGRPCCodeFor(t *testing.T) {
	t.Parallel()
	tests := []struct{ status, code int }{
		{429, GRPCResourceExhausted}, {502, GRPCUnavailable}, {503, GRPCUnavailable}, {504, GRPCDeadlineExceeded},
		{408, GRPCDeadlineExceeded}, {404, GRPCUnimplemented}, {400, GRPCInvalidArgument}, {401, GRPCUnauthenticated},
		{403, GRPCPermissionDenied}, {508, GRPCInternal}, {500, GRPCInternal}, {418, GRPCUnknown},
	}
	for _, tt := range tests {
		if got := GRPCCodeFor(tt.status); got != tt.code {
			t.Errorf("GRPCCodeFor(%d) = %d, want %d", tt.status, got, tt.code)
		}
	}
}

// TestWriteProblemGRPC: the one problem writer answers gRPC requests in
// the Trailers-Only form, with the status it stands for recorded.
func TestWriteProblemGRPC(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("POST", "/s/M", nil)
	r.Header.Set("Content-Type", "application/grpc+proto")
	w := httptest.NewRecorder()
	rec := &recordingWriter{ResponseWriter: w}
	rec.Header().Set(api.HeaderRetryAfter, "3")
	WriteProblem(rec, r, http.StatusGatewayTimeout, "Gateway timeout", "100% late\n")
	h := w.Result().Header
	if w.Code != 200 || h.Get("Grpc-Status") != "4" || h.Get("Grpc-Message") != "Gateway timeout: 100%25 late%0A" ||
		h.Get("Content-Type") != "application/grpc+proto" || h.Get("Grpc-Retry-Pushback-Ms") != "3000" ||
		h.Get(api.HeaderRequestID) == "" || w.Body.Len() != 0 || h.Get("Content-Length") != "" {
		t.Fatalf("code %d header %v body %q", w.Code, h, w.Body)
	}
	if rec.recorded != http.StatusGatewayTimeout {
		t.Fatalf("recorded %d", rec.recorded)
	}
}

type recordingWriter struct {
	http.ResponseWriter
	recorded int
}

func (w *recordingWriter) RecordStatus(code int) { w.recorded = code }

func TestGRPCTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc, header string
		route        time.Duration
		want         time.Duration
		fromClient   bool
		wantHeader   string
	}{
		{"client shorter", "200m", time.Second, 200 * time.Millisecond, true, "200m"},
		{"route shorter", "5S", time.Second, time.Second, false, "1000m"},
		{"none", "", 300 * time.Millisecond, 300 * time.Millisecond, false, "300m"},
		{"hours", "1H", 2 * time.Hour, time.Hour, true, "1H"},
		{"nanoseconds rounded up", "1500000n", time.Second, 1500 * time.Microsecond, true, "1500000n"},
		{"bad unit", "10x", time.Second, time.Second, false, "1000m"},
		{"too many digits", "123456789m", time.Second, time.Second, false, "1000m"},
		{"signed", "+10m", time.Second, time.Second, false, "1000m"},
		{"no digits", "m", time.Second, time.Second, false, "1000m"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("POST", "/s/M", nil)
			if tt.header != "" {
				r.Header["Grpc-Timeout"] = []string{tt.header}
			}
			got, client := grpcTimeout(r, tt.route)
			if got != tt.want || client != tt.fromClient || r.Header.Get("Grpc-Timeout") != tt.wantHeader {
				t.Fatalf("got %v %v header %q", got, client, r.Header.Get("Grpc-Timeout"))
			}
		})
	}
}

func TestWireFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc      string
		up        api.Upstream
		url       string
		wantProto api.UpstreamProtocol
		wantTLS   bool
		wantErr   bool
	}{
		{"http default", api.Upstream{}, "http://a", api.ProtocolHTTP1, false, false},
		{"https default: ALPN", api.Upstream{}, "https://a", "", false, false},
		{"h2c scheme", api.Upstream{}, "H2C://a", api.ProtocolH2C, false, false},
		{"h2c protocol on http", api.Upstream{Protocol: api.ProtocolH2C}, "http://a", api.ProtocolH2C, false, false},
		{"h2 with tls", api.Upstream{Protocol: api.ProtocolH2, TLS: &api.UpstreamTLS{ServerName: "x"}}, "https://a", api.ProtocolH2, true, false},
		{"http1 over https", api.Upstream{Protocol: api.ProtocolHTTP1}, "https://a", api.ProtocolHTTP1, false, false},
		{"h2 on http", api.Upstream{Protocol: api.ProtocolH2}, "http://a", "", false, true},
		{"h2c on https", api.Upstream{Protocol: api.ProtocolH2C}, "https://a", "", false, true},
	}
	keys := map[string]api.UpstreamProtocol{} // pool key suffix → protocol
	for _, tt := range tests {
		w, err := wireFor(&tt.up, tt.url)
		if (err != nil) != tt.wantErr {
			t.Fatalf("%s: err %v", tt.desc, err)
		}
		if err != nil {
			continue
		}
		if w.proto != tt.wantProto || (w.tls != nil) != tt.wantTLS {
			t.Fatalf("%s: proto %q tls %v", tt.desc, w.proto, w.tls != nil)
		}
		if w.tls != nil && (w.tls.ServerName != "x" || w.tls.MinVersion != 0x0303) {
			t.Fatalf("%s: tls %+v", tt.desc, w.tls)
		}
		if other, dup := keys[w.key]; dup && w.proto != other {
			t.Fatalf("%s shares the pool key %q with protocol %q", tt.desc, w.key, other)
		}
		keys[w.key] = w.proto
	}
}
