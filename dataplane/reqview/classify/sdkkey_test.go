package classify

import (
	"net/http/httptest"
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

// TestValueTextMatchesAcrossParts: a shared bucket's key (ValueText) has no
// part names, so a gateway's header:X-User and a service's sdk:user carrying
// one value are one key, still as a digest; other values stay apart.
func TestValueTextMatchesAcrossParts(t *testing.T) {
	t.Parallel()
	svc, err := ParseKey([]string{"sdk:user"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := ParseKey([]string{"header:X-User"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	sv := &reqview.View{RouteID: "orders.Create", Keys: map[string]string{"user": "alice"}}
	info := &testInfo{RouteID: "orders"}
	r := httptest.NewRequest("GET", "/orders", nil)
	r.Header.Set("X-User", "alice")
	gv := info.View(r)
	got := svc.ValueText(sv)
	if got != gw.ValueText(&gv) || !strings.HasPrefix(got, "#") || strings.Contains(got, "alice") {
		t.Fatalf("ValueText: service %q, gateway %q", got, gw.ValueText(&gv))
	}
	if svc.Text(sv) == gw.Text(&gv) {
		t.Fatal("Text names the parts: the two keys should differ there")
	}
	if svc.ValueText(&reqview.View{Keys: map[string]string{"user": "bob"}}) == got {
		t.Fatal("two users share a bucket key")
	}
}
