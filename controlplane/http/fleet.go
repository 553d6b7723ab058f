package http

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

// The fleet routes: stats, events and the stream (DESIGN "Live traffic and
// events").

func (s *Server) fleetNamespace(c *gin.Context) (string, error) {
	ns, err := nsParam(c)
	if err != nil {
		return "", err
	}
	if _, err := s.s.Namespaces.FindNamespaceByName(c.Request.Context(), ns); err != nil {
		return "", err
	}
	return ns, nil
}

func (s *Server) getStats(c *gin.Context) error {
	if s.s.Stats == nil {
		return sluice.Errorf(sluice.EUNAVAILABLE, "stats are not configured (the control plane does not follow node reports)")
	}
	ns, err := s.fleetNamespace(c)
	if err != nil {
		return err
	}
	q := sluice.StatsQuery{Namespace: ns, Node: c.Query("node"), Rule: c.Query("rule")}
	if q.Since, err = timeQuery(c, "since"); err != nil {
		return err
	}
	if v := c.Query("step"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return &sluice.Error{Code: sluice.EINVALID, Message: "invalid query parameter",
				Fields: api.Errors{{Path: "step", Message: fmt.Sprintf("%q is not a positive duration such as 5s or 1m", v)}}}
		}
		q.Step = d
	}
	if q.Node != "" && !api.ValidNodeID(q.Node) {
		return &sluice.Error{Code: sluice.EINVALID, Message: "invalid query parameter",
			Fields: api.Errors{{Path: "node", Message: api.NodeIDRule}}}
	}
	st, err := s.s.Stats.FindStats(c.Request.Context(), q)
	return reply(c, http.StatusOK, st, err)
}

// kindsQuery parses ?kind=a,b; EINVALID naming an unknown kind.
func kindsQuery(c *gin.Context) ([]sluice.EventKind, error) {
	v := c.Query("kind")
	if v == "" {
		return nil, nil
	}
	var out []sluice.EventKind
	for k := range strings.SplitSeq(v, ",") {
		k = strings.TrimSpace(k)
		if !slices.Contains(sluice.EventKinds, sluice.EventKind(k)) {
			return nil, &sluice.Error{Code: sluice.EINVALID, Message: "invalid query parameter",
				Fields: api.Errors{{Path: "kind", Message: fmt.Sprintf("unknown event kind %q (degrade, breaker, publish, rollback, canary, override, node_joined, node_left, apply_error)", k)}}}
		}
		out = append(out, sluice.EventKind(k))
	}
	return out, nil
}

func (s *Server) listEvents(c *gin.Context) error {
	if s.s.Events == nil {
		return sluice.Errorf(sluice.EUNAVAILABLE, "events are not configured")
	}
	ns, err := s.fleetNamespace(c)
	if err != nil {
		return err
	}
	f := sluice.EventFilter{Namespace: ns, Node: c.Query("node"), Rule: c.Query("rule")}
	if f.Since, err = timeQuery(c, "since"); err != nil {
		return err
	}
	if f.Kinds, err = kindsQuery(c); err != nil {
		return err
	}
	if f.Before, f.Limit, err = pageQuery(c); err != nil {
		return err
	}
	items, next, err := s.s.Events.FindEvents(c.Request.Context(), f)
	if items == nil {
		items = []*sluice.Event{}
	}
	return reply(c, http.StatusOK, list[*sluice.Event]{Items: items, Next: next}, err)
}

// lastEventID returns the stream's resume point: the Last-Event-ID header
// or the lastEventId query parameter, 0 when neither; EINVALID when not a
// non-negative integer.
func lastEventID(c *gin.Context) (int64, error) {
	v := c.GetHeader("Last-Event-ID")
	if v == "" {
		v = c.Query("lastEventId")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, &sluice.Error{Code: sluice.EINVALID, Message: "invalid Last-Event-ID",
			Fields: api.Errors{{Path: "Last-Event-ID", Message: "must be an event id (a non-negative integer)"}}}
	}
	return n, nil
}

// StreamReload is the message type that tells a resumed stream's client
// that it missed more events than are replayed: it reloads its views and
// reconnects without Last-Event-ID.
const StreamReload = "reload"

