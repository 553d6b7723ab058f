package reqview

// Decision outcomes a traced request's rules record (Decisions.Add).
const (
	DecisionAdmit  = "admit"  // a limit admitted the request
	DecisionReject = "reject" // a limit rejected it
	DecisionShadow = "shadow" // a shadow limit would have rejected it
	DecisionExempt = "exempt" // the client is exempt from a limit
	DecisionShed   = "shed"   // a degrade plan shed it
	DecisionRefuse = "refuse" // an open breaker, or an identity (a bad or missing token), refused it
)

// Decision is one rule's decision on a request.
type Decision struct {
	Rule, Outcome string
}

// Decisions are the decisions the rules took on one request whose span the
// gateway records (a sampled request; see package tracing), in the order
// taken. A View carries them (View.Decisions) only for such a request: Add
// on a nil *Decisions does nothing, so an unsampled request costs a nil
// check per rule.
type Decisions struct {
	list []Decision
}

// Add records that rule decided outcome (one of the Decision constants).
func (d *Decisions) Add(rule, outcome string) {
	if d != nil {
		d.list = append(d.list, Decision{rule, outcome})
	}
}

// All returns the decisions in the order taken.
func (d *Decisions) All() []Decision {
	if d == nil {
		return nil
	}
	return d.list
}
