package preview

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/api"
)

// TestTrimKeys: a report keeps the keys rejected most across its limits,
// at most the bound, ties taken in order.
func TestTrimKeys(t *testing.T) {
	t.Parallel()
	var ls []api.PreviewCounts
	for i := range 20 {
		c := api.PreviewCounts{Rule: fmt.Sprintf("l%d", i)}
		for j := range TopKeys {
			c.TopKeys = append(c.TopKeys, api.PreviewKey{Key: fmt.Sprintf("k%d", j), Rejected: int64(100*i + 10 - j)})
		}
		ls = append(ls, c)
	}
	trimKeys(ls, api.MaxPreviewReportKeys)
	n, min := 0, int64(1<<62)
	for _, l := range ls {
		for _, k := range l.TopKeys {
			n++
			min = mini(min, k.Rejected)
		}
	}
	// 100 keys; the 64 kept are those of l8..l19 (60) and l7's four highest.
	if n != api.MaxPreviewReportKeys || min != 707 {
		t.Fatalf("%d keys kept, lowest count %d; want %d, 707", n, min, api.MaxPreviewReportKeys)
	}
}

func mini(a, b int64) int64 {
	if a < b {
		return a
	}
	return b
}

// TestKeyText: long keys are cut to the report's bound, UTF-8 intact, and
// stay apart by their hash.
func TestKeyText(t *testing.T) {
	t.Parallel()
	a, b := keyText("ip="+strings.Repeat("é", 60)+"a"), keyText("ip="+strings.Repeat("é", 60)+"b")
	if len(a) > api.MaxPreviewKeyText || a == b || !strings.HasPrefix(a, "ip=é") {
		t.Fatalf("keyText: %q, %q", a, b)
	}
}
