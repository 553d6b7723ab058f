package degrade

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/admin"
	"github.com/sluicegw/sluice/dataplane/answer"
)

// OverrideRequest is the body of POST /degrade: force Rule to Level for TTL (a
// Go duration string such as "10m").
type OverrideRequest struct {
	Rule  string `json:"rule"`
	Level *int   `json:"level"`
	TTL   string `json:"ttl"`
}

// Handlers returns the node admin handlers of degrade, keyed by the pattern
// to mount them on (admin.Settings.Extra takes the map as it is):
//
//	GET  /degrades → {"degrades": [Status, ...]}
//	POST /degrade  ← OverrideRequest → 200 and the rule's Status; a body that
//	               is not one JSON object of known fields, an unknown rule, a
//	               level outside 0..2 or a missing, malformed, non-positive or
//	               too long (MaxOverrideTTL) ttl → 400 application/problem+json.
//
// current is called once per request and may return nil (no rules yet: every
// override is refused as naming an unknown rule). The handlers assume the
// request is already authorized: the admin endpoint's guard (loopback or
// admin token) runs before them.
func Handlers(current func() *Set) map[string]http.Handler {
	return map[string]http.Handler{
		"GET /degrades": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := current()
			var now int64
			if s != nil {
				now = s.opts.now()
			}
			admin.WriteJSON(w, http.StatusOK, struct {
				Degrades []Status `json:"degrades"`
			}{s.Status(now)})
		}),
		"POST /degrade": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var req OverrideRequest
			dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&req); err != nil {
				answer.WriteProblem(w, r, http.StatusBadRequest, "Invalid override", "the body must be one JSON object {rule, level, ttl}: "+err.Error())
				return
			}
			if _, err := dec.Token(); !errors.Is(err, io.EOF) {
				answer.WriteProblem(w, r, http.StatusBadRequest, "Invalid override", "the body must hold exactly one JSON object")
				return
			}
			if req.Level == nil {
				answer.WriteProblem(w, r, http.StatusBadRequest, "Invalid override", "level is required (0, 1 or 2)")
				return
			}
			if req.TTL == "" {
				answer.WriteProblem(w, r, http.StatusBadRequest, "Invalid override", "ttl is required, such as \"10m\"")
				return
			}
			ttl, err := api.ParseDuration(req.TTL)
			if err != nil {
				answer.WriteProblem(w, r, http.StatusBadRequest, "Invalid override", "ttl: "+err.Error())
				return
			}
			s := current()
			if s == nil {
				answer.WriteProblem(w, r, http.StatusBadRequest, "Invalid override", "no rule set is applied: degrade rule "+req.Rule+" does not exist")
				return
			}
			if err := s.SetOverrideFor(req.Rule, *req.Level, ttl); err != nil {
				answer.WriteProblem(w, r, http.StatusBadRequest, "Invalid override", err.Error())
				return
			}
			now := s.opts.now()
			for _, st := range s.Status(now) {
				if st.Rule == req.Rule {
					admin.WriteJSON(w, http.StatusOK, st)
					return
				}
			}
			admin.WriteJSON(w, http.StatusOK, struct{}{})
		}),
	}
}
