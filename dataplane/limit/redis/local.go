package redislimit

import (
	"hash/maphash"
	"math"
	"sync"
	"time"
)

// localBucket is the in-memory limiter of onStoreError: local. It enforces
// the rule's rate and burst divided by the live nodes, as a token bucket per
// key (for every algorithm: while Redis is away, a bucket with capacity
// burst÷nodes refilled at rate÷nodes is the closest local stand-in for a
// window too). It keeps at most maxKeys keys; a full shard forgets a key.
type localBucket struct {
	rate   float64 // units per nanosecond, whole cluster
	burst  float64 // whole cluster
	nodes  func() int64
	max    int // keys per shard
	seed   maphash.Seed
	shards [localShards]localShard
}

const localShards = 32

type localShard struct {
	mu sync.Mutex
	m  map[string]*localState
}

type localState struct {
	tokens float64
	last   int64
}

func newLocalBucket(rate, burst int64, period time.Duration, nodes func() int64, maxKeys int) *localBucket {
	b := &localBucket{
		rate:  float64(rate) / float64(period),
		burst: float64(burst),
		nodes: nodes,
		max:   max(maxKeys/localShards, 1),
		seed:  maphash.MakeSeed(),
	}
	for i := range b.shards {
		b.shards[i].m = make(map[string]*localState)
	}
	return b
}

// take decides locally; it returns whether cost units were taken, the units
// left, and how long until cost units could be.
func (b *localBucket) take(key string, cost, now int64) (bool, int64, time.Duration, time.Duration) {
	n := float64(b.nodes())
	rate, burst := b.rate/n, math.Max(math.Ceil(b.burst/n), 1)
	sh := &b.shards[maphash.String(b.seed, key)%localShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	st := sh.m[key]
	if st == nil {
		if len(sh.m) >= b.max {
			for k := range sh.m { // forget an arbitrary key
				delete(sh.m, k)
				break
			}
		}
		st = &localState{tokens: burst, last: now}
		sh.m[key] = st
	}
	if el := now - st.last; el > 0 {
		st.tokens = math.Min(burst, st.tokens+float64(el)*rate)
		st.last = now
	}
	st.tokens = math.Min(st.tokens, burst) // the node count may have grown
	reset := time.Duration((burst - st.tokens) / rate)
	if c := float64(cost); st.tokens >= c {
		st.tokens -= c
		return true, int64(st.tokens), reset + time.Duration(c/rate), 0
	}
	return false, int64(st.tokens), reset, time.Duration((float64(cost) - st.tokens) / rate)
}

// refund gives units back, up to the capacity.
func (b *localBucket) refund(key string, cost int64) {
	n := float64(b.nodes())
	burst := math.Max(math.Ceil(b.burst/n), 1)
	sh := &b.shards[maphash.String(b.seed, key)%localShards]
	sh.mu.Lock()
	if st := sh.m[key]; st != nil {
		st.tokens = math.Min(burst, st.tokens+float64(cost))
	}
	sh.mu.Unlock()
}
