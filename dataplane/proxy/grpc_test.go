package proxy

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
)

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
