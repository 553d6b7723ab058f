package snapshot

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicegw/sluice/dataplane/accesslog"
	"github.com/sluicegw/sluice/dataplane/reqview"
)

const accessRules = `namespace: bench
routes:
  - id: free
    match: {pathPrefix: /free}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
`

func accessView() reqview.View {
	r := httptest.NewRequest(http.MethodGet, "/free/x?page=1", nil)
	r.Header.Set("User-Agent", "ua/1")
	v := reqview.FromRequest(r)
	v.RequestID = "a-1"
	v.ClientIP = netip.MustParseAddr("192.0.2.1")
	return v
}

// lockedBuffer is a bytes.Buffer safe for the log's writer goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// TestAccessLogOff: without an access log the engine-neutral request path
// allocates nothing (the log costs a nil check); with one, each request
// served is a line.
func TestAccessLogOff(t *testing.T) {
	s := MustCompile(t, accessRules, func() int64 { return time.Now().UnixNano() })
	x := &nopExchange{h: http.Header{}}
	base := accessView()
	if n := testing.AllocsPerRun(200, func() {
		v := base
		clear(x.h)
		serve(s, x, &v)
	}); n != 0 {
		t.Fatalf("Serve without an access log: %v allocs per request, want 0", n)
	}

	var out lockedBuffer
	al := accesslog.New(&out, 0, nil)
	on := MustCompileOptions(t, accessRules, Options{AccessLog: al})
	for range 3 {
		v := base
		serve(on, x, &v)
	}
	al.Close(time.Second)
	if got := strings.Count(out.b.String(), `"path":"/free/x?page=1","headers":{"User-Agent":["ua/1"]}}`); got != 3 {
		t.Fatalf("access log with 3 requests served:\n%s", out.b.String())
	}
}

// BenchmarkAccessLog: the request path of TestAccessLogOff with the log off
// (the peer) and on.
func BenchmarkAccessLog(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		var opts Options
		if on {
			name = "on"
			al := accesslog.New(discardWriter{}, 0, nil)
			b.Cleanup(func() { al.Close(time.Second) })
			opts.AccessLog = al
		}
		b.Run(name, func(b *testing.B) {
			s := MustCompileOptions(b, accessRules, opts)
			x := &nopExchange{h: http.Header{}}
			base := accessView()
			b.ReportAllocs()
			for b.Loop() {
				v := base
				clear(x.h)
				serve(s, x, &v)
			}
		})
	}
}

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
