package gateway

import (
	"crypto/tls"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ocsp"

	"github.com/sluicegw/sluice/dataplane/internal/testca"
)

// TestTLSOCSPStaple: with TLSOCSPStaple the TLS listener staples the
// leaf's responder's answer to handshakes, and the metrics show it.
func TestTLSOCSPStaple(t *testing.T) {
	t.Parallel()
	ca := testca.New(t, "stapling CA")
	var asked atomic.Int64
	responder := httptest.NewServer(ca.OCSPResponder(t, time.Hour, func(*big.Int) int { return ocsp.Good }, &asked))
	defer responder.Close()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer up.Close()
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.OCSPLeaf(t, responder.URL, "127.0.0.1").Write(t, cert, key)
	rules := fmt.Sprintf("namespace: tls\nroutes:\n  - id: all\n    upstream: {targets: [{url: %q}]}\n", up.URL)
	_, ls := MustStartListeners(t, rules, Config{ListenTLS: "127.0.0.1:0", TLSCertFile: cert, TLSKeyFile: key, TLSOCSPStaple: true})

	var staple []byte
	for deadline := time.Now().Add(5 * time.Second); staple == nil; {
		c, err := tls.Dial("tcp", ls.TLSAddr().String(), &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		staple = c.ConnectionState().OCSPResponse
		c.Close()
		if staple == nil && time.Now().After(deadline) {
			t.Fatalf("no OCSP staple after 5s (%d requests answered)", asked.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if resp, err := ocsp.ParseResponse(staple, ca.Cert()); err != nil || resp.Status != ocsp.Good {
		t.Fatalf("staple: %v", err)
	}
	resp, err := http.Get("http://" + ls.Admin.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`sluice_tls_ocsp_requests_total{result="ok"} 1`, "sluice_tls_ocsp_staple_next_update_seconds 1"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
