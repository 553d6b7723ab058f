package postgres

// page is a list's page size: Default when the filter's Limit is zero, at
// most Max. The services apply it and return the next page's cursor, so the
// HTTP layer neither knows nor repeats the figures (the filters' docs in the
// root package state them).
type page struct{ Default, Max int }

var (
	changePage  = page{Default: 50, Max: 500}
	versionPage = page{Default: 50, Max: 500}
	auditPage   = page{Default: 100, Max: 1000}
)

// size is the number of rows to ask for.
func (p page) size(limit int) int {
	if limit <= 0 {
		return p.Default
	}
	return min(limit, p.Max)
}

// nextCursor is the cursor of the page after one of n rows of a page of
// size rows: the last row's id (last), or 0 when the page is not full.
func nextCursor(n, size int, last func() int64) int64 {
	if n == 0 || n < size {
		return 0
	}
	return last()
}
