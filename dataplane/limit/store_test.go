package limit

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
)

func TestStoreExpiresIdleKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc  string
		limit api.Limit
		cost  int64
		idle  time.Duration // after this long every key is a fresh key's
	}{
		{"token bucket: full again", api.Limit{Algorithm: api.TokenBucket, Rate: 10, Burst: 20}, 20, 2 * time.Second},
		{"leaky bucket: drained", api.Limit{Algorithm: api.LeakyBucket, Rate: 10, Burst: 20, MaxDelay: api.Duration(time.Minute)}, 20, 2 * time.Second},
		// Windows start 123ns before t0.
		{"fixed window: next window", api.Limit{Algorithm: api.FixedWindow, Rate: 10}, 1, time.Second - 123},
		{"sliding window: two windows on", api.Limit{Algorithm: api.SlidingWindow, Rate: 10}, 1, 2*time.Second - 123},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			tt.limit.Key = []string{"ip"}
			lo := mustLocal(t, tt.limit)
			ctx := context.Background()
			for i := range 100 {
				lo.Take(ctx, fmt.Sprint("k", i), tt.cost, t0)
			}
			if n := lo.Sweep(t0 + int64(tt.idle) - 1); n != 0 {
				t.Fatalf("swept %d keys that still matter", n)
			}
			if n := lo.Len(); n != 100 {
				t.Fatalf("%d keys, want 100", n)
			}
			if n := lo.Sweep(t0 + int64(tt.idle)); n != 100 {
				t.Fatalf("swept %d idle keys, want 100", n)
			}
			if n := lo.Len(); n != 0 {
				t.Fatalf("%d keys left", n)
			}
			// Forgetting them changed nothing: a fresh key decides the same.
			d, _ := lo.Take(ctx, "k1", 1, t0+int64(tt.idle))
			f, _ := mustLocal(t, tt.limit).Take(ctx, "k1", 1, t0+int64(tt.idle))
			if d != f {
				t.Fatalf("forgotten key decides %+v, fresh key %+v", d, f)
			}
		})
	}
	t.Run("concurrency: nothing in flight", func(t *testing.T) {
		t.Parallel()
		lo := mustLocal(t, api.Limit{Algorithm: api.Concurrency, Rate: 2, Key: []string{"ip"}})
		ctx := context.Background()
		lo.Take(ctx, "a", 1, t0)
		lo.Take(ctx, "b", 1, t0)
		lo.Refund(ctx, "a", 1, t0)
		if n := lo.Sweep(t0); n != 1 || lo.Len() != 1 {
			t.Fatalf("swept %d, %d left; want 1 and 1", n, lo.Len())
		}
	})
}

