package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/answer"
)

// seen is what an echo upstream reports about the request it received.
type seen struct {
	Name       string
	RequestURI string
	Proto      string
	Host       string
	Header     http.Header
}

// newEcho starts an upstream that answers with a JSON description of the
// request it got, and sets X-Upstream to name.
func newEcho(tb testing.TB, name string) *httptest.Server {
	tb.Helper()
	srv := httptest.NewServer(echoHandler(name))
	tb.Cleanup(srv.Close)
	return srv
}

func echoHandler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Upstream", name)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(seen{Name: name, RequestURI: r.RequestURI, Proto: r.Proto, Host: r.Host, Header: r.Header})
	})
}

func getSeen(tb testing.TB, c *http.Client, req *http.Request) (*http.Response, seen) {
	tb.Helper()
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	var s seen
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &s); err != nil {
			tb.Fatalf("decoding echo: %v (%s)", err, body)
		}
	}
	return resp, s
}

func oneRoute(id, match, upstream string) string {
	return fmt.Sprintf("namespace: t\nroutes:\n  - id: %s\n    match: %s\n    upstream: %s\n", id, match, upstream)
}

func TestStripPrefix(t *testing.T) {
	t.Parallel()
	up := newEcho(t, "up")
	tests := []struct {
		desc, match, upstream, target, want string
	}{
		{"strip below", "{pathPrefix: /api/orders}", `{stripPrefix: true, targets: [{url: "%s"}]}`, "/api/orders/1?x=1", "/1?x=1"},
		{"strip all keeps a slash", "{pathPrefix: /api/orders}", `{stripPrefix: true, targets: [{url: "%s"}]}`, "/api/orders", "/"},
		{"strip trailing-slash prefix", "{pathPrefix: /api/orders/}", `{stripPrefix: true, targets: [{url: "%s"}]}`, "/api/orders/1", "/1"},
		{"strip then join target path", "{pathPrefix: /api/orders}", `{stripPrefix: true, targets: [{url: "%s/v1/"}]}`, "/api/orders/1", "/v1/1"},
		{"no strip joins target path", "{pathPrefix: /api/orders}", `{targets: [{url: "%s/base"}]}`, "/api/orders/1", "/base/api/orders/1"},
		{"no strip", "{pathPrefix: /api/orders}", `{targets: [{url: "%s"}]}`, "/api/orders/1", "/api/orders/1"},
		{"strip root prefix is a no-op", "{pathPrefix: /}", `{stripPrefix: true, targets: [{url: "%s"}]}`, "/a/b", "/a/b"},
		{"escapes survive stripping", "{pathPrefix: /api}", `{stripPrefix: true, targets: [{url: "%s"}]}`, "/api/a%2Fb/c%20d", "/a%2Fb/c%20d"},
		{"query passed on", "{pathPrefix: /api}", `{targets: [{url: "%s"}]}`, "/api?q=a%2Fb&r=1&r=2", "/api?q=a%2Fb&r=1&r=2"},
		{"unparsable query parameter dropped", "{pathPrefix: /api}", `{targets: [{url: "%s"}]}`, "/api?q=a%2Fb&r=%zz;s=1", "/api?q=a%2Fb"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			rt := mustCompile(t, oneRoute("r", tc.match, fmt.Sprintf(tc.upstream, up.URL)), false)
			gw := newGateway(t, rt, nil)
			req, _ := http.NewRequest("GET", gw.URL+tc.target, nil)
			resp, s := getSeen(t, nil, req)
			if resp.StatusCode != 200 || s.RequestURI != tc.want {
				t.Errorf("GET %s: status %d, upstream saw %q, want %q", tc.target, resp.StatusCode, s.RequestURI, tc.want)
			}
		})
	}
}

