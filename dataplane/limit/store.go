package limit

import (
	"math/bits"
	"sync"
)

const (
	refBit       = uint64(1) << 63 // CLOCK reference bit, kept in slot.h
	hashMask     = ^refBit
	maxShards    = 256
	minSlots     = 8
	keysPerShard = 64 // below this many keys per shard, use fewer shards
)

// slot is one key: its hash (0 = empty; top bit = referenced) and its state.
// 24 bytes; the table is the index, so there is nothing else per key.
type slot struct {
	h    uint64
	a, b int64
}

// shard is an open-addressing hash table with linear probing and backward-
// shift deletion (no tombstones), guarded by one mutex. Its size is any
// integer (home maps hashes by multiplication), so that a full shard holds
// its cap at load 3/4: 24/0.75 = 32 bytes per key.
type shard struct {
	mu    sync.Mutex
	slots []slot
	n     int
	hand  uint64
	_     [64 - 8 - 24 - 8 - 8]byte // keep shards on separate cache lines
}

// store maps key hashes to algorithm state in bounded memory. Keys are
// spread over up to 256 shards; each holds at most perShard keys. At the cap,
// inserting a key evicts one by CLOCK (second chance): every hit sets a
// key's reference bit; the eviction hand walks the shard, forgets the first
// key that is idle (its state is a fresh key's, so forgetting it changes no
// decision), else clears reference bits until it finds a key not referenced
// since the hand last passed it, the shard's approximation of least recently
// used. Safe for concurrent use.
type store struct {
	shards   []shard
	shift    uint // shard index = hash >> shift (bits below the reference bit)
	perShard int
	maxSlots int
}

func newStore(maxKeys int) *store {
	if maxKeys < 1 {
		maxKeys = 1
	}
	ns := 1
	for ns < maxShards && ns*keysPerShard*2 <= maxKeys {
		ns *= 2
	}
	s := &store{shards: make([]shard, ns), perShard: (maxKeys + ns - 1) / ns}
	s.shift = uint(63 - bits.TrailingZeros(uint(ns)))
	// The largest table keeps the load at or below 3/4 at the cap.
	s.maxSlots = max(minSlots, (s.perShard*4+2)/3+1)
	return s
}

// keyHash normalizes a 64-bit key hash: the reference bit cleared, never 0.
func keyHash(h uint64) uint64 {
	h &= hashMask
	if h == 0 {
		h = 1
	}
	return h
}

func (s *store) shard(h uint64) *shard {
	if len(s.shards) == 1 {
		return &s.shards[0]
	}
	return &s.shards[h>>s.shift]
}

// find returns the index of h's slot or -1. The shard must be locked.
func (sh *shard) find(h uint64) int {
	if len(sh.slots) == 0 {
		return -1
	}
	n := len(sh.slots)
	for i := home(h, n); ; i = next(i, n) {
		switch sh.slots[i].h &^ refBit {
		case h:
			return i
		case 0:
			return -1
		}
	}
}

// home is h's first slot in a table of n: the low 32 bits of h mapped onto
// [0, n) by multiplication (any n, not only powers of two; the high bits
// choose the shard).
func home(h uint64, n int) int { return int((h & 0xffffffff) * uint64(n) >> 32) }

func next(i, n int) int {
	if i++; i == n {
		return 0
	}
	return i
}

// insert adds h (not present) with a fresh state, making room first, and
// returns its index. The shard must be locked.
//
// It returns -1 when the shard is full and no key could be forgotten (only
// concurrency keys with requests in flight): the new key is not tracked.
func (sh *shard) insert(s *store, p *params, h uint64, now int64) int {
	if sh.n >= s.perShard && !sh.evict(p, now) {
		return -1
	}
	if len(sh.slots) == 0 || (sh.n+1)*4 > len(sh.slots)*3 && len(sh.slots) < s.maxSlots {
		sh.resize(min(s.maxSlots, max(minSlots, len(sh.slots)*2)))
	}
	n := len(sh.slots)
	i := home(h, n)
	for sh.slots[i].h != 0 {
		i = next(i, n)
	}
	sh.slots[i] = slot{h: h | refBit}
	sh.n++
	return i
}

func (sh *shard) resize(n int) {
	old := sh.slots
	sh.slots = make([]slot, n)
	for _, sl := range old {
		if sl.h == 0 {
			continue
		}
		i := home(sl.h, n)
		for sh.slots[i].h != 0 {
			i = next(i, n)
		}
		sh.slots[i] = sl
	}
}

