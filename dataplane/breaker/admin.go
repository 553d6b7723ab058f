package breaker

import (
	"net/http"

	"github.com/sluicegw/sluice/dataplane/admin"
)

// Handlers returns the node admin handlers of the breakers, keyed by the
// pattern to mount them on (admin.Settings.Extra takes the map as it is):
//
//	GET /breakers   → {"breakers": [Status, ...]} of the set current returns
//
// current is called once per request and may return nil (no rules yet). The
// handlers assume the request is already authorized: the admin endpoint's
// guard (loopback or admin token) runs before them.
func Handlers(current func() *Set) map[string]http.Handler {
	return map[string]http.Handler{
		"GET /breakers": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := current()
			var now int64
			if s != nil {
				now = s.opts.now()
			}
			admin.WriteJSON(w, http.StatusOK, struct {
				Breakers []Status `json:"breakers"`
			}{s.Status(now)})
		}),
	}
}
