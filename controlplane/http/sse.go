package http

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"sync"
	"time"
)

// StreamSettings bounds the event streams (GET /namespaces/{ns}/stream):
// how many a user and the server hold open, how a resumed stream replays
// what it missed, and how long a stream lives. Each zero value means the
// default named on its field.
type StreamSettings struct {
	// PerUser is how many streams one user (all their sessions and tokens
	// together) may hold open; zero means 8. Beyond it the stream is
	// answered 429 with Retry-After.
	PerUser int
	// Total is how many streams the server holds open; zero means 512.
	Total int
	// RetryAfter is the Retry-After of a refused stream; zero means 10s.
	RetryAfter time.Duration
	// Heartbeat is how often an idle stream writes a comment line; zero
	// means 15s.
	Heartbeat time.Duration
	// Idle ends a stream that sent no message (heartbeats aside) for this
	// long; zero means 10m. The client reconnects with Last-Event-ID.
	Idle time.Duration
	// Lifetime ends every stream after this long; zero means 1h. The
	// client reconnects with Last-Event-ID.
	Lifetime time.Duration
	// ReplayPage is how many events one replay query reads (keyset paged
	// by id); zero means 500, and at most 1000 are read.
	ReplayPage int
	// ReplayQueries is how many replay queries run at once, server-wide
	// (each holds a database connection while it runs); zero means 4.
	// Replays wait their turn page by page, so that resumed streams never
	// starve the API of connections.
	ReplayQueries int
	// ReplayMax is how many missed events a resumed stream replays; past
	// it the stream sends a `reload` message and ends (the client reloads
	// its views and reconnects without Last-Event-ID); zero means 10000.
	ReplayMax int
}

func (s *StreamSettings) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&s.PerUser, 8)
	def(&s.Total, 512)
	def(&s.ReplayPage, 500)
	s.ReplayPage = min(s.ReplayPage, 1000) // the events' page limit
	def(&s.ReplayMax, 10000)
	def(&s.ReplayQueries, 4)
	defDur(&s.RetryAfter, 10*time.Second)
	defDur(&s.Heartbeat, 15*time.Second)
	defDur(&s.Idle, 10*time.Minute)
	defDur(&s.Lifetime, time.Hour)
}

// streamSlots counts the open streams per user and in total. Safe for
// concurrent use.
type streamSlots struct {
	perUser, total int

	mu     sync.Mutex
	n      int
	byUser map[int64]int
}

func newStreamSlots(perUser, total int) *streamSlots {
	return &streamSlots{perUser: perUser, total: total, byUser: map[int64]int{}}
}

// take reserves a stream for user; false when the user or the server is at
// its cap. release gives the slot back.
func (s *streamSlots) take(user int64) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n >= s.total || s.byUser[user] >= s.perUser {
		return nil, false
	}
	s.n++
	s.byUser[user]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.n--
			if s.byUser[user]--; s.byUser[user] <= 0 {
				delete(s.byUser, user)
			}
		})
	}, true
}

// open returns the number of streams held open.
func (s *streamSlots) open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// writeSSE writes one server-sent event of type typ with v as its JSON data
// and id, when not zero, as its id.
func writeSSE(w io.Writer, typ string, id int64, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeSSERaw(w, typ, id, b)
}

// writeSSERaw writes one server-sent event with data already JSON (one
// line: encoding/json never writes a newline inside a value).
func writeSSERaw(w io.Writer, typ string, id int64, data []byte) error {
	var buf bytes.Buffer
	if id != 0 {
		buf.WriteString("id: ")
		buf.WriteString(strconv.FormatInt(id, 10))
		buf.WriteByte('\n')
	}
	buf.WriteString("event: ")
	buf.WriteString(typ)
	buf.WriteString("\ndata: ")
	buf.Write(bytes.ReplaceAll(data, []byte("\n"), []byte(" ")))
	buf.WriteString("\n\n")
	_, err := w.Write(buf.Bytes())
	return err
}
