package postgres

import (
	"container/list"
	"sync"

	"github.com/sluicegw/sluice/api"
)

// byteCache is an LRU of immutable byte values bounded by their total size.
// Safe for concurrent use.
type byteCache struct {
	mu    sync.Mutex
	max   int
	size  int
	order *list.List // of *byteEntry, most recent first
	items map[string]*list.Element
}

type byteEntry struct {
	key string
	val []byte
}

func newByteCache(maxBytes int) *byteCache {
	return &byteCache{max: maxBytes, order: list.New(), items: map[string]*list.Element{}}
}

func (c *byteCache) get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*byteEntry).val, true
	}
	return nil, false
}

func (c *byteCache) put(key string, val []byte) {
	if len(val) > c.max/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.size -= len(e.Value.(*byteEntry).val)
		c.order.Remove(e)
	}
	c.items[key] = c.order.PushFront(&byteEntry{key: key, val: val})
	c.size += len(val)
	for c.size > c.max {
		last := c.order.Back()
		ent := last.Value.(*byteEntry)
		c.order.Remove(last)
		delete(c.items, ent.key)
		c.size -= len(ent.val)
	}
}

// diffCache keeps recent diffs by the checksums of their two sides: the
// content of a checksum never changes, so neither does the diff.
type diffCache struct {
	mu    sync.Mutex
	max   int
	order *list.List
	items map[[2]string]*list.Element
}

type diffEntry struct {
	key  [2]string
	diff *api.Diff
}

func newDiffCache(n int) *diffCache {
	return &diffCache{max: n, order: list.New(), items: map[[2]string]*list.Element{}}
}

// diff returns the diff between two documents of known checksums, computing
// it with decode when it is not cached. The returned Diff must not be changed.
func (c *diffCache) diff(fromSum, toSum string, decode func() (from, to *api.RuleSet, err error)) (*api.Diff, error) {
	key := [2]string{fromSum, toSum}
	c.mu.Lock()
	if e, ok := c.items[key]; ok {
		c.order.MoveToFront(e)
		c.mu.Unlock()
		return e.Value.(*diffEntry).diff, nil
	}
	c.mu.Unlock()
	from, to, err := decode()
	if err != nil {
		return nil, err
	}
	d := api.DiffRuleSets(from, to)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[key]; !ok {
		c.items[key] = c.order.PushFront(&diffEntry{key: key, diff: d})
		if c.order.Len() > c.max {
			last := c.order.Back()
			c.order.Remove(last)
			delete(c.items, last.Value.(*diffEntry).key)
		}
	}
	return d, nil
}
