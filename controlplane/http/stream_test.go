package http_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sluice "github.com/sluicegw/sluice/controlplane"
	sluicehttp "github.com/sluicegw/sluice/controlplane/http"
	"github.com/sluicegw/sluice/controlplane/postgres"
)

// newStreamEnv is an env serving the stream with st, its events in
// Postgres, the namespace "shop", and f.raw the API without the spec
// checker (which buffers).
func newStreamEnv(t *testing.T, st sluicehttp.StreamSettings) (*fleetEnv, *client) {
	t.Helper()
	f := &fleetEnv{hub: &sluice.Hub{}}
	f.env = newEnv(t, envOptions{settings: func(s *sluicehttp.Settings) {
		s.Stream, s.Events, s.Streams = f.hub, lateEvents{f}, st
	}})
	f.events = postgres.NewEventService(f.db)
	f.raw = httptest.NewServer(f.api.Handler())
	t.Cleanup(f.raw.Close)
	admin := f.login("admin")
	admin.must(http.StatusCreated, "POST", "/api/v1/namespaces", map[string]string{"name": "shop"})
	return f, admin
}

// openStream opens the stream of shop as bearer, resuming after lastID
// when not zero; the caller closes the body.
func (f *fleetEnv) openStream(ctx context.Context, t testing.TB, bearer string, lastID int64) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", f.raw.URL+"/api/v1/namespaces/shop/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	if lastID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
	}
	return http.DefaultTransport.RoundTrip(req)
}

// TestStreamCaps: two users opening 30 streams each get PerUser streams
// each; the rest are answered 429 problem+json with Retry-After, and a
// closed stream gives its slot back. The total cap holds across users.
func TestStreamCaps(t *testing.T) {
	t.Parallel()
	f, admin := newStreamEnv(t, sluicehttp.StreamSettings{PerUser: 8, Total: 12, RetryAfter: 7 * time.Second})
	vw := f.mustUser(admin, "vw", sluice.RoleViewer)
	tokens := []string{f.token(admin, sluice.RoleViewer).bearer, f.token(vw, sluice.RoleViewer).bearer}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var open [2][]*http.Response
	status := map[int]int{}
	byUser := [2]int{}
	for i := range 60 {
		u := i % 2
		res, err := f.openStream(ctx, t, tokens[u], 0)
		if err != nil {
			t.Fatal(err)
		}
		status[res.StatusCode]++
		switch res.StatusCode {
		case http.StatusOK:
			byUser[u]++
			open[u] = append(open[u], res)
		case http.StatusTooManyRequests:
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if ra := res.Header.Get("Retry-After"); ra != "7" {
				t.Errorf("Retry-After %q, want 7", ra)
			}
			if ct := res.Header.Get("Content-Type"); ct != sluicehttp.ProblemContentType || !strings.Contains(string(b), "too many open streams") {
				t.Errorf("429 %s %s", ct, b)
			}
		default:
			t.Fatalf("stream %d: status %d", i, res.StatusCode)
		}
	}
	// 12 in all (the total cap), 6 each (alternating), the other 48 refused.
	if status[200] != 12 || status[429] != 48 || byUser != [2]int{6, 6} {
		t.Fatalf("statuses %v, per user %v; want 12 open (6 each) and 48 refused", status, byUser)
	}
	if n := f.api.OpenStreams(); n != 12 {
		t.Errorf("OpenStreams %d, want 12", n)
	}
	// One user alone stops at PerUser: free the total by closing user 1's.
	for _, res := range open[1] {
		res.Body.Close()
	}
	waitFor(t, func() bool { return f.api.OpenStreams() == 6 }, "streams to close")
	got := 0
	for range 4 {
		res, err := f.openStream(ctx, t, tokens[0], 0)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode == http.StatusOK {
			got++
			defer res.Body.Close()
		} else {
			res.Body.Close()
		}
	}
	if got != 2 {
		t.Errorf("user 0 opened %d more, want 2 (8 per user)", got)
	}
	for _, res := range open[0] {
		res.Body.Close()
	}
}

func waitFor(t testing.TB, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sseMessage is one message read from a stream.
type sseMessage struct {
	id      int64
	typ     string
	data    string
	comment string
}

// readSSE sends the stream's messages (and comment lines) to the channel,
// closed when the stream ends.
func readSSE(body io.Reader) <-chan sseMessage {
	ch := make(chan sseMessage, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		var m sseMessage
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if m.typ != "" {
					ch <- m
				}
				m = sseMessage{}
			case strings.HasPrefix(line, ":"):
				ch <- sseMessage{comment: strings.TrimSpace(line[1:])}
			case strings.HasPrefix(line, "id: "):
				m.id, _ = strconv.ParseInt(line[4:], 10, 64)
			case strings.HasPrefix(line, "event: "):
				m.typ = line[7:]
			case strings.HasPrefix(line, "data: "):
				m.data = line[6:]
			}
		}
	}()
	return ch
}

