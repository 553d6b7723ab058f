package http_test

import (
	"fmt"
	"net/http"
	"testing"
)

// TestPaging walks every paged list through ?limit= and ?before=: each full
// page names the cursor of the next (the service returns it), the pages
// together hold every item once, and a page that is not full names none.
func TestPaging(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	admin, ed, ap := e.mustShop()
	for i := range 3 {
		publishRoutes(t, "shop", ed, ap, fmt.Sprintf("r%d", i))
	}
	tests := []struct {
		desc, path string
		id         string // the item field the cursor is
		atLeast    int
	}{
		{desc: "versions", path: "/api/v1/namespaces/shop/versions", id: "number", atLeast: 3},
		{desc: "changes", path: "/api/v1/namespaces/shop/changes", id: "id", atLeast: 3},
		{desc: "audit", path: "/api/v1/audit", id: "id", atLeast: 9},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var all []float64
			seen := map[float64]bool{}
			before := ""
			for pages := 0; ; pages++ {
				if pages > 100 {
					t.Fatal("more than 100 pages")
				}
				var page struct {
					Items []map[string]any `json:"items"`
					Next  float64          `json:"next"`
				}
				admin.must(http.StatusOK, "GET", tc.path+"?limit=2"+before, nil).decode(t, &page)
				for _, it := range page.Items {
					id := it[tc.id].(float64)
					if seen[id] {
						t.Fatalf("%s %v listed twice", tc.id, id)
					}
					seen[id] = true
					all = append(all, id)
				}
				if len(page.Items) < 2 {
					if page.Next != 0 {
						t.Fatalf("a page of %d items names next %v", len(page.Items), page.Next)
					}
					break
				}
				if last := page.Items[1][tc.id].(float64); page.Next != last {
					t.Fatalf("next = %v, want the last item's %s %v", page.Next, tc.id, last)
				}
				before = fmt.Sprintf("&before=%d", int64(page.Next))
			}
			if len(all) < tc.atLeast {
				t.Fatalf("%d items over every page, want at least %d", len(all), tc.atLeast)
			}
			var first struct {
				Items []map[string]any `json:"items"`
			}
			admin.must(http.StatusOK, "GET", tc.path, nil).decode(t, &first)
			if len(first.Items) != len(all) {
				t.Fatalf("one unpaged list holds %d items, the pages %d", len(first.Items), len(all))
			}
		})
	}
}
