package sluice

import (
	"encoding/json"
	"sync"
)

// Hub is the in-memory StreamHub of one control-plane replica: Publish
// hands a message to every subscriber of its namespace. A subscriber whose
// buffer is full is dropped (its channel closed), never waited for. The
// zero value is ready; safe for concurrent use.
type Hub struct {
	// Buffer is each subscriber's channel capacity; zero means 256.
	Buffer int

	mu   sync.Mutex
	subs map[string]map[chan StreamMessage]struct{}
}

var _ StreamHub = (*Hub)(nil)

// Subscribe implements StreamHub.
func (h *Hub) Subscribe(ns string) (<-chan StreamMessage, func()) {
	n := h.Buffer
	if n <= 0 {
		n = 256
	}
	ch := make(chan StreamMessage, n)
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[string]map[chan StreamMessage]struct{}{}
	}
	if h.subs[ns] == nil {
		h.subs[ns] = map[chan StreamMessage]struct{}{}
	}
	h.subs[ns][ch] = struct{}{}
	h.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if _, ok := h.subs[ns][ch]; ok {
				delete(h.subs[ns], ch)
				close(ch)
			}
		})
	}
}

// Publish sends a message of type typ with v as JSON data (and id, for
// events) to ns's subscribers.
func (h *Hub) Publish(ns, typ string, id int64, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	m := StreamMessage{Type: typ, ID: id, Data: b}
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs[ns] {
		select {
		case ch <- m:
		default:
			delete(h.subs[ns], ch) // too slow: it reconnects with Last-Event-ID
			close(ch)
		}
	}
}

// Subscribers counts ns's subscribers.
func (h *Hub) Subscribers(ns string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[ns])
}