func TestWeightedDistribution(t *testing.T) {
	t.Parallel()
	t.Run("smooth sequence", func(t *testing.T) {
		t.Parallel()
		b := newBalancer([]int{5, 1, 1})
		var got []int
		for range 14 {
			got = append(got, b.next())
		}
		want := []int{0, 0, 1, 0, 2, 0, 0, 0, 0, 1, 0, 2, 0, 0}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("picks %v, want %v", got, want)
		}
	})
	for _, tc := range []struct {
		desc    string
		weights []int
		limit   int
	}{
		{"precomputed", []int{3, 2, 1}, 4096},
		{"gcd reduced", []int{300, 200, 100}, 4096},
		{"locked", []int{10000, 7, 1, 9999}, 16},
		{"single", []int{4}, 4096},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			b := newBalancerLimit(tc.weights, tc.limit)
			if wantSchedule := tc.limit >= 100 && len(tc.weights) > 1; (b.schedule != nil) != wantSchedule {
				t.Fatalf("schedule precomputed = %v with limit %d", b.schedule != nil, tc.limit)
			}
			total := 0
			for _, w := range tc.weights {
				total += w
			}
			counts := make([]int, len(tc.weights))
			for range 3 * total {
				counts[b.next()]++
			}
			for i, w := range tc.weights {
				if counts[i] != 3*w {
					t.Errorf("target %d (weight %d) picked %d times in %d, want %d", i, w, counts[i], 3*total, 3*w)
				}
			}
		})
	}
	t.Run("end to end", func(t *testing.T) {
		t.Parallel()
		a, b, c := newEcho(t, "a"), newEcho(t, "b"), newEcho(t, "c")
		rt := mustCompile(t, oneRoute("r", "{}", fmt.Sprintf(`{targets: [{url: "%s", weight: 3}, {url: "%s", weight: 2}, {url: "%s"}]}`, a.URL, b.URL, c.URL)), false)
		gw := newGateway(t, rt, nil)
		counts := map[string]int{}
		for range 60 {
			req, _ := http.NewRequest("GET", gw.URL+"/", nil)
			_, s := getSeen(t, nil, req)
			counts[s.Name]++
		}
		if counts["a"] != 30 || counts["b"] != 20 || counts["c"] != 10 {
			t.Errorf("60 requests went %v, want a:30 b:20 c:10", counts)
		}
	})
}

// newBalancerLimit builds a balancer with a given schedule limit; the
// package variable is read only inside newBalancer, under this helper's
// exclusive use in these non-parallel subtests.
func newBalancerLimit(weights []int, limit int) *balancer {
	old := scheduleLimit
	scheduleLimit = limit
	defer func() { scheduleLimit = old }()
	return newBalancer(weights)
}

// problemBody decodes an application/problem+json response.
func problemBody(tb testing.TB, resp *http.Response) map[string]any {
	tb.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != api.ContentTypeProblemJSON {
		tb.Fatalf("Content-Type %q, want %q", ct, api.ContentTypeProblemJSON)
	}
	var p map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		tb.Fatalf("decoding problem: %v", err)
	}
	return p
}

func TestErrors(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); slow.Close() })
	// A port with nothing listening: bind, note, close.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String()
	l.Close()

	tests := []struct {
		desc        string
		upstream    string
		path        string
		wantStatus  int
		wantType    string
		wantTimeout bool
		wantOutcome bool
	}{
		{"no route", fmt.Sprintf(`{targets: [{url: "%s"}]}`, refused), "/elsewhere", 404, "urn:sluice:problem:not-found", false, false},
		{"refused", fmt.Sprintf(`{targets: [{url: "%s"}]}`, refused), "/api", 502, "urn:sluice:problem:bad-gateway", false, true},
		{"timeout", fmt.Sprintf(`{timeout: 150ms, targets: [{url: "%s"}]}`, slow.URL), "/api", 504, "urn:sluice:problem:gateway-timeout", true, true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			outcomes := make(chan Outcome, 1)
			rt := mustCompile(t, oneRoute("r", "{pathPrefix: /api}", tc.upstream), false)
			gw := newGateway(t, rt, outcomes)
			req, _ := http.NewRequest("GET", gw.URL+tc.path, nil)
			req.Header.Set("X-Request-Id", "trace-123")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.wantStatus)
			}
			p := problemBody(t, resp)
			if p["type"] != tc.wantType || p["status"] != float64(tc.wantStatus) || p["requestId"] != "trace-123" ||
				p["instance"] != "urn:sluice:request:trace-123" || p["title"] == "" {
				t.Errorf("problem body %v", p)
			}
			if d, _ := p["detail"].(string); strings.Contains(d, "127.0.0.1") || strings.Contains(d, "dial") {
				t.Errorf("detail %q leaks internals", d)
			}
			if got := resp.Header.Get("X-Request-Id"); got != "trace-123" {
				t.Errorf("X-Request-Id %q, want trace-123", got)
			}
			if !tc.wantOutcome {
				return
			}
			o := <-outcomes
			if o.Status != tc.wantStatus || o.Err == nil || o.Timeout != tc.wantTimeout || o.ClientGone || o.Aborted || o.Duration <= 0 {
				t.Errorf("outcome %+v", o)
			}
		})
	}
}

