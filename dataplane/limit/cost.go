package limit

import (
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/reqview"
)

// costSpec says how many units a request costs for one limit.
type costSpec struct {
	header   string // canonical header name, or ""
	perUnit  int64  // body bytes per unit, or 0
	capacity int64  // what an unknown-length body is charged
}

func newCostSpec(c *api.Cost, capacity int64) costSpec {
	if c == nil {
		return costSpec{}
	}
	return costSpec{header: http.CanonicalHeaderKey(c.Header), perUnit: c.BodyBytesPerUnit, capacity: capacity}
}

// cost returns the request's cost:
//
//   - no cost rule: 1.
//   - header: the header's value as a decimal integer. Missing, malformed or
//     less than 1 costs 1, the least a request can cost, so that omitting or
//     garbling the header gains nothing; a value too large for int64 costs
//     MaxInt64 (above every capacity, so it is rejected).
//   - bodyBytesPerUnit: Content-Length divided by it, rounded up, at least 1.
//     A body of unknown length (chunked, or HTTP/2 without content-length)
//     cannot be measured before it is read, so it is charged the limit's
//     whole capacity (burst, or rate for windows): streaming a body does not
//     dodge its cost, and clients that want a fair charge send Content-Length.
func (c *costSpec) cost(v *reqview.View) int64 {
	switch {
	case c.header != "":
		vs := v.Header()[c.header]
		if len(vs) == 0 {
			return 1
		}
		n, err := strconv.ParseInt(strings.TrimSpace(vs[0]), 10, 64)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange && n > 0 {
				return math.MaxInt64
			}
			return 1
		}
		return max(1, n)
	case c.perUnit > 0:
		if v.ContentLength < 0 {
			return max(1, c.capacity)
		}
		if v.ContentLength == 0 {
			return 1
		}
		return (v.ContentLength-1)/c.perUnit + 1
	}
	return 1
}

// exemptList is a limit's exempt client prefixes.
type exemptList []netip.Prefix

func parseExempt(cidrs []string) (exemptList, error) {
	var ex exemptList
	for i, s := range cidrs {
		p, err := api.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("exempt[%d]: %w", i, err)
		}
		ex = append(ex, p)
	}
	return ex, nil
}

func (ex exemptList) contains(a netip.Addr) bool {
	if len(ex) == 0 || !a.IsValid() {
		return false
	}
	a = a.Unmap()
	for _, p := range ex {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
