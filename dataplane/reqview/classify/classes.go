package classify

import (
	"maps"
	"net/http"
	"net/textproto"
	"slices"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/reqview"
)

// Classes is a rule set's compiled priority classes (api.Class): Classify
// gives a request's class as an index, 0 for api.DefaultClass and i+1 for
// the rule set's classes[i]. Immutable after NewClasses and safe for
// concurrent use; a nil *Classes classifies every request as default.
type Classes struct {
	ids []string // by index; ids[0] is api.DefaultClass
	cs  []classMatch
}

type classMatch struct {
	routes  map[string]bool // nil: every route
	methods []string
	headers []headerEq
	claims  ClaimMatch // verified claims (as a limit tier matches them); empty: none required
}

type headerEq struct{ name, value string }

// NewClasses compiles classes, which must be validated and normalized
// (header names canonical).
func NewClasses(classes []api.Class) *Classes {
	c := &Classes{ids: []string{api.DefaultClass}}
	for _, cl := range classes {
		c.ids = append(c.ids, cl.ID)
		m := classMatch{methods: cl.Match.Methods}
		if len(cl.Match.Routes) > 0 {
			m.routes = map[string]bool{}
			for _, r := range cl.Match.Routes {
				m.routes[r] = true
			}
		}
		for _, name := range slices.Sorted(maps.Keys(cl.Match.Headers)) {
			m.headers = append(m.headers, headerEq{textproto.CanonicalMIMEHeaderKey(name), cl.Match.Headers[name]})
		}
		m.claims = CompileClaims(cl.Match.Claims)
		c.cs = append(c.cs, m)
	}
	return c
}

// Classify returns the index of r's class on route routeID: the first class
// whose every set condition holds, else 0 (default). It allocates nothing.
//
// A class that matches headers matches only a request from a trusted proxy
// (v.TrustedPeer): a header is a claim any client can make (X-Priority:
// critical), believed only when a proxy the operator runs sets or strips
// it. From any other peer such a class does not match, whatever the
// header says, and the request falls to the next class or the default (the
// header is still forwarded as sent). Routes and methods are what the
// request is, not what it claims, and match from anyone: a client that
// sends POST gets POST's treatment from the upstream too. Claims are
// matched against the verified token (v.Claims, set by the route's
// identity before classification), from any peer.
func (c *Classes) Classify(v *reqview.View, routeID string) int {
	if c == nil {
		return 0
	}
	for i := range c.cs {
		m := &c.cs[i]
		if m.routes != nil && !m.routes[routeID] {
			continue
		}
		if len(m.headers) > 0 && !v.TrustedPeer {
			continue
		}
		if len(m.methods) > 0 && !slices.Contains(m.methods, v.Method) {
			continue
		}
		// Claims are what an identity verified (v.Claims), whoever the
		// peer is; a request without verified claims does not match.
		if len(m.claims) > 0 && (v.Claims == nil || !m.claims.Match(v.Claims)) {
			continue
		}
		ok := true
		var header http.Header
		if len(m.headers) > 0 {
			header = v.Header()
		}
		for _, h := range m.headers {
			// Header names are canonical: read the map directly (Get would
			// canonicalize again).
			if hv := header[h.name]; len(hv) == 0 || hv[0] != h.value {
				ok = false
				break
			}
		}
		if ok {
			return i + 1
		}
	}
	return 0
}

// ID returns the id of class index i ("default" for 0 and for an index out
// of range).
func (c *Classes) ID(i int) string {
	if c == nil || i <= 0 || i >= len(c.ids) {
		return api.DefaultClass
	}
	return c.ids[i]
}

// IDs returns every class id by index; IDs()[0] is "default".
func (c *Classes) IDs() []string {
	if c == nil {
		return []string{api.DefaultClass}
	}
	return slices.Clone(c.ids)
}

// Index returns the index of class id, or -1.
func (c *Classes) Index(id string) int {
	if id == api.DefaultClass {
		return 0
	}
	if c == nil {
		return -1
	}
	return slices.Index(c.ids, id)
}
