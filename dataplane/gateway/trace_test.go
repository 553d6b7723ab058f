package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sluicegw/sluice/dataplane/reqview"
)

// lockedBuffer is a log sink safe for the node's concurrent writers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the JSON log lines whose msg is msg.
func (b *lockedBuffer) lines(tb testing.TB, msg string) []map[string]any {
	tb.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			tb.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// TestTraceContext: the gateway passes a valid traceparent and its
// tracestate upstream as they came, starts a trace when none came or it is
// invalid (dropping the tracestate), and every limit rejection, degrade shed
// and breaker refusal logs a decision line with the request's trace id and
// request id.
func TestTraceContext(t *testing.T) {
	var mu sync.Mutex
	seen := map[string][2]string{} // X-Test-Case: traceparent, tracestate
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("X-Test-Case")] = [2]string{r.Header.Get("Traceparent"), r.Header.Get("Tracestate")}
		mu.Unlock()
		if r.URL.Path == "/brk" {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(up.Close)
	logs := &lockedBuffer{}
	_, base, _ := MustStartConfig(t, fmt.Sprintf(`namespace: trace
routes:
  - {id: pass, match: {pathPrefix: /pass}, upstream: {targets: [{url: %[1]q}]}}
  - {id: api, match: {pathPrefix: /api}, upstream: {targets: [{url: %[1]q}]}}
  - {id: shed, match: {pathPrefix: /shed}, upstream: {targets: [{url: %[1]q}]}}
  - {id: brk, match: {pathPrefix: /brk}, upstream: {targets: [{url: %[1]q}]}}
limits:
  - {id: one, routes: [api], key: [ip], algorithm: token_bucket, rate: 1, period: 1h, burst: 1}
degrades:
  - {id: off, routes: [shed], mode: manual, level: 2}
breakers:
  - {id: trip, routes: [brk], window: 10s, minRequests: 100, errorRatio: 0.5, consecutiveFailures: 1, openFor: 1h, maxOpenFor: 1h, halfOpenProbes: 1, fallback: {status: 503}}
`, up.URL), Config{Logger: slog.New(slog.NewJSONHandler(logs, nil))})

	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	do := func(path, tcase, traceparent, tracestate string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Header.Set("X-Test-Case", tcase)
		if traceparent != "" {
			req.Header.Set("Traceparent", traceparent)
		}
		if tracestate != "" {
			req.Header.Set("Tracestate", tracestate)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}

	t.Run("pass through", func(t *testing.T) {
		tests := []struct {
			desc, parent, state string
			keep                bool
		}{
			{"valid", parent, "vendor=a,other=b", true},
			{"none", "", "", false},
			{"invalid", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "vendor=a", false},
			{"all-zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "vendor=a", false},
		}
		for _, tc := range tests {
			if resp := do("/pass", tc.desc, tc.parent, tc.state); resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: status %d", tc.desc, resp.StatusCode)
			}
			mu.Lock()
			got := seen[tc.desc]
			mu.Unlock()
			if tc.keep {
				if got != [2]string{tc.parent, tc.state} {
					t.Errorf("%s: upstream got %q, want %q %q", tc.desc, got, tc.parent, tc.state)
				}
				continue
			}
			if !reqview.ValidTraceparent(got[0]) || got[0] == tc.parent || got[1] != "" {
				t.Errorf("%s: upstream got traceparent %q tracestate %q; want a new trace and no state", tc.desc, got[0], got[1])
			}
		}
	})

	t.Run("decision lines", func(t *testing.T) {
		if resp := do("/api", "first", parent, ""); resp.StatusCode != http.StatusOK {
			t.Fatalf("first /api: %d", resp.StatusCode)
		}
		limited := do("/api", "limited", parent, "")
		shed := do("/shed", "shed", "", "")
		if resp := do("/brk", "fails", parent, ""); resp.StatusCode != http.StatusInternalServerError {
			t.Fatalf("/brk: %d, want the upstream's 500", resp.StatusCode)
		}
		refused := do("/brk", "refused", "00-11111111111111111111111111111111-2222222222222222-00", "")
		for _, tc := range []struct {
			desc, msg, rule, decision string
			resp                      *http.Response
			status                    int
			traceID                   string // "" : a trace the gateway started
		}{
			{"limit", reqview.MsgRateLimit, "one", "reject", limited, 429, "4bf92f3577b34da6a3ce929d0e0e4736"},
			{"degrade", reqview.MsgDegrade, "off", "shed", shed, 503, ""},
			{"breaker", reqview.MsgBreaker, "trip", "refuse", refused, 503, "11111111111111111111111111111111"},
		} {
			t.Run(tc.desc, func(t *testing.T) {
				if tc.resp.StatusCode != tc.status {
					t.Fatalf("status %d, want %d", tc.resp.StatusCode, tc.status)
				}
				lines := logs.lines(t, tc.msg)
				if len(lines) != 1 {
					t.Fatalf("%d %s lines, want 1", len(lines), tc.msg)
				}
				l := lines[0]
				id := tc.resp.Header.Get("X-Request-Id")
				if l["requestId"] != id || id == "" || l["rule"] != tc.rule || l["decision"] != tc.decision ||
					l["ip"] != "127.0.0.1" || !strings.HasPrefix(l["path"].(string), "/") {
					t.Fatalf("line %v: want requestId %q rule %q decision %q ip 127.0.0.1", l, id, tc.rule, tc.decision)
				}
				tid, _ := l["traceId"].(string)
				if tc.traceID != "" && tid != tc.traceID {
					t.Fatalf("traceId %q, want the client's %q", tid, tc.traceID)
				}
				if len(tid) != 32 {
					t.Fatalf("traceId %q is not a trace id", tid)
				}
			})
		}
	})
}