func TestStoreEvictsLeastRecentlyUsedAtCap(t *testing.T) {
	t.Parallel()
	p, err := newParams(api.Limit{Algorithm: api.FixedWindow, Rate: 5, Period: api.Duration(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	st := newStore(64)
	has := func(h uint64) bool {
		sh := st.shard(h)
		sh.mu.Lock()
		defer sh.mu.Unlock()
		return sh.find(h) >= 0
	}
	// Fixed hashes (FNV-1a, not HashKey's per-process seed): which keys
	// share the hand's path depends on the hashes, and CLOCK only
	// approximates LRU, so a random seed made the survivors vary from run
	// to run.
	key := func(i int) uint64 {
		f := fnv.New64a()
		fmt.Fprint(f, "key-", i)
		return keyHash(f.Sum64())
	}
	for i := range 64 {
		st.take(&p, key(i), t0, 5) // every key in use: none is idle
	}
	// One more key: the hand passes every key, clearing reference bits, and
	// evicts one.
	st.take(&p, key(64), t0, 1)
	var first []int
	for i := range 32 {
		if has(key(i)) {
			first = append(first, i)
			st.take(&p, key(i), t0, 1) // used again since the hand passed
		}
	}
	for i := 65; i < 65+31; i++ {
		st.take(&p, key(i), t0, 1)
	}
	if n := st.len(); n > 64 {
		t.Fatalf("%d keys held, cap 64", n)
	}
	kept := 0
	for _, i := range first {
		if has(key(i)) {
			kept++
		}
	}
	if kept < len(first) {
		t.Fatalf("%d of %d recently used keys kept", kept, len(first))
	}
	second := 0
	for i := 32; i < 64; i++ {
		if has(key(i)) {
			second++
		}
	}
	if second > 1 { // 32 candidates, 31 evictions
		t.Fatalf("%d of 32 least recently used keys survived", second)
	}
}

func TestStoreCapBoundsKeys(t *testing.T) {
	t.Parallel()
	for _, maxKeys := range []int{1, 10, 1000, 5000} {
		l := (&api.RuleSet{Limits: []api.Limit{{Algorithm: api.TokenBucket, Rate: 5, Key: []string{"ip"}}}}).Normalize().Limits[0]
		lo, err := NewLocal(l, maxKeys)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 4 * maxKeys {
			lo.Take(context.Background(), fmt.Sprint(i), 1, t0)
		}
		st := lo.st
		if n := lo.Len(); n > st.perShard*len(st.shards) || n > maxKeys+len(st.shards)-1 {
			t.Fatalf("cap %d: %d keys held", maxKeys, n)
		}
		for i := range st.shards {
			if len(st.shards[i].slots) > st.maxSlots {
				t.Fatalf("cap %d: shard table %d slots > %d", maxKeys, len(st.shards[i].slots), st.maxSlots)
			}
		}
	}
}

// TestStoreDeleteKeepsProbeRuns checks backward-shift deletion against a map.
func TestStoreDeleteKeepsProbeRuns(t *testing.T) {
	t.Parallel()
	l := (&api.RuleSet{Limits: []api.Limit{{Algorithm: api.Concurrency, Rate: 1 << 20, Key: []string{"ip"}}}}).Normalize().Limits[0]
	lo, err := NewLocal(l, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	want := map[uint64]int64{}
	for range 50000 {
		// Few distinct hashes, low bits colliding: long probe runs.
		h := uint64(rng.IntN(300)) << 8
		if rng.IntN(2) == 0 {
			lo.TakeHash(h, 1, t0)
			want[h]++
		} else if want[h] > 0 {
			lo.RefundHash(h, 1, t0)
			want[h]--
		}
		if rng.IntN(1000) == 0 {
			lo.Sweep(t0) // deletes every key at zero
		}
	}
	n := 0
	for h, v := range want {
		if v == 0 {
			continue
		}
		n++
		d := lo.TakeHash(h, 1, t0)
		if d.Remaining != 1<<20-v-1 {
			t.Fatalf("hash %x: in flight %d, want %d", h, 1<<20-d.Remaining-1, v)
		}
	}
	lo.Sweep(t0)
	if lo.Len() > n {
		t.Fatalf("%d keys after sweep, want at most %d", lo.Len(), n)
	}
}

// TestStoreMemoryBound checks the bytes per key with many keys (the
// benchmark reports it at 1M).
func TestStoreMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates ~10MB")
	}
	perKey := measureBytesPerKey(t, 200_000)
	t.Logf("%.1f bytes/key", perKey)
	if perKey > 64 {
		t.Fatalf("%.1f bytes per key, bound 64", perKey)
	}
}

// measureBytesPerKey inserts n keys into a token-bucket limit capped at n and
// returns the heap growth per key after a GC, index included.
func measureBytesPerKey(tb testing.TB, n int) float64 {
	tb.Helper()
	l := (&api.RuleSet{Limits: []api.Limit{{Algorithm: api.TokenBucket, Rate: 5, Key: []string{"ip"}}}}).Normalize().Limits[0]
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	lo, err := NewLocal(l, n)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		lo.TakeHash(uint64(i)*0x9E3779B97F4A7C15, 1, t0)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if got := lo.Len(); got < n*99/100 {
		tb.Fatalf("%d keys held of %d", got, n)
	}
	runtime.KeepAlive(lo)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(lo.Len())
}
