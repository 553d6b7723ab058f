package identity

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sluicegw/sluice/dataplane/reqview"
)

// DefaultCacheEntries bounds a Cache when its size is not given.
const DefaultCacheEntries = 65536

const cacheShards = 32

// Cache remembers verification results per token, so that a token seen
// before costs one map lookup and no allocation. It holds at most its
// bound of entries (a full shard drops an entry at random to make room);
// an entry holds until its token's exp (plus clock skew) for a valid
// token, and for a failed one at most a minute and only while the key set
// is the one it failed with. Safe for concurrent use.
type Cache struct {
	perShard int
	shards   [cacheShards]cacheShard
}

// cacheShard is a sync.Map (reads take no lock, so cores verifying the
// same popular token do not contend on one) with a count that bounds it;
// mu serializes writers only.
type cacheShard struct {
	m  sync.Map // string → *entry
	n  atomic.Int64
	mu sync.Mutex
	_  [32]byte // keep shards on separate cache lines
}

// entry is one cached result: claims (valid) or reason (failed), until
// (Unix nanoseconds), and for a failure the key set generation it failed
// with.
type entry struct {
	claims *reqview.Claims
	reason string
	until  int64
	gen    uint64
}

// NewCache returns a Cache of at most n entries (0: DefaultCacheEntries).
func NewCache(n int) *Cache {
	if n <= 0 {
		n = DefaultCacheEntries
	}
	return &Cache{perShard: max(1, n/cacheShards)}
}

// shard picks a token's shard from its last bytes (the signature's, which
// are uniformly spread for real tokens).
func (c *Cache) shard(tok string) *cacheShard {
	h := uint(0)
	if n := len(tok); n >= 2 {
		h = uint(tok[n-1]) + uint(tok[n-2])*31
	}
	return &c.shards[h%cacheShards]
}

func (c *Cache) get(tok string) (entry, bool) {
	v, ok := c.shard(tok).m.Load(tok)
	if !ok {
		return entry{}, false
	}
	return *v.(*entry), true
}

func (c *Cache) put(tok string, e entry) {
	s := c.shard(tok)
	tok = strings.Clone(tok) // the request's header may be reused
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, loaded := s.m.Swap(tok, &e); loaded {
		return
	}
	if s.n.Add(1) <= int64(c.perShard) {
		return
	}
	// Over the bound: drop another entry (the first Range yields, which
	// follows the hash of the keys: an arbitrary victim).
	s.m.Range(func(k, _ any) bool {
		if k.(string) == tok {
			return true
		}
		s.m.Delete(k)
		s.n.Add(-1)
		return false
	})
}

// Len is the number of entries.
func (c *Cache) Len() int {
	n := 0
	for i := range c.shards {
		n += int(c.shards[i].n.Load())
	}
	return n
}