func TestClientGone(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
	}))
	t.Cleanup(up.Close)
	outcomes := make(chan Outcome, 1)
	rt := mustCompile(t, oneRoute("r", "{}", fmt.Sprintf(`{targets: [{url: "%s"}]}`, up.URL)), false)
	gw := newGateway(t, rt, outcomes)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", gw.URL+"/", nil)
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-arrived
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("client error %v, want context.Canceled", err)
	}
	o := <-outcomes
	if !o.ClientGone || o.Status != StatusClientClosed || o.Timeout || o.Err != nil {
		t.Errorf("outcome %+v, want client gone (499)", o)
	}
}

func TestTimeoutMidBodyAborts(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		_, _ = w.Write([]byte("partial"))
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(up.Close)
	outcomes := make(chan Outcome, 1)
	rt := mustCompile(t, oneRoute("r", "{}", fmt.Sprintf(`{timeout: 150ms, targets: [{url: "%s"}]}`, up.URL)), false)
	gw := newGateway(t, rt, outcomes)
	// The gateway had not flushed the header when the timeout fired, so
	// the client sees the connection closed before or during the response:
	// either way never a complete one.
	if resp, err := http.Get(gw.URL + "/"); err == nil {
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Errorf("read a whole body %q from an aborted response", body)
		}
	}
	o := <-outcomes
	if !o.Aborted || !o.Timeout || o.Status != 200 || o.Err == nil {
		t.Errorf("outcome %+v, want aborted by timeout after 200", o)
	}
}

