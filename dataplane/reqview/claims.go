package reqview

// Claims are a caller's verified JWT claims (package identity verifies
// them), flattened once when the token is verified so that every rule reads
// a claim with one map lookup and no allocation: a string claim is its
// value, a number its JSON text, a boolean "true" or "false", an array or
// object its canonical JSON (keys sorted); the members of an object claim
// are reachable by dotted paths ("org.id"). null is absent. Claims are
// immutable and shared by every request that presents the same token.
type Claims struct {
	// Identity is the id of the identity that verified the token.
	Identity string
	flat     map[string]string
}

// NewClaims returns the claims verified by identity, flattened as Claims
// describes (flat is kept, not copied).
func NewClaims(identity string, flat map[string]string) *Claims {
	return &Claims{Identity: identity, flat: flat}
}

// Get returns the value of the claim at path (dotted for nested claims),
// and false when it is absent, null or empty. A nil *Claims has none.
func (c *Claims) Get(path string) (string, bool) {
	if c == nil {
		return "", false
	}
	v, ok := c.flat[path]
	return v, ok && v != ""
}

// Len is the number of flattened claims.
func (c *Claims) Len() int {
	if c == nil {
		return 0
	}
	return len(c.flat)
}
