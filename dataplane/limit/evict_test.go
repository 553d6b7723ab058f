package limit

import (
	"testing"

	"github.com/sluicegw/sluice/api"
)

// TestConcurrencyKeysInFlightAreNotEvicted: at the key cap, a concurrency key
// with requests in flight is never forgotten (its count would be lost and the
// limit exceeded); a new key that finds every tracked key busy is refused,
// and is admitted again once one is released.
func TestConcurrencyKeysInFlightAreNotEvicted(t *testing.T) {
	t.Parallel()
	const maxKeys = 4
	lo, err := NewLocal(api.Limit{ID: "c", Key: []string{"header:X-User"}, Algorithm: api.Concurrency, Rate: 1}, maxKeys)
	if err != nil {
		t.Fatal(err)
	}
	now := int64(1)
	// Fill the store with busy keys (one request in flight each).
	var busy []uint64
	for h := uint64(1); len(busy) < maxKeys; h++ {
		if d := lo.TakeHash(h*0x9e3779b97f4a7c15, 1, now); d.Allowed {
			busy = append(busy, h*0x9e3779b97f4a7c15)
		}
	}
	// Many new keys arrive; none may push a busy key out.
	for h := uint64(1000); h < 1100; h++ {
		lo.TakeHash(h*0x9e3779b97f4a7c15, 1, now)
	}
	for _, h := range busy {
		if d := lo.TakeHash(h, 1, now); d.Allowed {
			t.Fatalf("busy key %x admitted a second request: its in-flight count was lost", h)
		}
	}
	// Release one busy key: it becomes idle and evictable, so a new key fits.
	lo.RefundHash(busy[0], 1, now)
	mix := uint64(0x9e3779b97f4a7c15)
	fresh := 5000 * mix
	if d := lo.TakeHash(fresh, 1, now); !d.Allowed {
		t.Fatalf("a new key after a release was refused: %+v", d)
	}
}
