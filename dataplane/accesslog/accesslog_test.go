package accesslog

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/replay"
	"github.com/sluicegw/sluice/dataplane/reqview"
)

// MustRules decodes, validates and normalizes a rule-set document.
func MustRules(tb testing.TB, doc string) *api.RuleSet {
	tb.Helper()
	rs, err := api.Decode([]byte(doc))
	if err != nil {
		tb.Fatal(err)
	}
	v, err := api.Validated(rs)
	if err != nil {
		tb.Fatal(err)
	}
	return v.Rules()
}

const rules = `namespace: shop
routes:
  - id: orders
    match: {pathPrefix: /api}
    upstream: {targets: [{url: "http://127.0.0.1:1"}]}
limits:
  - id: per-key
    routes: [orders]
    key: [header:x-api-key, cookie:sid]
    algorithm: token_bucket
    rate: 10
    period: 1s
`

func view(t *testing.T, h http.Header) *reqview.View {
	t.Helper()
	r, err := http.NewRequest("GET", "http://shop.example.com/api/orders%2Fx?page=2&q=a+b", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header = h
	v := reqview.FromRequest(r)
	v.ClientIP = netip.MustParseAddr("2001:db8::7")
	return &v
}

// TestLineReplays: a logged line reads back through the replay parser with
// the same time, client, method, host, target and keyed headers; headers no
// key reads are not logged, Authorization and other cookies included.
func TestLineReplays(t *testing.T) {
	t.Parallel()
	rec := New(io.Discard, 0, nil).For(MustRules(t, rules))
	h := http.Header{
		"User-Agent":    {"curl/8 \"quoted\"\n\x01"},
		"X-Api-Key":     {"k1", "k2"},
		"Authorization": {"Bearer secret-token"},
		"Cookie":        {"other=secret; sid=abc%20d", "theme=dark", "SID=respelled"},
		"X-Other":       {"nope"},
		"Referer":       {"bad \xff utf8"},
	}
	wall := time.Date(2026, 12, 4, 10, 0, 0, 123456789, time.UTC).UnixNano()
	line := rec.Append(nil, view(t, h), wall)
	if bytes.Contains(line, []byte("secret")) || bytes.Contains(line, []byte("dark")) || bytes.Contains(line, []byte("nope")) {
		t.Fatalf("line logs a header or cookie no key reads: %s", line)
	}
	lr, err := replay.NewReader(bytes.NewReader(line), replay.FormatJSON)
	if err != nil {
		t.Fatal(err)
	}
	var r replay.Record
	if err := lr.Next(&r); err != nil {
		t.Fatalf("replay parse of %s: %v", line, err)
	}
	want := replay.Record{Line: 1, Time: wall, IP: netip.MustParseAddr("2001:db8::7"), Method: "GET", Host: "shop.example.com",
		RawPath: "/api/orders%2Fx", RawQuery: "page=2&q=a+b"}
	if r.Line != want.Line || r.Time != want.Time || r.IP != want.IP || r.Method != want.Method || r.Host != want.Host ||
		r.RawPath != want.RawPath || r.RawQuery != want.RawQuery {
		t.Fatalf("replayed %+v, want %+v (line %s)", r, want, line)
	}
	wantH := http.Header{
		"User-Agent": {"curl/8 \"quoted\"\n\x01"},
		"X-Api-Key":  {"k1", "k2"},
		"Cookie":     {"sid=abc%20d", "SID=respelled"},
	}
	if len(r.Header) != len(wantH) {
		t.Fatalf("headers %q, want %q", r.Header, wantH)
	}
	for k, vs := range wantH {
		if strings.Join(r.Header[k], "|") != strings.Join(vs, "|") {
			t.Fatalf("header %s: %q, want %q (line %s)", k, r.Header[k], vs, line)
		}
	}
}

// TestKeyedAuthorization: a rule that keys on Authorization logs it (the
// replay needs it); one that keys on nothing logs User-Agent only.
func TestKeyedAuthorization(t *testing.T) {
	t.Parallel()
	keyed := New(io.Discard, 0, nil).For(MustRules(t, strings.Replace(rules, "header:x-api-key, cookie:sid", "header:authorization", 1)))
	h := http.Header{"Authorization": {"Bearer t"}, "Cookie": {"sid=1"}}
	if line := keyed.Append(nil, view(t, h), 0); !bytes.Contains(line, []byte(`"Authorization":["Bearer t"]`)) || bytes.Contains(line, []byte("Cookie")) {
		t.Fatalf("keyed on authorization: %s", line)
	}
	plain := New(io.Discard, 0, nil).For(MustRules(t, strings.Replace(rules, "header:x-api-key, cookie:sid", "ip", 1)))
	if line := plain.Append(nil, view(t, h), 0); bytes.Contains(line, []byte("headers")) {
		t.Fatalf("keyed on ip, no User-Agent sent: %s", line)
	}
}

// blocked is a destination whose writes wait until release is closed.
type blocked struct {
	release chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
}

func (b *blocked) Write(p []byte) (int, error) {
	<-b.release
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// TestStuckDestinationDrops: with the destination stuck, Record never
// blocks: lines past the queue are dropped and counted.
func TestStuckDestinationDrops(t *testing.T) {
	t.Parallel()
	dst := &blocked{release: make(chan struct{})}
	var drops int
	var mu sync.Mutex
	l := New(dst, 4, func() { mu.Lock(); drops++; mu.Unlock() })
	rec := l.For(MustRules(t, rules))
	v := view(t, http.Header{})
	const n = 100
	for range n {
		rec.Record(v, 0) // would hang here if Record waited for dst
	}
	mu.Lock()
	got := drops
	mu.Unlock()
	// At most the queue (4) and the line the writer goroutine holds are kept.
	if got < n-5 || uint64(got) != l.Dropped() {
		t.Fatalf("%d dropped (Dropped %d), want at least %d", got, l.Dropped(), n-5)
	}
	close(dst.release)
	l.Close(time.Second)
	dst.mu.Lock()
	defer dst.mu.Unlock()
	out := dst.buf.String()
	if lines := strings.Count(out, `"method":"GET"`); lines != n-got {
		t.Fatalf("%d lines written, want %d kept", lines, n-got)
	}
	// The gap is marked, and a replay reports the mark as unparseable.
	lr, err := replay.NewReader(strings.NewReader(out), replay.FormatJSON)
	if err != nil {
		t.Fatal(err)
	}
	st, err := replay.Run(t.Context(), lr)
	if err != nil {
		t.Fatal(err)
	}
	if st.Unparseable != 1 || st.Replayed != int64(n-got) || !strings.Contains(out, fmt.Sprintf(`"dropped":%d}`, got)) {
		t.Fatalf("replay of the log: %+v, want 1 unparseable line (the drop note) and %d replayed:\n%s", st, n-got, out)
	}
}

// BenchmarkRecord: the cost of one line with the log on.
func BenchmarkRecord(b *testing.B) {
	rec := New(io.Discard, 0, nil).For(MustRules(b, rules))
	r, _ := http.NewRequest("GET", "http://shop.example.com/api/orders?page=2", nil)
	r.Header = http.Header{"User-Agent": {"curl/8"}, "X-Api-Key": {"k1"}}
	v := reqview.FromRequest(r)
	v.ClientIP = netip.MustParseAddr("192.0.2.1")
	b.ReportAllocs()
	for b.Loop() {
		rec.Record(&v, 1)
	}
}
