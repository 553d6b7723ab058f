package classify

import (
	"strings"
	"testing"

	"github.com/sluicegw/sluice/dataplane/reqview"
)

// TestSDKKeyPart: an sdk:NAME part reads the value the service passed with
// the call (View.Keys); an absent or empty value is one "missing" key, and
// Text writes the value as a digest, as every other value.
func TestSDKKeyPart(t *testing.T) {
	t.Parallel()
	k, err := ParseKey([]string{"sdk:user", "route"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	view := func(keys map[string]string) *reqview.View { return &reqview.View{RouteID: "orders.Create", Keys: keys} }
	a, a2, b := view(map[string]string{"user": "alice"}), view(map[string]string{"user": "alice", "x": "y"}), view(map[string]string{"user": "bob"})
	if k.Hash(a) != k.Hash(a2) || k.StableHash(a) != k.StableHash(a2) {
		t.Fatal("one user hashes two ways")
	}
	if k.Hash(a) == k.Hash(b) || k.StableHash(a) == k.StableHash(b) {
		t.Fatal("two users share a key")
	}
	none, empty := view(nil), view(map[string]string{"user": ""})
	if k.Hash(none) != k.Hash(empty) || k.Hash(none) == k.Hash(a) {
		t.Fatal("a missing value is not one key apart from every value")
	}
	txt := k.Text(a)
	if strings.Contains(txt, "alice") || !strings.HasPrefix(txt, "sdk:user=#") || !strings.HasSuffix(txt, "|route=orders.Create") {
		t.Fatalf("Text = %q", txt)
	}
	if got := k.Text(none); got != "sdk:user=<missing>|route=orders.Create" {
		t.Fatalf("Text = %q", got)
	}
}
