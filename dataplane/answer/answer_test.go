package answer

import (
	"net/http"
	"net/http/httptest"
	"testing"

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

// TestNewRequestIDUnique: generated ids are unique and pass ValidRequestID.
func TestNewRequestIDUnique(t *testing.T) {
	t.Parallel()
	seenIDs := map[string]bool{}
	for range 10000 {
		id := NewRequestID()
		if seenIDs[id] || !ValidRequestID(id) {
			t.Fatalf("id %q repeated or invalid", id)
		}
		seenIDs[id] = true
	}
}
