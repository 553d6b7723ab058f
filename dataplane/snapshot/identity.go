package snapshot

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/answer"
	"github.com/sluicegw/sluice/dataplane/identity"
	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/dataplane/reqview"
)

// identityRule is one compiled identity: its verifier (key source and
// cache, carried over a swap when the identity's settings did not change)
// and its decision counters.
type identityRule struct {
	verifier *identity.Verifier
	settings string // the identity's normalized jwt settings, as JSON
	counts   [len(identity.Results)]prometheus.Counter
}

// IdentityWait is how long Compile waits for a new identity's first JWKS
// load (a URL fetch) before it serves without keys (tokens are then
// refused until the keys arrive).
const IdentityWait = 3 * time.Second

// compileIdentities builds the rule set's identities, reusing prev's
// verifiers (their loaded keys and verification caches) for identities
// whose settings did not change, and starting a key source for each new
// one.
func (s *Snapshot) compileIdentities(norm *api.RuleSet, prev *Snapshot, opts Options) {
	if len(norm.Identities) == 0 {
		return
	}
	s.identities = make(map[string]*identityRule, len(norm.Identities))
	for _, id := range norm.Identities {
		b, _ := json.Marshal(id)
		ir := &identityRule{settings: string(b)}
		if prev != nil {
			if old := prev.identities[id.ID]; old != nil && old.settings == ir.settings {
				ir.verifier = old.verifier
			}
		}
		if ir.verifier == nil {
			ks := identity.NewKeySource(identity.KeySettings{Source: id.JWT.JWKS, Logger: opts.Logger, Client: opts.JWKSClient})
			ks.Start(context.Background(), IdentityWait)
			ir.verifier = identity.New(identity.Settings{Identity: id, Keys: ks})
		}
		for r, name := range identity.Results {
			ir.counts[r] = opts.Metrics.IdentityDecisions.WithLabelValues(id.ID, name)
		}
		s.identities[id.ID] = ir
	}
}

// identityFor returns the compiled identity covering route, or nil.
func (s *Snapshot) identityFor(norm *api.RuleSet, route string) *identityRule {
	if i := norm.IdentityFor(route); i >= 0 {
		return s.identities[norm.Identities[i].ID]
	}
	return nil
}

// retireIdentities stops the key sources of s's identities that next does
// not carry (next nil: all of them).
func (s *Snapshot) retireIdentities(next *Snapshot) {
	for id, ir := range s.identities {
		if next != nil {
			if n := next.identities[id]; n != nil && n.verifier == ir.verifier {
				continue
			}
		}
		ir.verifier.Keys().Close()
	}
}

// checkIdentity runs the route's identity step on v: a valid token's
// claims go into v.Claims; an invalid token, or a missing one where the
// identity requires it, is answered 401 (problem+json with
// WWW-Authenticate: Bearer, or UNAUTHENTICATED to a gRPC request) and
// logged with its reason, never the token. It reports whether the request
// goes on.
func (s *Snapshot) checkIdentity(x Exchange, v *reqview.View, ir *identityRule, now int64) bool {
	ver := ir.verifier
	res, claims, reason := ver.Check(v.Header(), now)
	ir.counts[res].Inc()
	switch {
	case res == identity.Valid:
		v.Claims = claims
		return true
	case res == identity.Missing && !ver.Required():
		return true
	}
	challenge := `Bearer error="invalid_token"`
	detail := "the bearer token is not valid: " + reason
	if res == identity.Missing {
		challenge = `Bearer realm="` + ver.ID() + `"`
		detail = "a bearer token is required"
		reason = "no token"
	}
	s.limits.LogDecision(v, slog.LevelWarn, reqview.MsgIdentity, ver.ID(), "refuse", slog.String("reason", reason))
	x.Header()["Www-Authenticate"] = []string{challenge}
	answer.WriteProblemID(x, v.Header(), v.RequestID, http.StatusUnauthorized, "Unauthorized", detail)
	return false
}

// identityIDs names the snapshot's identities, for metrics.Live.
func (s *Snapshot) identityIDs(l *metrics.Live) {
	for id := range s.identities {
		l.Identities = append(l.Identities, id)
	}
}

// IdentityStatus is what /status shows of one identity: its JWKS source's
// state (keys loaded, loads, failures and the last failure).
type IdentityStatus struct {
	ID string `json:"id"`
	identity.Status
}

// Identities returns the state of the snapshot's identities, in rule-set
// order.
func (s *Snapshot) Identities() []IdentityStatus {
	var out []IdentityStatus
	for _, id := range s.Rules.Identities {
		if ir := s.identities[id.ID]; ir != nil {
			out = append(out, IdentityStatus{ID: id.ID, Status: ir.verifier.Keys().Status()})
		}
	}
	return out
}
