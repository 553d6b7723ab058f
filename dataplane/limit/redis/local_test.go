package redislimit

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// TestLocalFallbackShare checks that onStoreError: local enforces this
// node's share of the rule: rate and burst divided by the live nodes, the
// burst rounded up, and, when the node count changes, a new share that
// carries each key over at the same fill.
func TestLocalFallbackShare(t *testing.T) {
	t.Parallel()
	var nodes atomic.Int64
	f := newLocalFallback(10, 10, time.Second, nodes.Load, 1000)
	tests := []struct {
		desc  string
		nodes int64
		at    time.Duration // since the start
		key   string
		want  int // allowed of 20 takes of 1
	}{
		{desc: "one node: the whole burst", nodes: 1, key: "a", want: 10},
		{desc: "three nodes: ceil(10/3)", nodes: 3, key: "b", want: 4},
		{desc: "three nodes, 300ms later: rate 10/3 per second refilled one", nodes: 3, at: 300 * time.Millisecond, key: "b", want: 1},
		{desc: "two nodes: a share of 5, still spent", nodes: 2, at: 300 * time.Millisecond, key: "b", want: 0},
		{desc: "two nodes, 200ms later: rate 10/2 per second refilled one", nodes: 2, at: 500 * time.Millisecond, key: "b", want: 1},
		{desc: "two nodes: a fresh key gets the share", nodes: 2, at: 500 * time.Millisecond, key: "d", want: 5},
		{desc: "a thousand nodes: at least 1", nodes: 1000, key: "c", want: 1},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			nodes.Store(tc.nodes)
			got := 0
			for range 20 {
				if f.take(tc.key, 1, int64(tc.at)).Allowed {
					got++
				}
			}
			if got != tc.want {
				t.Fatalf("%d of 20 allowed, want %d", got, tc.want)
			}
		})
	}
}

// TestLocalFallbackKeepsSpentKeys checks that a full key table forgets keys
// whose state changes no decision (full buckets) before a spent one, so that
// a flood of new keys cannot hand a spent key a fresh burst. (The fallback's
// own token bucket before limit.Local forgot an arbitrary key.)
func TestLocalFallbackKeepsSpentKeys(t *testing.T) {
	t.Parallel()
	one := func() int64 { return 1 }
	f := newLocalFallback(1, 1, time.Hour, one, 256) // one unit an hour
	t1 := int64(2 * time.Hour)
	for i := range 200 { // spent at 0, full again by t1
		f.take("cold"+strconv.Itoa(i), 1, 0)
	}
	for i := range 32 {
		if !f.take("hot"+strconv.Itoa(i), 1, t1).Allowed {
			t.Fatalf("hot%d: first take refused", i)
		}
	}
	for i := range 20 {
		f.take("new"+strconv.Itoa(i), 1, t1)
	}
	for i := range 32 {
		if d := f.take("hot"+strconv.Itoa(i), 1, t1); d.Allowed {
			t.Fatalf("hot%d: a spent key was forgotten and admitted again", i)
		}
	}
}