// deleteAt empties slot i, shifting back the entries of its probe run.
func (sh *shard) deleteAt(i int) {
	n := len(sh.slots)
	j := i
	for {
		j = next(j, n)
		if sh.slots[j].h == 0 {
			break
		}
		k := home(sh.slots[j].h, n) // home of entry j
		// Entry j stays if its home lies cyclically in (i, j].
		if (i <= j && i < k && k <= j) || (i > j && (i < k || k <= j)) {
			continue
		}
		sh.slots[i] = sh.slots[j]
		i = j
	}
	sh.slots[i] = slot{}
	sh.n--
}

// evict forgets one key: the first idle one under the hand, else the first
// one whose reference bit is clear (CLOCK). A concurrency key with requests
// in flight is never forgotten (its releases would find nothing and its
// count would be lost); it reports whether a key was forgotten.
func (sh *shard) evict(p *params, now int64) bool {
	n := uint64(len(sh.slots))
	for range 2*len(sh.slots) + 1 {
		i := int(sh.hand % n)
		sh.hand++
		sl := &sh.slots[i]
		if sl.h == 0 {
			continue
		}
		idle := p.idle(sl.a, sl.b, now)
		if idle || (sl.h&refBit == 0 && !p.alg.inFlight()) {
			sh.deleteAt(i)
			// Deletion shifts later entries of the probe run back, into
			// slots at or after i: start the next turn at i so that the hand
			// does not skip them.
			sh.hand = uint64(i)
			return true
		}
		sl.h &^= refBit
	}
	return false
}

// take runs one Take for h.
func (s *store) take(p *params, h uint64, now, cost int64) Decision {
	sh := s.shard(h)
	sh.mu.Lock()
	i := sh.find(h)
	if i < 0 {
		if cost > p.capacity() {
			// A fresh key rejects this cost (cost above capacity): answer
			// without storing a key whose state would stay fresh.
			sh.mu.Unlock()
			return p.never(0, 0, now)
		}
		if i = sh.insert(s, p, h, now); i < 0 {
			// Every tracked key is busy: refuse rather than lose a count.
			sh.mu.Unlock()
			return p.never(0, 0, now)
		}
	}
	sl := &sh.slots[i]
	sl.h |= refBit
	var d Decision
	sl.a, sl.b, d = p.take(sl.a, sl.b, now, cost)
	sh.mu.Unlock()
	return d
}

// refund runs one Refund for h; an absent key has nothing to give back.
func (s *store) refund(p *params, h uint64, now, cost int64) {
	sh := s.shard(h)
	sh.mu.Lock()
	if i := sh.find(h); i >= 0 {
		sl := &sh.slots[i]
		sl.a, sl.b = p.refund(sl.a, sl.b, now, cost)
	}
	sh.mu.Unlock()
}

// sweep forgets every idle key and shrinks tables left mostly empty. It
// returns the number of keys forgotten. It locks one shard at a time.
func (s *store) sweep(p *params, now int64) int {
	removed := 0
	for k := range s.shards {
		sh := &s.shards[k]
		sh.mu.Lock()
		for i := 0; i < len(sh.slots); {
			sl := &sh.slots[i]
			if sl.h != 0 && p.idle(sl.a, sl.b, now) {
				sh.deleteAt(i) // may shift another entry into i: look again
				removed++
				continue
			}
			i++
		}
		for len(sh.slots) > minSlots && sh.n*8 < len(sh.slots) {
			sh.resize(len(sh.slots) / 2)
		}
		if sh.n == 0 {
			sh.slots = nil
		}
		sh.mu.Unlock()
	}
	return removed
}

// len returns the number of keys held.
func (s *store) len() int {
	n := 0
	for k := range s.shards {
		sh := &s.shards[k]
		sh.mu.Lock()
		n += sh.n
		sh.mu.Unlock()
	}
	return n
}

// each calls f with every key's hash and state, one shard locked at a time.
func (s *store) each(f func(h uint64, a, b int64)) {
	for k := range s.shards {
		sh := &s.shards[k]
		sh.mu.Lock()
		for _, sl := range sh.slots {
			if sl.h != 0 {
				f(sl.h&hashMask, sl.a, sl.b)
			}
		}
		sh.mu.Unlock()
	}
}

// put sets h's state, inserting it if needed; a key that finds its shard
// full of busy concurrency keys is dropped.
func (s *store) put(p *params, h uint64, a, b, now int64) {
	sh := s.shard(h)
	sh.mu.Lock()
	i := sh.find(h)
	if i < 0 {
		if i = sh.insert(s, p, h, now); i < 0 {
			sh.mu.Unlock()
			return
		}
	}
	sh.slots[i].a, sh.slots[i].b = a, b
	sh.mu.Unlock()
}
