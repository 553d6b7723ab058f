package proxy

import (
	"testing"

	"github.com/sluicegw/sluice/api"
)

// TestIsHopOrID: scrubFastResponse's name test agrees with hopHeaders (and
// X-Request-Id), and passes everything else.
func TestIsHopOrID(t *testing.T) {
	for _, k := range append([]string{api.HeaderRequestID}, hopHeaders...) {
		if !isHopOrID([]byte(k)) {
			t.Errorf("isHopOrID(%q) = false", k)
		}
	}
	for _, k := range []string{"", "T", "Tee", "Content-Length", "Content-Type", "Server", "Set-Cookie", "X-Request-Ids",
		"Keep-Alivf", "Connectiom", "Date", "Via", "Traceparent"} {
		if isHopOrID([]byte(k)) {
			t.Errorf("isHopOrID(%q) = true", k)
		}
	}
}