func TestForwardedHeaders(t *testing.T) {
	t.Parallel()
	up := newEcho(t, "up")
	rt := mustCompile(t, oneRoute("r", "{}", fmt.Sprintf(`{targets: [{url: "%s"}]}`, up.URL)), false)
	gw := newGateway(t, rt, nil)
	upHost := strings.TrimPrefix(up.URL, "http://")

	tests := []struct {
		desc    string
		header  http.Header
		wantXFF string
	}{
		{"no prior", nil, "127.0.0.1"},
		{"append to prior", http.Header{"X-Forwarded-For": {"203.0.113.7"}}, "203.0.113.7, 127.0.0.1"},
		{"append to several", http.Header{"X-Forwarded-For": {"203.0.113.7", "198.51.100.1"}}, "203.0.113.7, 198.51.100.1, 127.0.0.1"},
		{"client proto and host are replaced", http.Header{"X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"evil.test"}}, "127.0.0.1"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			req, _ := http.NewRequest("GET", gw.URL+"/x", nil)
			req.Host = "Shop.Example.com:9000"
			for k, v := range tc.header {
				req.Header[k] = v
			}
			req.Header.Set("Connection", "keep-alive, X-Hop")
			req.Header.Set("X-Hop", "must not pass")
			_, s := getSeen(t, nil, req)
			if got := strings.Join(s.Header["X-Forwarded-For"], ", "); got != tc.wantXFF {
				t.Errorf("X-Forwarded-For %q, want %q", got, tc.wantXFF)
			}
			if got := s.Header.Get("X-Forwarded-Host"); got != "Shop.Example.com:9000" {
				t.Errorf("X-Forwarded-Host %q", got)
			}
			if got := s.Header.Get("X-Forwarded-Proto"); got != "http" {
				t.Errorf("X-Forwarded-Proto %q, want http", got)
			}
			if s.Host != upHost {
				t.Errorf("upstream Host %q, want the target's %q", s.Host, upHost)
			}
			if s.Header.Get("X-Hop") != "" {
				t.Errorf("hop-by-hop header passed through")
			}
		})
	}
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "upstream-own-id")
		echoHandler("up").ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	rt := mustCompile(t, oneRoute("r", "{}", fmt.Sprintf(`{targets: [{url: "%s"}]}`, up.URL)), false)
	gw := newGateway(t, rt, nil)

	tests := []struct {
		desc string
		sent []string
		keep bool
	}{
		{"sane id passes through", []string{"a1B2-c3_d4.e5:f6+g/h=@x"}, true},
		{"none", nil, false},
		{"empty", []string{""}, false},
		{"too long", []string{strings.Repeat("a", answer.MaxRequestIDLength+1)}, false},
		{"longest kept", []string{strings.Repeat("a", answer.MaxRequestIDLength)}, true},
		{"bad characters", []string{"abc def"}, false},
		{"injection", []string{"abc\",\"x"}, false},
		{"two values", []string{"a", "b"}, false},
	}
	generated := map[string]bool{}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			req, _ := http.NewRequest("GET", gw.URL+"/", nil)
			if tc.sent != nil {
				req.Header["X-Request-Id"] = tc.sent
			}
			resp, s := getSeen(t, nil, req)
			got := s.Header["X-Request-Id"]
			if len(got) != 1 || resp.Header.Values("X-Request-Id")[0] != got[0] || len(resp.Header.Values("X-Request-Id")) != 1 {
				t.Fatalf("upstream saw %q, client got %q; want one id, the same", got, resp.Header.Values("X-Request-Id"))
			}
			if tc.keep {
				if got[0] != tc.sent[0] {
					t.Errorf("id %q replaced by %q", tc.sent[0], got[0])
				}
				return
			}
			if len(tc.sent) == 1 && got[0] == tc.sent[0] || !answer.ValidRequestID(got[0]) || generated[got[0]] {
				t.Errorf("generated id %q (sent %q) is not fresh and valid", got[0], tc.sent)
			}
			generated[got[0]] = true
		})
	}
}

// TestRequestIDAfterInformational checks that a 1xx from the upstream,
// which clears the response header map, does not cost the final response
// its request id.
func TestRequestIDAfterInformational(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Set("X-Request-Id", "upstream-own-id")
		_, _ = io.WriteString(w, "done")
	}))
	t.Cleanup(up.Close)
	rt := mustCompile(t, oneRoute("r", "{}", fmt.Sprintf(`{targets: [{url: "%s"}]}`, up.URL)), false)
	gw := newGateway(t, rt, nil)
	req, _ := http.NewRequest("GET", gw.URL+"/", nil)
	req.Header.Set("X-Request-Id", "trace-103")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Values("X-Request-Id"); resp.StatusCode != 200 || len(got) != 1 || got[0] != "trace-103" {
		t.Errorf("status %d, X-Request-Id %q; want 200 and [trace-103]", resp.StatusCode, got)
	}
}