func (s *Server) stream(c *gin.Context) error {
	if s.s.Stream == nil {
		return sluice.Errorf(sluice.EUNAVAILABLE, "the stream is not configured")
	}
	ns, err := s.fleetNamespace(c)
	if err != nil {
		return err
	}
	after, err := lastEventID(c)
	if err != nil {
		return err
	}
	st := s.s.Streams
	release, ok := s.streams.take(actorOf(c).User.ID)
	if !ok {
		c.Set(ctxRetryAfter, max(1, int(st.RetryAfter.Round(time.Second)/time.Second)))
		return sluice.Errorf(sluice.ERATELIMITED, "too many open streams (at most %d per user and %d in all); retry later", st.PerUser, st.Total)
	}
	defer release()
	ctx, cancel := context.WithTimeout(c.Request.Context(), st.Lifetime)
	defer cancel()
	stop := context.AfterFunc(s.closing, cancel)
	defer stop()
	// Subscribe before replaying, so that nothing falls between the two;
	// live events the replay already sent are skipped by id.
	msgs, unsubscribe := s.s.Stream.Subscribe(ns)
	defer unsubscribe()
	w := c.Writer
	// The server's WriteTimeout would end a stream after minutes: each
	// write gets its own deadline instead (where the writer supports it).
	rc := http.NewResponseController(w)
	extend := func() { _ = rc.SetWriteDeadline(time.Now().Add(2 * st.Heartbeat)) }
	extend()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// The headers go out before any replay query: the first byte never
	// waits for the backlog.
	if _, err := w.WriteString(": stream\n\n"); err != nil {
		return nil
	}
	w.Flush()
	last := after
	if after > 0 && s.s.Events != nil {
		var ok bool
		if last, ok = s.replay(ctx, w, ns, after, extend); !ok {
			return nil
		}
	}
	keep := time.NewTicker(st.Heartbeat)
	defer keep.Stop()
	idle := time.NewTimer(st.Idle)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil // the lifetime or the server's: the client reconnects with Last-Event-ID
		case <-idle.C:
			return nil
		case <-keep.C:
			extend()
			if _, err := w.WriteString(": keep-alive\n\n"); err != nil {
				return nil
			}
			w.Flush()
		case m, ok := <-msgs:
			if !ok {
				return nil // too slow: the client reconnects with Last-Event-ID
			}
			if m.ID != 0 {
				if m.ID <= last {
					continue
				}
				last = m.ID
			}
			extend()
			if err := writeSSERaw(w, m.Type, m.ID, m.Data); err != nil {
				return nil
			}
			w.Flush()
			idle.Reset(st.Idle)
		}
	}
}

// replay writes ns's events after id after, read from Postgres a page at a
// time (a keyset query on id, so that memory holds one page whatever the
// backlog), each page flushed as it is written. Past ReplayMax events it
// writes a reload message instead. It returns the last id written and
// whether the stream goes on.
func (s *Server) replay(ctx context.Context, w gin.ResponseWriter, ns string, after int64, extend func()) (int64, bool) {
	st := s.s.Streams
	sent := 0
	for {
		select {
		case s.replays <- struct{}{}:
		case <-ctx.Done():
			return after, false
		}
		page, _, err := s.s.Events.FindEvents(ctx, sluice.EventFilter{Namespace: ns, After: after, Limit: st.ReplayPage})
		<-s.replays
		if err != nil {
			if ctx.Err() == nil {
				s.s.Logger.Warn("stream replay", "namespace", ns, "after", after, "err", err)
			}
			return after, false // the client reconnects with Last-Event-ID
		}
		extend()
		for _, ev := range page {
			if sent == st.ReplayMax {
				_ = writeSSE(w, StreamReload, 0, map[string]any{"lastEventId": after,
					"reason": fmt.Sprintf("more than %d events were missed; reload and reconnect without Last-Event-ID", st.ReplayMax)})
				w.Flush()
				return after, false
			}
			if err := writeSSE(w, sluice.StreamEvent, ev.ID, ev); err != nil {
				return after, false
			}
			after = ev.ID
			sent++
		}
		w.Flush()
		if len(page) < st.ReplayPage {
			return after, true
		}
	}
}
