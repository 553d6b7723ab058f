package identity

import (
	"strings"
	"sync"

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

type cacheShard struct {
	mu sync.RWMutex
	m  map[string]entry
	_  [40]byte // keep shards on separate cache lines
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
	c := &Cache{perShard: max(1, n/cacheShards)}
	for i := range c.shards {
		c.shards[i].m = make(map[string]entry)
	}
	return c
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
	s := c.shard(tok)
	s.mu.RLock()
	e, ok := s.m[tok]
	s.mu.RUnlock()
	return e, ok
}

func (c *Cache) put(tok string, e entry) {
	s := c.shard(tok)
	tok = strings.Clone(tok) // the request's header may be reused
	s.mu.Lock()
	if _, ok := s.m[tok]; !ok && len(s.m) >= c.perShard {
		for k := range s.m { // map order is random: a random victim
			delete(s.m, k)
			break
		}
	}
	s.m[tok] = e
	s.mu.Unlock()
}

// Len is the number of entries.
func (c *Cache) Len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}
