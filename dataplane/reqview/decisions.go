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

// Observer takes one request's duration in seconds (a Prometheus histogram:
// prometheus.Observer).
type Observer interface{ Observe(seconds float64) }

// Latencies are the histograms a request's duration goes to once it is
// answered, beyond its route's: those of the limits with variants that let
// it through (each variant's sluice_limit_variant_request_duration_seconds).
// The limits add them as they decide (Add) and the request path observes
// the duration where it records the route's (Observe). The zero value holds
// none; a request of a route without variants never adds one and costs a
// length check. Two fit without an allocation.
type Latencies struct {
	buf  [2]Observer
	n    int
	more []Observer
}

// Add adds o to the histograms the request's duration goes to.
func (l *Latencies) Add(o Observer) {
	if l.n < len(l.buf) {
		l.buf[l.n] = o
	} else {
		l.more = append(l.more, o)
	}
	l.n++
}

// Reset forgets every histogram added (a request refused after a variant
// let it through is not its variant's to count).
func (l *Latencies) Reset() {
	l.buf, l.n, l.more = [2]Observer{}, 0, l.more[:0]
}

// Len is the number of histograms added.
func (l *Latencies) Len() int { return l.n }

// Observe observes seconds in every histogram added.
func (l *Latencies) Observe(seconds float64) {
	for i := 0; i < l.n; i++ {
		if i < len(l.buf) {
			l.buf[i].Observe(seconds)
		} else {
			l.more[i-len(l.buf)].Observe(seconds)
		}
	}
}