// TestPathTricks sends raw request lines, so that no client library cleans
// them, and checks that the route that matched is the one whose upstream
// received the path: the limited route cannot be reached by a path that
// dodges its match.
func TestPathTricks(t *testing.T) {
	t.Parallel()
	orders, rest := newEcho(t, "orders"), newEcho(t, "rest")
	doc := fmt.Sprintf(`
namespace: t
routes:
  - id: orders
    match: {pathPrefix: /api/orders}
    upstream: {targets: [{url: "%s"}]}
  - id: rest
    match: {pathPrefix: /}
    upstream: {targets: [{url: "%s"}]}
`, orders.URL, rest.URL)
	tests := []struct {
		desc      string
		target    string
		decode    bool
		wantRoute string
		wantPath  string
	}{
		{"dot-dot back into orders", "/api/orders/../orders", false, "orders", "/api/orders"},
		{"dot-dot out of orders", "/api/orders/../users", false, "rest", "/api/users"},
		{"double slashes", "//api//orders", false, "orders", "/api/orders"},
		{"encoded dot-dot out of orders", "/api/orders/%2e%2e/x", false, "rest", "/api/x"},
		{"encoded dot-dot into orders", "/api/x/%2E%2E/orders/1", false, "orders", "/api/orders/1"},
		{"encoded slash kept", "/api%2Forders", false, "rest", "/api%2Forders"},
		{"encoded slash lower case kept", "/api%2forders/1", false, "rest", "/api%2Forders/1"},
		{"encoded slash decoded", "/api%2Forders", true, "orders", "/api/orders"},
		{"encoded slash and dot-dot decoded", "/api/x%2F..%2Forders", true, "orders", "/api/orders"},
		{"encoded letters", "/api/%6Frders", false, "orders", "/api/orders"},
		{"above root", "/../api/orders", false, "orders", "/api/orders"},
		{"absolute form", "http://x.test/api/./orders", false, "orders", "/api/orders"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			rt := mustCompile(t, doc, tc.decode)
			gw := newGateway(t, rt, nil)
			resp, s := rawGet(t, gw.Listener.Addr().String(), tc.target)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if s.Name != tc.wantRoute || s.RequestURI != tc.wantPath {
				t.Errorf("GET %s reached %s with %q; want %s with %q", tc.target, s.Name, s.RequestURI, tc.wantRoute, tc.wantPath)
			}
		})
	}
}

// rawGet sends one request line exactly as given.
func rawGet(tb testing.TB, addr, target string) (*http.Response, seen) {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x.test\r\nConnection: close\r\n\r\n", target)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var s seen
	if resp.StatusCode == 200 {
		if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
			tb.Fatal(err)
		}
	}
	return resp, s
}

func TestOversizedHeaderRefused(t *testing.T) {
	t.Parallel()
	var reached atomic.Bool
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Store(true) }))
	t.Cleanup(up.Close)
	rt := mustCompile(t, oneRoute("r", "{}", fmt.Sprintf(`{targets: [{url: "%s"}]}`, up.URL)), false)
	gw := newGateway(t, rt, nil)
	for _, tc := range []struct {
		desc string
		size int
		want int
	}{
		{"fits", MaxHeaderBytes / 2, 200},
		{"too big", MaxHeaderBytes + 8<<10, http.StatusRequestHeaderFieldsTooLarge},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			req, _ := http.NewRequest("GET", gw.URL+"/", nil)
			req.Header.Set("X-Big", strings.Repeat("b", tc.size))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
	if !reached.Load() {
		t.Error("the fitting request did not reach the upstream")
	}
}

func TestWebSocketEcho(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, msg, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, append([]byte("echo: "), msg...)); err != nil {
				return
			}
		}
	}))
	t.Cleanup(up.Close)
	outcomes := make(chan Outcome, 1)
	// The timeout is far shorter than the connection's life: it must bound
	// the handshake only.
	rt := mustCompile(t, oneRoute("ws", "{pathPrefix: /ws}", fmt.Sprintf(`{timeout: 200ms, targets: [{url: "%s"}]}`, up.URL)), false)
	gw := newGateway(t, rt, outcomes)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(gw.URL, "http")+"/ws", nil)
	if err != nil {
		t.Fatalf("dialing through the gateway: %v", err)
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Error("upgrade response carries no X-Request-Id")
	}
	for i := range 3 {
		msg := fmt.Sprintf("hello %d", i)
		if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, got, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != "echo: "+msg {
			t.Errorf("got %q", got)
		}
		if i == 1 {
			// Outlive the route's timeout: the tunnel must stay up.
			time.Sleep(300 * time.Millisecond)
		}
	}
	c.Close(websocket.StatusNormalClosure, "")
	o := <-outcomes
	if !o.Upgraded || o.Status != http.StatusSwitchingProtocols || o.Timeout {
		t.Errorf("outcome %+v, want upgraded, 101, no timeout", o)
	}
}

// h2cClient speaks HTTP/2 over cleartext with prior knowledge.
func h2cClient() *http.Client {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tr}
}