// TestStreamReplayIsPaged: 20 streams resuming with Last-Event-ID: 1 over a
// backlog of 50,000 events each get their first byte at once (the headers
// go out before any query), replay in id order up to ReplayMax and then a
// reload message, while the heap grows by a few pages, not by the backlog
// (which the old handler loaded whole before writing anything).
func TestStreamReplayIsPaged(t *testing.T) {
	const backlog, streams, replayMax = 50000, 20, 5000
	f, admin := newStreamEnv(t, sluicehttp.StreamSettings{PerUser: streams, ReplayMax: replayMax})
	if _, err := f.db.SQL().Exec(`INSERT INTO events (namespace, at, kind, node, rule, from_state, to_state, detail, dedupe_key)
		SELECT 'shop', now(), 'degrade', 'gw-' || (g % 7), 'api-' || (g % 13), 'normal', 'shed', '{"level": 1, "reason": "a stored event of the backlog"}', 'bulk/' || g
		FROM generate_series(1, $1) g`, backlog); err != nil {
		t.Fatal(err)
	}
	var first int64
	if err := f.db.SQL().QueryRow("SELECT min(id) FROM events WHERE namespace = 'shop'").Scan(&first); err != nil {
		t.Fatal(err)
	}
	from := max(first, 2) // the first event after Last-Event-ID: 1
	bearer := f.token(admin, sluice.RoleViewer).bearer
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	firstByte := make([]time.Duration, streams)
	errs := make(chan error, streams)
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			res, err := f.openStream(ctx, t, bearer, 1)
			if err != nil {
				errs <- err
				return
			}
			defer res.Body.Close()
			if res.StatusCode != http.StatusOK {
				errs <- fmt.Errorf("status %d", res.StatusCode)
				return
			}
			msgs := readSSE(res.Body)
			n, last := 0, int64(1)
			for m := range msgs {
				if firstByte[i] == 0 {
					firstByte[i] = time.Since(t0)
				}
				switch m.typ {
				case sluice.StreamEvent:
					if m.id <= last {
						errs <- fmt.Errorf("event %d after %d", m.id, last)
						return
					}
					last = m.id
					n++
				case sluicehttp.StreamReload:
					var d struct{ LastEventID int64 }
					switch {
					case json.Unmarshal([]byte(m.data), &d) != nil || d.LastEventID != last:
						errs <- fmt.Errorf("reload %s after event %d", m.data, last)
					case n != replayMax || last != from+replayMax-1:
						errs <- fmt.Errorf("replayed %d events up to %d, want %d up to %d", n, last, replayMax, from+replayMax-1)
					default:
						errs <- nil
					}
					return
				}
			}
			errs <- fmt.Errorf("stream ended after %d events without a reload message", n)
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(stop)
	<-sampled
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	slowest := time.Duration(0)
	for _, d := range firstByte {
		slowest = max(slowest, d)
	}
	growth := int64(peak.Load()) - int64(base.HeapAlloc)
	t.Logf("%d streams over %d events: slowest first byte %s, all replayed (%d each) in %s, heap growth %.1f MiB",
		streams, backlog, slowest, replayMax, took, float64(growth)/(1<<20))
	if slowest > time.Second {
		t.Errorf("slowest first byte %s, want at most 1s", slowest)
	}
	// Each stream holds a page of 500 events (about 0.3 MiB decoded); the
	// whole backlog is about 25 MiB decoded per stream.
	if growth > 64<<20 {
		t.Errorf("heap grew by %.1f MiB, want at most 64 MiB", float64(growth)/(1<<20))
	}
}

// TestStreamLifetimes: an idle stream writes heartbeats and ends after
// Idle without a message; a busy one ends after Lifetime; the server
// closing its streams ends them all.
func TestStreamLifetimes(t *testing.T) {
	t.Parallel()
	f, admin := newStreamEnv(t, sluicehttp.StreamSettings{Heartbeat: 20 * time.Millisecond, Idle: 300 * time.Millisecond, Lifetime: 2 * time.Second})
	bearer := f.token(admin, sluice.RoleViewer).bearer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends := func(desc string, within time.Duration, during func()) {
		t.Helper()
		res, err := f.openStream(ctx, t, bearer, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		msgs := readSSE(res.Body)
		t0 := time.Now()
		beats := 0
		done := make(chan struct{})
		go func() {
			defer close(done)
			if during != nil {
				during()
			}
		}()
		for m := range msgs {
			if m.comment == "keep-alive" {
				beats++
			}
		}
		took := time.Since(t0)
		<-done
		if beats == 0 {
			t.Errorf("%s: no heartbeat", desc)
		}
		if took > within {
			t.Errorf("%s: ended after %s, want within %s", desc, took, within)
		}
		t.Logf("%s: ended after %s with %d heartbeats", desc, took, beats)
	}
	ends("idle", 1500*time.Millisecond, nil)
	ends("busy", 5*time.Second, func() {
		for range 40 { // 4s of messages every 100ms: never idle
			f.hub.Publish("shop", sluice.StreamNode, 0, map[string]string{"id": "gw-1"})
			time.Sleep(100 * time.Millisecond)
		}
	})
	if f.api.OpenStreams() != 0 {
		t.Errorf("%d streams open after they ended", f.api.OpenStreams())
	}
	res, err := f.openStream(ctx, t, bearer, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	msgs := readSSE(res.Body)
	<-msgs // the opening comment
	f.api.CloseStreams()
	for range msgs {
	}
}
