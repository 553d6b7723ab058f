package classify

import (
	"net/http"
	"net/netip"

	"github.com/sluicegw/sluice/dataplane/reqview"
)

// testInfo is the route and client a test views a request with.
type testInfo struct {
	RouteID  string
	ClientIP netip.Addr
}

// View returns the request view of r with info's route and client.
func (info testInfo) View(r *http.Request) reqview.View {
	v := reqview.FromRequest(r)
	v.RouteID, v.ClientIP = info.RouteID, info.ClientIP
	return v
}