func TestH2C(t *testing.T) {
	t.Parallel()
	t.Run("client to gateway", func(t *testing.T) {
		t.Parallel()
		up := newEcho(t, "up")
		rt := mustCompile(t, oneRoute("r", "{}", fmt.Sprintf(`{targets: [{url: "%s"}]}`, up.URL)), false)
		gw := httptest.NewUnstartedServer(H2CHandler(gatewayHandler(rt, nil)))
		gw.Config.MaxHeaderBytes = MaxHeaderBytes
		gw.Start()
		t.Cleanup(gw.Close)
		req, _ := http.NewRequest("GET", gw.URL+"/h2", nil)
		resp, s := getSeen(t, h2cClient(), req)
		if resp.ProtoMajor != 2 {
			t.Errorf("client spoke %s to the gateway, want HTTP/2", resp.Proto)
		}
		if s.RequestURI != "/h2" || s.Proto != "HTTP/1.1" {
			t.Errorf("upstream saw %q over %s", s.RequestURI, s.Proto)
		}
		// The HTTP/2 side refuses oversized headers too.
		big, _ := http.NewRequest("GET", gw.URL+"/h2", nil)
		big.Header.Set("X-Big", strings.Repeat("b", MaxHeaderBytes+8<<10))
		if resp, err := h2cClient().Do(big); err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("oversized header over h2c: status %d", resp.StatusCode)
			}
		}
	})
	t.Run("gateway to upstream", func(t *testing.T) {
		t.Parallel()
		up := httptest.NewUnstartedServer(H2CHandler(echoHandler("up")))
		up.Start()
		t.Cleanup(up.Close)
		target := "h2c://" + strings.TrimPrefix(up.URL, "http://")
		rt := mustCompile(t, oneRoute("r", "{}", fmt.Sprintf(`{targets: [{url: "%s"}]}`, target)), false)
		gw := newGateway(t, rt, nil)
		req, _ := http.NewRequest("GET", gw.URL+"/to-h2c", nil)
		resp, s := getSeen(t, nil, req)
		if resp.StatusCode != 200 || s.Proto != "HTTP/2.0" || s.RequestURI != "/to-h2c" {
			t.Errorf("status %d; upstream saw %q over %s, want HTTP/2.0", resp.StatusCode, s.RequestURI, s.Proto)
		}
	})
}

// TestSwapKeepsConnections checks that a Router compiled with the same
// Transport reuses the keep-alive connection to an unchanged target, and
// that retiring Routers frees the origins no one uses any more.
func TestSwapKeepsConnections(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	a := httptest.NewUnstartedServer(echoHandler("a"))
	a.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	a.Start()
	t.Cleanup(a.Close)
	b := newEcho(t, "b")
	tr := quietTransports()
	t.Cleanup(tr.CloseIdle)
	compile := func(doc string) *Router {
		rt, err := NewRouter(mustRoutes(t, doc), tr)
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
	v1 := compile(fmt.Sprintf("namespace: t\nroutes:\n  - id: r\n    match: {}\n    upstream: {targets: [{url: %q}]}\n  - id: s\n    match: {pathPrefix: /b}\n    upstream: {targets: [{url: %q}]}\n", a.URL, b.URL))
	v2 := compile(fmt.Sprintf("namespace: t\nroutes:\n  - id: r2\n    match: {pathPrefix: /}\n    upstream: {timeout: 3s, targets: [{url: %q}]}\n", a.URL))
	if n := tr.Origins(); n != 2 {
		t.Fatalf("%d origins pooled, want 2", n)
	}
	call := func(rt *Router) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "http://x.test/", nil)
		m := rt.Match(r)
		if o := m.Route.Upstream.Forward(w, r, m); o.Status != 200 || o.Err != nil {
			t.Fatalf("outcome %+v", o)
		}
	}
	call(v1)
	v1.CloseIdle()
	v1.CloseIdle() // idempotent
	call(v2)
	if n := conns.Load(); n != 1 {
		t.Errorf("upstream a saw %d connections across the swap, want 1 (kept alive)", n)
	}
	if n := tr.Origins(); n != 1 {
		t.Errorf("%d origins pooled after retiring v1, want 1 (a)", n)
	}
	v2.CloseIdle()
	if n := tr.Origins(); n != 0 {
		t.Errorf("%d origins pooled after retiring v2, want 0", n)
	}
}
