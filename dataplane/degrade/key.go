package degrade

import (
	"fmt"

	"github.com/sluicegw/sluice/dataplane/reqview"
	"github.com/sluicegw/sluice/dataplane/reqview/classify"
)

// compileKey compiles a degrade rule's key with the limits' compiler
// (classify.ParseKey: one reading of key parts for every rule); IPv6 clients
// are keyed by their api.DefaultIPv6Prefix (/64).
func compileKey(key []string) (classify.Key, error) {
	k, err := classify.ParseKey(key, 0)
	if err != nil {
		return classify.Key{}, fmt.Errorf("key: %w", err)
	}
	return k, nil
}

// HashKey returns the 64-bit hash Admit takes for a client key that the
// caller has already built as a string. Equal strings give equal hashes, on
// every node (classify.StableHashString).
func HashKey(key string) uint64 { return classify.StableHashString(key) }

// KeyHash returns the hash of the request's client key over the rule's key
// dimensions (default [ip]), read from the request view exactly as limits
// read them (classify.Key; see package reqview for what each part means: a
// query value percent-decoded, so ?u=a%20b and ?u=a+b are one client; an
// absent or empty part hashes as "missing", one client for all who omit
// it), with the stable hash (classify.Key.StableHash) so that a client is shed
// alike on every node. Requests whose parts are ambiguous are refused before
// (classify.KeyCheck covers degrade keys too, and records the checked values in
// v). It does not allocate, except to decode a percent-encoded query value
// or cookie no check read. A nil Controller returns the hash of the global key.
func (c *Controller) KeyHash(v *reqview.View) uint64 {
	if c == nil {
		var global classify.Key
		return global.StableHash(v)
	}
	return c.key.StableHash(v)
}
